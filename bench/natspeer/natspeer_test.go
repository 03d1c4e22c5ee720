package natspeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCAS: two connections over loopback TCP, keys spread over them by
// key mod conns; nine CASes succeed and a stale expectation is refused.
func TestCAS(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 3, 2193, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := url.Parse(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("server listens on %q, want loopback", db.URL())
	}
	if len(db.ncs) != 2 || db.ncs[0] == db.ncs[1] || db.conn(0) == db.conn(1) || db.conn(0) != db.conn(2) {
		t.Fatal("keys are not spread over two connections by key mod conns")
	}
	for i, nc := range db.ncs {
		if nc.ConnectedUrl() != db.URL() {
			t.Fatalf("connection %d reaches %q, want %q", i, nc.ConnectedUrl(), db.URL())
		}
	}
	for i := range 9 {
		before := db.Revision(i % 3)
		if err := db.CAS(i % 3); err != nil {
			t.Fatalf("CAS %d: %v", i, err)
		}
		if db.Revision(i%3) <= before {
			t.Fatalf("CAS %d: revision %d after %d", i, db.Revision(i%3), before)
		}
	}
	stale := db.revs[1]
	if err := db.CAS(1); err != nil {
		t.Fatal(err)
	}
	db.revs[1] = stale
	if err := db.CAS(1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale CAS = %v, want ErrConflict", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestServerSyncsEveryWrite: the running server's JetStream syncs every
// write, so an acknowledged CAS is durable as the store's is.
func TestServerSyncsEveryWrite(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 1, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := db.srvs[0].JetStreamConfig()
	if cfg == nil || !cfg.SyncAlways {
		t.Fatalf("JetStream config %+v: SyncAlways is off", cfg)
	}
}

// TestWatchSeesEveryLaterUpdate: watchers on two connections see each
// later update's revision, in order, and not the value from before.
func TestWatchSeesEveryLaterUpdate(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 1, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := make([]chan uint64, 2)
	for i := range seen {
		seen[i] = make(chan uint64, 8)
		ch := seen[i]
		if err := db.Watch(0, i, func(rev uint64) { ch <- rev }); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := db.CAS(0); err != nil {
			t.Fatal(err)
		}
		for i, ch := range seen {
			select {
			case rev := <-ch:
				if rev != db.Revision(0) {
					t.Fatalf("watcher %d saw revision %d, want %d", i, rev, db.Revision(0))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watcher %d saw no update of revision %d", i, db.Revision(0))
			}
		}
	}
}

// TestOpenRefusesBadSizes: a size that is not positive is refused before
// anything is started or written.
func TestOpenRefusesBadSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ keys, size, conns int }{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {-1, 1, 1}} {
		dir := t.TempDir()
		if _, err := Open(dir, tc.keys, tc.size, tc.conns); err == nil {
			t.Fatalf("Open(keys %d, size %d, conns %d) succeeded", tc.keys, tc.size, tc.conns)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("Open(keys %d, size %d, conns %d) wrote %d entries", tc.keys, tc.size, tc.conns, len(names))
		}
	}
}

// republishingKV stores each Update and then answers it as a replicated
// stream answers nats.go's second publish of a stored update: a revision
// conflict with code 10164.
type republishingKV struct {
	jetstream.KeyValue
}

func (kv republishingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if _, err := kv.KeyValue.Update(ctx, key, value, last); err != nil {
		return 0, err
	}
	return 0, replicatedConflict()
}

// TestCASAdoptsItsRepublishedUpdate: an update stored whose answer came
// back as a replicated stream's revision conflict is the owner's own, and
// the CAS succeeds at the stored revision; one whose stored value is not
// the owner's stays a conflict.
func TestCASAdoptsItsRepublishedUpdate(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 1, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	real := db.kvs[0]
	db.kvs[0] = republishingKV{real}
	before := db.Revision(0)
	if err := db.CAS(0); err != nil {
		t.Fatalf("CAS whose update was stored before the conflict: %v", err)
	}
	e, err := real.Get(context.Background(), keyOf(0))
	if err != nil {
		t.Fatal(err)
	}
	if db.Revision(0) <= before || db.Revision(0) != e.Revision() {
		t.Fatalf("revision %d after the adopted update, stored %d, before %d", db.Revision(0), e.Revision(), before)
	}
	db.kvs[0] = conflictKV{real}
	if err := db.CAS(0); !errors.Is(err, ErrConflict) {
		t.Fatalf("a 10164 conflict with another value = %v, want ErrConflict", err)
	}
}

// replicatedConflict is a revision conflict as nats.go's Update returns
// it from a replicated stream: code 10164, marked ErrKeyRevisionMismatch.
func replicatedConflict() error {
	api := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
	return fmt.Errorf("%w: %w", api, jetstream.ErrKeyRevisionMismatch)
}

// conflictKV answers every Update with a replicated stream's revision
// conflict after another writer stored a value of its own.
type conflictKV struct {
	jetstream.KeyValue
}

func (kv conflictKV) Update(ctx context.Context, key string, _ []byte, last uint64) (uint64, error) {
	if _, err := kv.KeyValue.Update(ctx, key, []byte("another writer's"), last); err != nil {
		return 0, err
	}
	return 0, replicatedConflict()
}
