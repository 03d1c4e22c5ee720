package watchcache_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/watchcache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "service/transcoder-a"

type ack struct {
	id  string
	seq uint64
}

// fakeSource is an in-memory store speaking the watch protocol
// synchronously: writes append the updates they produce to out, in order,
// and the test decides what reaches the cache (so it can drop, reorder or
// forge messages).
type fakeSource struct {
	mu        sync.Mutex
	rev       uint64
	data      map[string]*materialize.Entry
	watches   map[string]*fakeWatch
	out       []watch.Message
	acks      []ack
	unwatched []string
	watchIDs  []string
	watchErr  error
	ackErr    error
	// onWatch runs inside Watch before the snapshot is returned.
	onWatch func()
	// corrupt, when set, alters the snapshot Watch returns.
	corrupt func([]*materialize.Entry) []*materialize.Entry
}

type fakeWatch struct {
	prefix string
	seq    uint64
}

func newSource() *fakeSource {
	return &fakeSource{data: map[string]*materialize.Entry{}, watches: map[string]*fakeWatch{}}
}

func (f *fakeSource) Watch(id, namespace, prefix string) (uint64, []*materialize.Entry, error) {
	f.mu.Lock()
	hook := f.onWatch
	f.watchIDs = append(f.watchIDs, id)
	if f.watchErr != nil {
		f.mu.Unlock()
		return 0, nil, f.watchErr
	}
	if namespace != ns {
		f.mu.Unlock()
		return 0, nil, fmt.Errorf("namespace %q not served", namespace)
	}
	if f.watches[id] != nil {
		f.mu.Unlock()
		return 0, nil, fmt.Errorf("duplicate watch %q", id)
	}
	f.watches[id] = &fakeWatch{prefix: prefix}
	var entries []*materialize.Entry
	for k, e := range f.data {
		if strings.HasPrefix(k, prefix) {
			entries = append(entries, e)
		}
	}
	if f.corrupt != nil {
		entries = f.corrupt(entries)
	}
	rev := f.rev
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return rev, entries, nil
}

func (f *fakeSource) Unwatch(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unwatched = append(f.unwatched, id)
	if f.watches[id] == nil {
		return fmt.Errorf("unknown watch %q", id)
	}
	delete(f.watches, id)
	return nil
}

func (f *fakeSource) Ack(id string, applied uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ackErr != nil {
		return f.ackErr
	}
	w := f.watches[id]
	if w == nil {
		return fmt.Errorf("unknown watch %q", id)
	}
	if applied > w.seq {
		return fmt.Errorf("ack %d beyond %d", applied, w.seq)
	}
	f.acks = append(f.acks, ack{id, applied})
	return nil
}

// commit records one mutation and fans it out to matching watches.
func (f *fakeSource) commit(kind watch.Kind, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	var e *materialize.Entry
	if kind == watch.Put {
		e = &materialize.Entry{Namespace: ns, Key: key, Revision: f.rev, Document: []byte(fmt.Sprintf(`{"rev":%d}`, f.rev))}
		f.data[key] = e
	} else {
		delete(f.data, key)
	}
	ids := make([]string, 0, len(f.watches))
	for id := range f.watches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := f.watches[id]
		if strings.HasPrefix(key, w.prefix) {
			w.seq++
			f.out = append(f.out, &watch.Update{WatchID: id, Sequence: w.seq, Revision: f.rev, Kind: kind,
				Namespace: ns, Key: key, Entry: e})
		}
	}
}

func (f *fakeSource) put(key string)    { f.commit(watch.Put, key) }
func (f *fakeSource) del(key string)    { f.commit(watch.Delete, key) }
func (f *fakeSource) expire(key string) { f.commit(watch.Expire, key) }

// closeWatch ends a watch server-side with a Closed message.
func (f *fakeSource) closeWatch(id string, r watch.Reason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.watches, id)
	f.out = append(f.out, &watch.Closed{WatchID: id, Reason: r})
}

func (f *fakeSource) take() []watch.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.out
	f.out = nil
	return out
}

// pump hands everything on the wire to the cache, until the wire is quiet.
func pump(t *testing.T, c *watchcache.Cache, f *fakeSource) {
	t.Helper()
	for ms := f.take(); len(ms) > 0; ms = f.take() {
		for _, m := range ms {
			// An ack racing the server's close of the watch fails; the
			// Closed message that follows repairs the cache.
			if err := c.Handle(m); err != nil && !errors.Is(err, watchcache.ErrAck) {
				t.Fatalf("Handle: %v", err)
			}
		}
	}
}

// wantInSync checks the cache holds exactly the source's entries under
// prefix (the very same entry pointers).
func wantInSync(t *testing.T, c *watchcache.Cache, f *fakeSource, prefix string) {
	t.Helper()
	f.mu.Lock()
	var keys []string
	want := map[string]*materialize.Entry{}
	for k, e := range f.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
			want[k] = e
		}
	}
	f.mu.Unlock()
	slices.Sort(keys)
	if got := c.Keys(); !slices.Equal(got, keys) {
		t.Fatalf("cache keys %v, source %v", got, keys)
	}
	for k, e := range want {
		if got, ok := c.Get(k); !ok || got != e {
			t.Fatalf("cache %q = %v, source %v", k, got, e)
		}
	}
}

func started(t *testing.T, f *fakeSource, prefix string) *watchcache.Cache {
	t.Helper()
	c := watchcache.New(f, ns, prefix, watchcache.WithWatchID("cache"))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStartInstallsSnapshot(t *testing.T) {
	t.Parallel()
	f := newSource()
	for _, k := range []string{"intents/a", "intents/b", "status/a"} {
		f.put(k)
	}
	f.take()
	c := started(t, f, "intents/")
	wantInSync(t, c, f, "intents/")
	if c.Revision() != 3 || c.WatchID() != "cache-1" || !c.Synced() || c.Resnapshots() != 0 || c.Applied() != 0 {
		t.Fatalf("revision %d watch %q synced %v resnapshots %d applied %d", c.Revision(), c.WatchID(), c.Synced(), c.Resnapshots(), c.Applied())
	}
	if err := c.Start(); err != nil || len(f.watchIDs) != 1 {
		t.Fatalf("second Start: %v, %d watches", err, len(f.watchIDs))
	}
	if _, ok := c.Get("status/a"); ok {
		t.Fatal("key outside the prefix cached")
	}
}

func TestDefaultWatchIDsAreDistinct(t *testing.T) {
	t.Parallel()
	f := newSource()
	a, b := watchcache.New(f, ns, ""), watchcache.New(f, ns, "")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if a.WatchID() == b.WatchID() {
		t.Fatalf("both caches use %q", a.WatchID())
	}
}

func TestAppliesInOrderAndAcks(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "intents/")
	f.put("intents/a")
	f.put("intents/b")
	f.del("intents/a")
	f.put("intents/c")
	f.expire("intents/c")
	f.put("intents/b")
	msgs := f.take()
	for i, m := range msgs {
		if err := c.Handle(m); err != nil {
			t.Fatal(err)
		}
		// Acked as applied: exactly one ack per update, right after it.
		if len(f.acks) != i+1 || f.acks[i] != (ack{"cache-1", uint64(i + 1)}) {
			t.Fatalf("after update %d acks are %v", i+1, f.acks)
		}
	}
	wantInSync(t, c, f, "intents/")
	if c.Revision() != 6 || c.Applied() != 6 || c.Resnapshots() != 0 {
		t.Fatalf("revision %d applied %d resnapshots %d", c.Revision(), c.Applied(), c.Resnapshots())
	}
}

// The namespace revision also counts keys outside the prefix, so revisions
// may skip while sequences do not: nothing to repair.
func TestRevisionSkipIsHarmless(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "intents/")
	f.put("intents/a")
	f.put("status/x")
	f.put("status/y")
	f.put("intents/b")
	pump(t, c, f)
	wantInSync(t, c, f, "intents/")
	if c.Resnapshots() != 0 || c.Revision() != 4 || c.Applied() != 2 {
		t.Fatalf("resnapshots %d revision %d applied %d", c.Resnapshots(), c.Revision(), c.Applied())
	}
}

func TestSequenceGapResnapshots(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "intents/")
	f.put("intents/a")
	f.put("intents/b")
	f.put("intents/c")
	msgs := f.take()
	// The keys are replaced only once the new snapshot is installed: while
	// Watch runs, readers still see the state before the gap.
	f.onWatch = func() {
		if got := c.Keys(); !slices.Equal(got, []string{"intents/a"}) {
			t.Errorf("during re-snapshot readers see %v", got)
		}
	}
	if err := c.Handle(msgs[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(msgs[2]); err != nil { // sequence 3 after 1: a gap
		t.Fatal(err)
	}
	f.onWatch = nil
	if c.Resnapshots() != 1 || c.WatchID() != "cache-2" || !slices.Equal(f.unwatched, []string{"cache-1"}) {
		t.Fatalf("resnapshots %d watch %q unwatched %v", c.Resnapshots(), c.WatchID(), f.unwatched)
	}
	wantInSync(t, c, f, "intents/")
	// The lost update arriving late belongs to the replaced watch: ignored.
	if err := c.Handle(msgs[1]); err != nil || c.Resnapshots() != 1 {
		t.Fatalf("late update of the old watch: %v, resnapshots %d", err, c.Resnapshots())
	}
	f.put("intents/d")
	f.del("intents/a")
	pump(t, c, f)
	wantInSync(t, c, f, "intents/")
	if c.Applied() != 2 || f.acks[len(f.acks)-1] != (ack{"cache-2", 2}) {
		t.Fatalf("applied %d, acks %v", c.Applied(), f.acks)
	}
}

func TestRepeatedSequenceResnapshots(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "")
	f.put("a")
	msgs := f.take()
	for _, m := range []watch.Message{msgs[0], msgs[0]} {
		if err := c.Handle(m); err != nil {
			t.Fatal(err)
		}
	}
	if c.Resnapshots() != 1 {
		t.Fatalf("resnapshots %d", c.Resnapshots())
	}
	wantInSync(t, c, f, "")
}

func TestClosedResnapshots(t *testing.T) {
	t.Parallel()
	for _, r := range []watch.Reason{watch.BufferOverflow, watch.AckTimeout, watch.Restored, watch.Unavailable} {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			f := newSource()
			c := started(t, f, "intents/")
			f.put("intents/a")
			f.closeWatch("cache-1", r)
			f.put("intents/b") // after the close: only the new snapshot has it
			pump(t, c, f)
			if c.Resnapshots() != 1 || c.WatchID() != "cache-2" {
				t.Fatalf("resnapshots %d watch %q", c.Resnapshots(), c.WatchID())
			}
			wantInSync(t, c, f, "intents/")
			// A Closed for a watch the cache no longer follows is ignored.
			if err := c.Handle(&watch.Closed{WatchID: "cache-1", Reason: r}); err != nil || c.Resnapshots() != 1 {
				t.Fatalf("stale Closed: %v, resnapshots %d", err, c.Resnapshots())
			}
		})
	}
}

func TestRejectedUpdateResnapshots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		forge func(u *watch.Update)
	}{
		{"key outside the prefix", func(u *watch.Update) { u.Key = "status/x" }},
		{"other namespace", func(u *watch.Update) { u.Namespace = "service/other" }},
		{"PUT without entry", func(u *watch.Update) { u.Entry = nil }},
		{"PUT entry for another key", func(u *watch.Update) {
			u.Entry = &materialize.Entry{Namespace: ns, Key: "intents/zzz", Revision: u.Revision}
		}},
		{"PUT entry with another revision", func(u *watch.Update) {
			u.Entry = &materialize.Entry{Namespace: ns, Key: u.Key, Revision: u.Revision + 1}
		}},
		{"revision not increasing", func(u *watch.Update) { u.Revision = 1; u.Entry.Revision = 1 }},
		{"DELETE of a key the cache lacks", func(u *watch.Update) { u.Kind = watch.Delete; u.Key = "intents/nope"; u.Entry = nil }},
		{"EXPIRE of a key the cache lacks", func(u *watch.Update) { u.Kind = watch.Expire; u.Key = "intents/nope"; u.Entry = nil }},
		{"unknown kind", func(u *watch.Update) { u.Kind = 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newSource()
			cache := started(t, f, "intents/")
			f.put("intents/a")
			f.put("intents/b")
			ms := f.take()
			if err := cache.Handle(ms[0]); err != nil {
				t.Fatal(err)
			}
			bad := *ms[1].(*watch.Update)
			c.forge(&bad)
			if err := cache.Handle(&bad); err != nil {
				t.Fatal(err)
			}
			if cache.Resnapshots() != 1 || cache.WatchID() != "cache-2" {
				t.Fatalf("resnapshots %d watch %q", cache.Resnapshots(), cache.WatchID())
			}
			for _, a := range f.acks {
				if a.seq == 2 {
					t.Fatalf("rejected update acked: %v", f.acks)
				}
			}
			wantInSync(t, cache, f, "intents/")
		})
	}
}

func TestDisconnected(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "intents/")
	f.put("intents/a")
	pump(t, c, f)
	if err := c.Disconnected(); err != nil {
		t.Fatal(err)
	}
	// The session is gone server-side with its watches.
	f.mu.Lock()
	clear(f.watches)
	f.mu.Unlock()
	if c.Synced() || c.WatchID() != "" {
		t.Fatal("still synced after a disconnect")
	}
	// In-flight messages of the lost channel are ignored.
	if err := c.Handle(&watch.Update{WatchID: "cache-1", Sequence: 2, Revision: 9, Kind: watch.Put, Namespace: ns, Key: "intents/x",
		Entry: &materialize.Entry{Namespace: ns, Key: "intents/x", Revision: 9}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("intents/x"); ok {
		t.Fatal("applied a message after the disconnect")
	}
	// Readers keep the last state meanwhile.
	if !slices.Equal(c.Keys(), []string{"intents/a"}) {
		t.Fatalf("keys %v", c.Keys())
	}
	f.put("intents/b")
	f.take()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if len(f.unwatched) != 0 {
		t.Fatalf("unwatched %v on a lost channel", f.unwatched)
	}
	if c.WatchID() != "cache-2" || c.Resnapshots() != 1 {
		t.Fatalf("watch %q resnapshots %d", c.WatchID(), c.Resnapshots())
	}
	wantInSync(t, c, f, "intents/")
}

func TestResync(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "")
	f.put("a")
	pump(t, c, f)
	if err := c.Resync(); err != nil {
		t.Fatal(err)
	}
	if c.WatchID() != "cache-2" || c.Resnapshots() != 1 || !slices.Equal(f.unwatched, []string{"cache-1"}) {
		t.Fatalf("watch %q resnapshots %d unwatched %v", c.WatchID(), c.Resnapshots(), f.unwatched)
	}
	wantInSync(t, c, f, "")
}

// A failed re-snapshot keeps the last consistent state, follows nothing,
// and a later Start recovers.
func TestFailedResnapshotKeepsState(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "")
	f.put("a")
	pump(t, c, f)
	f.watchErr = errors.New("UNAVAILABLE")
	f.put("b")
	f.closeWatch("cache-1", watch.Restored)
	ms := f.take()
	if err := c.Handle(ms[0]); !errors.Is(err, watchcache.ErrAck) { // b applies; its ack finds the watch closed
		t.Fatal(err)
	}
	err := c.Handle(ms[1])
	if err == nil || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatalf("Handle of Closed with Watch failing: %v", err)
	}
	if c.Synced() || !slices.Equal(c.Keys(), []string{"a", "b"}) {
		t.Fatalf("synced %v keys %v", c.Synced(), c.Keys())
	}
	f.watchErr = nil
	f.put("c")
	f.take()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.WatchID() != "cache-3" || c.Resnapshots() != 1 {
		t.Fatalf("watch %q resnapshots %d", c.WatchID(), c.Resnapshots())
	}
	wantInSync(t, c, f, "")
}

func TestInvalidSnapshotRejected(t *testing.T) {
	t.Parallel()
	cases := map[string]func([]*materialize.Entry) []*materialize.Entry{
		"outside prefix": func(es []*materialize.Entry) []*materialize.Entry {
			return append(es, &materialize.Entry{Namespace: ns, Key: "status/x"})
		},
		"nil entry": func(es []*materialize.Entry) []*materialize.Entry { return append(es, nil) },
		"after snapshot revision": func(es []*materialize.Entry) []*materialize.Entry {
			return append(es, &materialize.Entry{Namespace: ns, Key: "intents/x", Revision: 99})
		},
		"duplicate key": func(es []*materialize.Entry) []*materialize.Entry { return append(es, es[0]) },
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newSource()
			f.put("intents/a")
			f.take()
			f.corrupt = corrupt
			c := watchcache.New(f, ns, "intents/", watchcache.WithWatchID("cache"))
			if err := c.Start(); err == nil {
				t.Fatal("Start accepted a corrupt snapshot")
			}
			if len(c.Keys()) != 0 || c.Synced() || !slices.Equal(f.unwatched, []string{"cache-1"}) {
				t.Fatalf("keys %v synced %v unwatched %v", c.Keys(), c.Synced(), f.unwatched)
			}
			f.corrupt = nil
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			wantInSync(t, c, f, "intents/")
		})
	}
}

func TestAckFailureIsReturned(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "")
	f.ackErr = errors.New("channel full")
	f.put("a")
	ms := f.take()
	if err := c.Handle(ms[0]); !errors.Is(err, watchcache.ErrAck) || !strings.Contains(err.Error(), "channel full") {
		t.Fatalf("Handle: %v", err)
	}
	if _, ok := c.Get("a"); !ok || c.Applied() != 1 {
		t.Fatal("the update must stay applied")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := started(t, f, "")
	f.put("a")
	pump(t, c, f)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.unwatched, []string{"cache-1"}) {
		t.Fatalf("unwatched %v", f.unwatched)
	}
	for name, fn := range map[string]func() error{"Start": c.Start, "Resync": c.Resync, "Disconnected": c.Disconnected} {
		if err := fn(); !errors.Is(err, watchcache.ErrClosed) {
			t.Fatalf("%s after Close: %v", name, err)
		}
	}
	if err := c.Handle(&watch.Closed{WatchID: "cache-1"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Keys(), []string{"a"}) {
		t.Fatalf("keys %v", c.Keys())
	}
}

func TestHandleBeforeStartIgnored(t *testing.T) {
	t.Parallel()
	f := newSource()
	c := watchcache.New(f, ns, "")
	if err := c.Handle(&watch.Closed{WatchID: "x"}); err != nil || len(f.watchIDs) != 0 {
		t.Fatalf("Handle before Start: %v, watches %v", err, f.watchIDs)
	}
	if err := c.Handle(&watch.Snapshot{WatchID: "x"}); err != nil {
		t.Fatal(err)
	}
}
