package statestore

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// probeClock is a fake clock that runs probe, when set, on every Now: the
// watch path reads the clock while it captures its snapshot, so a probe
// sees which locks are held at that instant.
type probeClock struct {
	*clock.Fake
	probe atomic.Pointer[func()]
}

func (c *probeClock) Now() time.Time {
	if p := c.probe.Load(); p != nil {
		(*p)()
	}
	return c.Fake.Now()
}

// TestSettingsWatchSnapshotUnderTheConfigurationLock: a watch on a
// settings-backed namespace captures its snapshot and registers under the
// configuration lock, which every settings commit holds from admission
// until its updates are queued; so no commit falls between the snapshot
// and the registration (in neither, or in both). The probe, run while the
// snapshot is captured, finds the lock held; once the watch is
// registered, a settings write reaches it exactly once. (Internal: only
// the lock shows the ordering; no schedule the test could force does.)
func TestSettingsWatchSnapshotUnderTheConfigurationLock(t *testing.T) {
	t.Parallel()
	orig, err := os.ReadFile("testdata/settings-config.toml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	clk := &probeClock{Fake: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	s, err := Open(Options{Dir: t.TempDir(), Clock: clk, Settings: config, CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	admin := Principal{ID: "ops", Admin: true}
	const ns = "group/living-room"
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"cam","media_kind":"video"}`)
	put := func(key string) {
		t.Helper()
		if _, err := s.Put(ctx, admin, PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc}); err != nil {
			t.Fatal(err)
		}
	}
	put("before")
	sink := watch.NewChanSink(16)
	ss, err := s.OpenSession(admin, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()

	var held, free atomic.Int32
	probe := func() {
		if s.settings.mu.TryLock() {
			free.Add(1)
			s.settings.mu.Unlock()
		} else {
			held.Add(1)
		}
	}
	clk.probe.Store(&probe)
	res, err := s.Watch(ctx, ss, WatchRequest{WatchID: "w", Namespace: ns})
	clk.probe.Store(nil)
	if err != nil {
		t.Fatal(err)
	}
	if free.Load() != 0 || held.Load() == 0 {
		t.Fatalf("the snapshot read the clock %d times with the configuration lock free and %d with it held; want it held every time",
			free.Load(), held.Load())
	}
	if len(res.Entries) != 1 || res.Entries[0].Key != "before" || res.SnapshotRevision != 1 {
		t.Fatalf("snapshot at revision %d with %+v", res.SnapshotRevision, res.Entries)
	}
	put("after")
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-sink.C():
			if _, ok := m.(*watch.Snapshot); ok {
				continue
			}
			if u, ok := m.(*watch.Update); !ok || u.Sequence != 1 || u.Key != "after" || u.Revision != 2 {
				t.Fatalf("message %#v, want the update of after at revision 2", m)
			}
			return
		case <-timeout:
			t.Fatal("the settings write never reached the watch")
		}
	}
}
