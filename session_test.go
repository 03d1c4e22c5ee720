package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/watchcache"
)

// chanSink delivers every message to a channel the test reads; fail, if
// set, can refuse a message as a broken control channel would.
type chanSink struct {
	ch   chan watch.Message
	fail func(watch.Message) error
}

func newSink() *chanSink { return &chanSink{ch: make(chan watch.Message, 4096)} }

func (c *chanSink) Deliver(m watch.Message) error {
	if c.fail != nil {
		if err := c.fail(m); err != nil {
			return err
		}
	}
	c.ch <- m
	return nil
}

// next returns the next message, failing the test if none arrives.
func (c *chanSink) next(t testing.TB) watch.Message {
	t.Helper()
	select {
	case m := <-c.ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message delivered")
		return nil
	}
}

func (c *chanSink) nextUpdate(t testing.TB) *watch.Update {
	t.Helper()
	for {
		switch m := c.next(t).(type) {
		case *watch.Update:
			return m
		case *watch.Snapshot:
			continue
		default:
			t.Fatalf("want an update, got %#v", m)
		}
	}
}

func (c *chanSink) nextClosed(t *testing.T) *watch.Closed {
	t.Helper()
	for {
		if m, ok := c.next(t).(*watch.Closed); ok {
			return m
		}
	}
}

// empty fails if an update or closure is waiting. Snapshots are skipped:
// they are the replies to the watch requests the test already checked.
func (c *chanSink) empty(t *testing.T) {
	t.Helper()
	for {
		select {
		case m := <-c.ch:
			if _, ok := m.(*watch.Snapshot); ok {
				continue
			}
			t.Fatalf("unexpected message %#v", m)
		default:
			return
		}
	}
}

func (f *fixture) session(p statestore.Principal) (*statestore.Session, *chanSink) {
	f.t.Helper()
	sink := newSink()
	ss, err := f.s.OpenSession(p, sink)
	if err != nil {
		f.t.Fatal(err)
	}
	return ss, sink
}

func (f *fixture) watch(ss *statestore.Session, id, ns, prefix string) statestore.WatchResult {
	f.t.Helper()
	res, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: id, Namespace: ns, KeyPrefix: prefix})
	if err != nil {
		f.t.Fatalf("watch %s: %v", id, err)
	}
	return res
}

// TestScenario2LeaseExpiryReachesEveryWatcher: one lapsed lease reaches
// every matching watcher as exactly one ordered EXPIRE update, with no Get
// to provoke it; a watcher on another prefix sees a revision skip and no
// sequence skip.
func TestScenario2LeaseExpiryReachesEveryWatcher(t *testing.T) {
	t.Parallel()
	eachStoreHome(t, func(t *testing.T, h home) {
		f := h.open(t)
		ns := "service/transcoder-a"
		lease, err := f.lease(admin, ns, "leases/front-door", statestore.CreateOnly, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var leaseWatchers []*chanSink
		for i := 0; i < 3; i++ {
			ss, sink := f.session(admin)
			res := f.watch(ss, "leases", ns, "leases/")
			if len(res.Entries) != 1 || res.SnapshotRevision != lease.Revision {
				t.Fatalf("snapshot %+v", res)
			}
			leaseWatchers = append(leaseWatchers, sink)
		}
		ss, other := f.session(admin)
		f.watch(ss, "intents", ns, "intents/")
		i1 := f.mustPut(admin, ns, "intents/a", docN(1))
		if u := other.nextUpdate(t); u.Sequence != 1 || u.Revision != i1.Revision {
			t.Fatalf("first intent update %+v", u)
		}
		for _, s := range leaseWatchers {
			s.empty(t) // an intent write is not a lease watcher's business
		}
		// The lease lapses: the expiry timer commits the EXPIRE on its own.
		f.clock.Advance(5 * time.Second)
		for _, s := range leaseWatchers {
			u := s.nextUpdate(t)
			if u.Kind != watch.Expire || u.Key != "leases/front-door" || u.Sequence != 1 || u.Revision != i1.Revision+1 {
				t.Fatalf("expire update %+v", u)
			}
		}
		i2 := f.mustPut(admin, ns, "intents/b", docN(2))
		u := other.nextUpdate(t)
		if u.Sequence != 2 || u.Revision != i2.Revision || u.Revision != i1.Revision+2 {
			t.Fatalf("other prefix: %+v — want sequence 2 (no gap) at revision %d (a skip past the EXPIRE)", u, i1.Revision+2)
		}
		for _, s := range leaseWatchers {
			s.empty(t) // exactly one EXPIRE each
		}
	})
}

// TestScenario3WatchDuringWrites hammers watch registration against
// concurrent writes and checks each watch's recorded history against the
// journal: the snapshot is the namespace exactly at its revision, and the
// updates are exactly the later matching records, in order, each once,
// with contiguous sequences.
func TestScenario3WatchDuringWrites(t *testing.T) {
	t.Parallel()
	eachStoreHome(t, func(t *testing.T, h home) {
		// No checkpoints: the whole journal is the reference history.
		f := h.open(t, func(o *statestore.Options) {
			o.Limits.MaxWatches, o.Limits.MaxWatchesPerSession, o.CheckpointBytes = 4096, 4096, -1
		})
		const ns = "group/hammer"
		var stop atomic.Bool
		var writers sync.WaitGroup
		for w := 0; w < 6; w++ {
			writers.Add(1)
			go func(w int) {
				defer writers.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for i := 0; !stop.Load(); i++ {
					key := fmt.Sprintf("%s/k%d", []string{"a", "b"}[rng.IntN(2)], rng.IntN(8))
					if rng.IntN(4) == 0 {
						f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key})
					} else if _, err := f.put(admin, ns, key, docN(w*100000+i), statestore.Expect{}); notApplied(err) {
						continue // a cluster home between leaders: nothing was written
					} else if err != nil {
						t.Error(err)
						return
					}
				}
			}(w)
		}
		type history struct {
			prefix string
			snap   statestore.WatchResult
			msgs   []watch.Message
		}
		var (
			mu        sync.Mutex
			histories []*history
		)
		iterations := 2000
		if testing.Short() {
			iterations = 300
		}
		var watchers sync.WaitGroup
		for g := 0; g < 4; g++ {
			watchers.Add(1)
			go func(g int) {
				defer watchers.Done()
				for i := 0; i < iterations/4; i++ {
					sink := newSink()
					ss, err := f.s.OpenSession(admin, sink)
					if err != nil {
						t.Error(err)
						return
					}
					h := &history{prefix: []string{"a/", "b/", ""}[i%3]}
					// A cluster home between leaders refuses the watch's
					// read index; a bounded number of tries waits it out.
					for try := 0; ; try++ {
						h.snap, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: ns, KeyPrefix: h.prefix})
						if !notApplied(err) || try == 20 {
							break
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
					// Collect a few updates (acknowledging them), then disconnect.
					for n := 0; n < 1+i%4; n++ {
						select {
						case m := <-sink.ch:
							h.msgs = append(h.msgs, m)
							if u, ok := m.(*watch.Update); ok {
								f.s.Ack(ss, "w", u.Sequence)
							}
						case <-time.After(time.Second):
							n = 99
						}
					}
					ss.Close()
					mu.Lock()
					histories = append(histories, h)
					mu.Unlock()
				}
			}(g)
		}
		watchers.Wait()
		stop.Store(true)
		writers.Wait()
		f.s.Close()
		f.s = nil

		// The journal (a cluster's raft log) is the commit order: rebuild
		// the namespace's states.
		var recs []*journal.Record
		if f.node != nil {
			recs = f.node.raftRecords(t, ns)
		} else {
			journal.ReplayDir(filepath.Join(f.dir, statestore.StoreDirName, "journal"), 1, 0, journal.Limits{}, func(_ uint64, r *journal.Record) error {
				if r.Namespace == ns {
					recs = append(recs, r)
				}
				return nil
			})
		}
		byRev := map[uint64]int{} // namespace revision -> position in recs
		for i, r := range recs {
			byRev[r.Revision] = i
		}
		// Snapshots: the namespace exactly at each SnapshotRevision, built by
		// applying the journal once, in revision order.
		sort.Slice(histories, func(i, j int) bool { return histories[i].snap.SnapshotRevision < histories[j].snap.SnapshotRevision })
		v := materialize.New()
		applied := 0
		for hi, h := range histories {
			for applied < len(recs) && recs[applied].Revision <= h.snap.SnapshotRevision {
				v.Apply(recs[applied])
				applied++
			}
			var want []string
			v.Ascend(ns, h.prefix, func(e *materialize.Entry) bool {
				want = append(want, fmt.Sprintf("%s@%d", e.Key, e.Revision))
				return true
			})
			var got []string
			for _, e := range h.snap.Entries {
				got = append(got, fmt.Sprintf("%s@%d", e.Key, e.Revision))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("history %d: snapshot at %d is %v, the journal says %v", hi, h.snap.SnapshotRevision, got, want)
			}
		}
		verified := 0
		for hi, h := range histories {
			// Updates: the matching records after the snapshot, in order, once.
			var expected []*journal.Record
			start := 0
			if h.snap.SnapshotRevision > 0 {
				start = byRev[h.snap.SnapshotRevision] + 1
			}
			for _, r := range recs[start:] {
				if len(expected) == len(h.msgs) {
					break // no history holds more updates than messages
				}
				if strings.HasPrefix(r.Key, h.prefix) {
					expected = append(expected, r)
				}
			}
			seq := 0
			for _, m := range h.msgs {
				u, ok := m.(*watch.Update)
				if !ok {
					continue
				}
				if int(u.Sequence) != seq+1 {
					t.Fatalf("history %d: sequence %d after %d", hi, u.Sequence, seq)
				}
				if seq >= len(expected) {
					t.Fatalf("history %d: update %+v beyond the journal", hi, u)
				}
				r := expected[seq]
				if u.Revision != r.Revision || u.Key != r.Key || u.Kind.String() != r.Kind.String() {
					t.Fatalf("history %d: update %d is %s %s@%d, journal has %s %s@%d", hi, u.Sequence, u.Kind, u.Key, u.Revision, r.Kind, r.Key, r.Revision)
				}
				if u.Revision <= h.snap.SnapshotRevision {
					t.Fatalf("history %d: update at revision %d is already in the snapshot at %d", hi, u.Revision, h.snap.SnapshotRevision)
				}
				seq++
			}
			verified += seq
		}
		if len(histories) != iterations/4*4 || verified < len(histories)/4 {
			t.Fatalf("%d histories recorded, %d updates verified: the hammer checked too little", len(histories), verified)
		}
	})
}

// notApplied reports a refusal a cluster node gives while it knows no
// leader (UNAVAILABLE on field leader or leaderless_after): the call was
// never applied, so a test may simply go on or try again. A single store
// never answers it.
func notApplied(err error) bool {
	var se *statestore.Error
	return errors.As(err, &se) && se.Code == statestore.Unavailable && (se.Field == "leader" || se.Field == statestore.FieldLeaderlessAfter)
}

func TestWatchBounds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := 0; i < 65; i++ {
		f.mustPut(admin, "group/big", fmt.Sprintf("many/k%02d", i), docN(i))
	}
	for i := 0; i < 30; i++ {
		f.mustPut(admin, "group/big", fmt.Sprintf("heavy/k%02d", i), []byte(fmt.Sprintf(`{"role":"subscribe","desired":true,"source_id":"c","media_kind":"video","parameters":{"ui.note":"%s"}}`, strings.Repeat("words ", 400))))
	}
	ss, _ := f.session(admin)
	_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w1", Namespace: "group/big", KeyPrefix: "many/"})
	wantCode(t, err, statestore.WatchTooBroad, "watch snapshot entries")
	_, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w1", Namespace: "group/big", KeyPrefix: "heavy/"})
	wantCode(t, err, statestore.WatchTooBroad, "watch snapshot bytes")
	// Exactly 64 entries is allowed; the rejected watches registered nothing.
	f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/big", Key: "many/k64"})
	if res := f.watch(ss, "w1", "group/big", "many/"); len(res.Entries) != 64 {
		t.Fatalf("%d entries", len(res.Entries))
	}
	// Per-session and store-wide limits.
	for i := 2; i <= 16; i++ {
		f.watch(ss, fmt.Sprintf("w%d", i), "group/big", "x/")
	}
	_, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w17", Namespace: "group/big", KeyPrefix: "x/"})
	wantCode(t, err, statestore.WatchLimit, watch.BoundWatchesPerSession)
	if err := f.s.Unwatch(ss, "w16"); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w1", Namespace: "group/big", KeyPrefix: "x/"})
	wantCode(t, err, statestore.InvalidArgument, "watch_id")
	// Non-administrators fail closed for service/ and group/.
	us, _ := f.session(alice)
	_, err = f.s.Watch(ctx, us, statestore.WatchRequest{WatchID: "w", Namespace: "group/big"})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	f.watch(us, "mine", "user/alice", "")
}

func TestWatchStoreLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.Limits.MaxWatches, o.Limits.MaxWatchesPerPrincipal = 3, 3 })
	for i := 0; i < 3; i++ {
		ss, _ := f.session(admin)
		f.watch(ss, "w", "group/g", "")
	}
	ss, _ := f.session(admin)
	_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"})
	wantCode(t, err, statestore.WatchLimit, watch.BoundWatches)
}

// TestWatchPerPrincipalQuota: one principal's sessions together hold at
// most MaxWatchesPerPrincipal watches (default a quarter of MaxWatches):
// the next is WATCH_LIMIT naming "watches per principal", an
// administrator still gets a watch, and a closed watch gives its place
// back.
func TestWatchPerPrincipalQuota(t *testing.T) {
	t.Parallel()
	// 16 watches, so the default quota is 4; one per session, so the
	// per-session bound is never the one hit.
	f := newFixture(t, func(o *statestore.Options) { o.Limits.MaxWatches = 16 })
	if q := f.s.Limits().MaxWatchesPerPrincipal; q != 4 {
		t.Fatalf("default MaxWatchesPerPrincipal %d with MaxWatches 16, want 4", q)
	}
	var held []*statestore.Session
	for i := range 4 {
		ss, _ := f.session(alice)
		f.watch(ss, fmt.Sprintf("w%d", i), "user/alice", "")
		held = append(held, ss)
	}
	ss, _ := f.session(alice)
	_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "user/alice"})
	e := wantCode(t, err, statestore.WatchLimit, watch.BoundWatchesPerPrincipal)
	if !strings.Contains(e.Error(), `"alice"`) || !strings.Contains(e.Error(), "limit 4") {
		t.Errorf("the refusal %q does not name the principal and the limit", e)
	}
	as, _ := f.session(admin)
	f.watch(as, "ops", "user/alice", "") // the store has room; alice's quota is alice's
	held[0].Close()
	f.watch(ss, "w", "user/alice", "")
}

func TestWatchTerminations(t *testing.T) {
	t.Parallel()
	t.Run("BUFFER_OVERFLOW at the 33rd unacknowledged update", func(t *testing.T) {
		f := newFixture(t)
		ss, sink := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		for i := 1; i <= 32; i++ {
			f.mustPut(admin, "group/g", "k", docN(i))
		}
		for i := 1; i <= 32; i++ {
			if u := sink.nextUpdate(t); u.Sequence != uint64(i) {
				t.Fatalf("update %d has sequence %d", i, u.Sequence)
			}
		}
		sink.empty(t) // 32 unacknowledged are held
		f.mustPut(admin, "group/g", "k", docN(33))
		if c := sink.nextClosed(t); c.Reason != watch.BufferOverflow {
			t.Fatalf("closed with %v", c.Reason)
		}
		f.mustPut(admin, "group/g", "k", docN(34))
		sink.empty(t)
		wantCode(t, f.s.Ack(ss, "w", 1), statestore.NotFound, "watch_id")
	})
	t.Run("acks free the buffer; a future sequence is refused", func(t *testing.T) {
		f := newFixture(t)
		ss, sink := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		for i := 1; i <= 40; i++ {
			f.mustPut(admin, "group/g", "k", docN(i))
			u := sink.nextUpdate(t)
			if err := f.s.Ack(ss, "w", u.Sequence); err != nil {
				t.Fatal(err)
			}
		}
		wantCode(t, f.s.Ack(ss, "w", 41), statestore.InvalidArgument, "applied_sequence")
		if err := f.s.Ack(ss, "w", 3); err != nil {
			t.Fatalf("an older ack must be harmless: %v", err)
		}
	})
	t.Run("ACK_TIMEOUT", func(t *testing.T) {
		f := newFixture(t)
		ss, sink := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		f.mustPut(admin, "group/g", "k", docN(1))
		sink.nextUpdate(t)
		f.clock.Advance(30*time.Second - time.Millisecond)
		sink.empty(t)
		f.clock.Advance(time.Millisecond)
		if c := sink.nextClosed(t); c.Reason != watch.AckTimeout {
			t.Fatalf("closed with %v", c.Reason)
		}
	})
	t.Run("AUTHORIZATION_LOST delivers nothing more", func(t *testing.T) {
		f := newFixture(t)
		boss := statestore.Principal{ID: "boss", Admin: true}
		ss, sink := f.session(boss)
		f.watch(ss, "svc", "service/s1", "")
		f.watch(ss, "own", "user/boss", "")
		if n := f.s.SetPrincipal("boss", statestore.Principal{ID: "boss"}, false); n != 1 {
			t.Fatalf("%d watches closed, want 1 (the service one)", n)
		}
		if c := sink.nextClosed(t); c.Reason != watch.AuthorizationLost || c.WatchID != "svc" {
			t.Fatalf("closed %+v", c)
		}
		f.mustPut(admin, "service/s1", "k", docN(1))
		f.mustPut(boss, "user/boss", "k", docN(2))
		if u := sink.nextUpdate(t); u.WatchID != "own" {
			t.Fatalf("update for %s after authorization loss", u.WatchID)
		}
		sink.empty(t)
		_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "again", Namespace: "service/s1"})
		wantCode(t, err, statestore.PermissionDenied, "namespace")
	})
	t.Run("SNAPSHOT_DELIVERY_FAILED", func(t *testing.T) {
		f := newFixture(t)
		sink := newSink()
		sink.fail = func(m watch.Message) error {
			if _, ok := m.(*watch.Snapshot); ok {
				return errors.New("control channel full")
			}
			return nil
		}
		ss, _ := f.s.OpenSession(admin, sink)
		f.watch(ss, "w", "group/g", "")
		if c := sink.nextClosed(t); c.Reason != watch.SnapshotDeliveryFailed {
			t.Fatalf("closed with %v", c.Reason)
		}
	})
	t.Run("STORE_CLOSED", func(t *testing.T) {
		f := newFixture(t)
		ss, sink := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		f.s.Close()
		f.s = nil
		if c := sink.nextClosed(t); c.Reason != watch.StoreClosed {
			t.Fatalf("closed with %v", c.Reason)
		}
	})
	t.Run("RESTORED, and new watches start from the restored revisions", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, "group/g", "k", docN(1))
		var backup bytes.Buffer
		f.s.Backup(&backup)
		for i := 0; i < 5; i++ {
			f.mustPut(admin, "group/g", "k", docN(i))
		}
		ss, sink := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		if err := f.s.Restore(&backup); err != nil {
			t.Fatal(err)
		}
		if c := sink.nextClosed(t); c.Reason != watch.Restored {
			t.Fatalf("closed with %v", c.Reason)
		}
		res := f.watch(ss, "w2", "group/g", "")
		if res.SnapshotRevision != 1 || len(res.Entries) != 1 || res.Entries[0].Revision != 1 {
			t.Fatalf("watch after restore: %+v", res)
		}
	})
	t.Run("UNAVAILABLE by CloseWatches, every watch, and the session may watch again", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, "group/g", "k", docN(1))
		ss, sink := f.session(admin)
		f.watch(ss, "a", "group/g", "")
		f.watch(ss, "b", "group/h", "")
		n, err := f.s.CloseWatches(watch.Unavailable)
		if err != nil || n != 2 {
			t.Fatalf("CloseWatches = %d, %v; want 2 watches closed", n, err)
		}
		for range 2 {
			if c := sink.nextClosed(t); c.Reason != watch.Unavailable || !strings.Contains(c.Message, "leader") {
				t.Fatalf("closed with %v %q, want UNAVAILABLE naming the lost leader", c.Reason, c.Message)
			}
		}
		if got := f.s.Stats().Watches.Closed[watch.Unavailable]; got != 2 {
			t.Fatalf("Stats counts %d UNAVAILABLE closures, want 2", got)
		}
		if res := f.watch(ss, "c", "group/g", ""); res.SnapshotRevision != 1 || len(res.Entries) != 1 {
			t.Fatalf("watch after CloseWatches: %+v", res)
		}
	})
}

// TestCloseWatchesRefusesAnUnknownReason: a reason the registry does not
// know names the field and closes nothing.
func TestCloseWatchesRefusesAnUnknownReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ss, _ := f.session(admin)
	f.watch(ss, "w", "group/g", "")
	for _, r := range []watch.Reason{0, watch.Reason(len(watch.Reasons) + 1)} {
		n, err := f.s.CloseWatches(r)
		var se *statestore.Error
		if n != 0 || !errors.As(err, &se) || se.Code != statestore.InvalidArgument || se.Field != "reason" {
			t.Fatalf("CloseWatches(%v) = %d, %v; want INVALID_ARGUMENT on field reason", r, n, err)
		}
	}
	if open := f.s.Stats().Watches.Open; open != 1 {
		t.Fatalf("a refused CloseWatches left %d watches open, want 1", open)
	}
}

// TestNoGoroutineLeaks opens sessions and watches, closes them and the
// store, and checks nothing is left running.
func TestNoGoroutineLeaks(t *testing.T) {
	// Serial: goleak checks every goroutine of the process.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFixture(t)
	var sessions []*statestore.Session
	for i := 0; i < 5; i++ {
		ss, _ := f.session(admin)
		f.watch(ss, "w", "group/g", "")
		sessions = append(sessions, ss)
	}
	f.mustPut(admin, "group/g", "k", docN(1))
	if _, err := f.lease(admin, "group/g", "l", statestore.Expect{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	sessions[0].Close()
	f.s.Close()
	f.s = nil
}

// TestWatchIDBounds: a watch_id is one key segment, bounded as a key is;
// anything else is INVALID_ARGUMENT naming watch_id and registers nothing.
func TestWatchIDBounds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	max := f.s.Limits().MaxKeyBytes
	cases := []struct {
		name string
		id   string
		ok   bool
	}{
		{"one byte", "w", true},
		{"at the bound", strings.Repeat("w", max), true},
		{"one over the bound", strings.Repeat("w", max+1), false},
		{"300 bytes", strings.Repeat("a", 300), false},
		{"empty", "", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"two segments", "a/b", false},
		{"space", "a b", false},
		{"non-ASCII", "wätch", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ss, _ := f.session(admin)
			defer ss.Close()
			_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: c.id, Namespace: "group/g"})
			if c.ok {
				if err != nil {
					t.Fatalf("watch_id of %d bytes refused: %v", len(c.id), err)
				}
				return
			}
			wantCode(t, err, statestore.InvalidArgument, "watch_id")
			// Nothing was registered under the refused id.
			if err := f.s.Unwatch(ss, c.id); statestore.CodeOf(err) != statestore.NotFound {
				t.Fatalf("unwatch of the refused id: %v, want NOT_FOUND", err)
			}
		})
	}
}

// storeSource adapts a store session to the client cache's Source, the way
// an embedder's protocol client would.
type storeSource struct {
	s  *statestore.Store
	ss *statestore.Session
}

func (src *storeSource) Watch(id, ns, prefix string) (uint64, []*materialize.Entry, error) {
	res, err := src.s.Watch(ctx, src.ss, statestore.WatchRequest{WatchID: id, Namespace: ns, KeyPrefix: prefix})
	if err != nil {
		return 0, nil, err
	}
	out := make([]*materialize.Entry, len(res.Entries))
	for i := range res.Entries {
		out[i] = &res.Entries[i]
	}
	return res.SnapshotRevision, out, nil
}

func (src *storeSource) Unwatch(id string) error { return src.s.Unwatch(src.ss, id) }

func (src *storeSource) Ack(id string, n uint64) error { return src.s.Ack(src.ss, id, n) }

// routedSink hands messages to the cache from its own goroutine; drop, if
// set, loses a message as a faulty channel would.
type routedSink struct {
	mu      sync.Mutex
	drop    func(watch.Message) bool
	ch      chan watch.Message
	handled chan struct{}
}

func (r *routedSink) Deliver(m watch.Message) error {
	r.mu.Lock()
	drop := r.drop != nil && r.drop(m)
	r.mu.Unlock()
	if !drop {
		r.ch <- m
	}
	return nil
}

func startCache(t *testing.T, f *fixture, ns, prefix string) (*watchcache.Cache, *routedSink) {
	t.Helper()
	rs := &routedSink{ch: make(chan watch.Message, 1024), handled: make(chan struct{}, 1024)}
	ss, err := f.s.OpenSession(admin, rs)
	if err != nil {
		t.Fatal(err)
	}
	c := watchcache.New(&storeSource{s: f.s, ss: ss}, ns, prefix, watchcache.WithWatchID("cache"))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range rs.ch {
			c.Handle(m)
			rs.handled <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		ss.Close()
		<-ss.Done() // no Deliver is running: the channel can close
		close(rs.ch)
		<-done
	})
	return c, rs
}

// converge waits until the cache equals the store's entries under prefix.
func converge(t *testing.T, f *fixture, c *watchcache.Cache, rs *routedSink, ns string, keys []string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if reflect.DeepEqual(cacheState(c, keys), storeState(f, ns, keys)) && c.Revision() == f.s.Namespace(ns).Revision {
			return
		}
		select {
		case <-rs.handled:
		case <-deadline:
			t.Fatalf("cache never converged: cache %v store %v", cacheState(c, keys), storeState(f, ns, keys))
		}
	}
}

func cacheState(c *watchcache.Cache, keys []string) map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range keys {
		if e, ok := c.Get(k); ok {
			m[k] = e.Revision
		}
	}
	return m
}

func storeState(f *fixture, ns string, keys []string) map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range keys {
		if e, err := f.s.Get(ctx, admin, ns, k); err == nil {
			m[k] = e.Revision
		}
	}
	return m
}

func TestClientCacheRecovers(t *testing.T) {
	t.Parallel()
	const ns = "service/worker"
	keys := []string{"intents/a", "intents/b", "intents/c"}
	t.Run("sequence gap", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, ns, "intents/a", docN(0))
		c, rs := startCache(t, f, ns, "intents/")
		var seen int
		rs.mu.Lock()
		rs.drop = func(m watch.Message) bool {
			if _, ok := m.(*watch.Update); ok {
				seen++
				return seen == 3 // lose the third update
			}
			return false
		}
		rs.mu.Unlock()
		for i := 0; i < 8; i++ {
			f.mustPut(admin, ns, keys[i%3], docN(i))
		}
		f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "intents/b"})
		converge(t, f, c, rs, ns, keys)
		if c.Resnapshots() < 1 {
			t.Fatal("the cache did not re-snapshot after the gap")
		}
	})
	t.Run("closure by restore", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, ns, "intents/a", docN(0))
		var backup bytes.Buffer
		f.s.Backup(&backup)
		c, rs := startCache(t, f, ns, "intents/")
		f.mustPut(admin, ns, "intents/b", docN(1))
		// The cache holds intents/b before the restore, so only handling
		// the RESTORED close (and re-snapshotting) makes it converge:
		// otherwise it could look converged with the close still queued.
		converge(t, f, c, rs, ns, keys)
		if err := f.s.Restore(&backup); err != nil {
			t.Fatal(err)
		}
		converge(t, f, c, rs, ns, keys)
		if c.Resnapshots() < 1 || fmt.Sprint(c.Keys()) != "[intents/a]" {
			t.Fatalf("after restore: resnapshots %d keys %v", c.Resnapshots(), c.Keys())
		}
	})
}

// TestSessionDrainDeliversTheClosuresOfSetPrincipal: after Drain returns,
// the AUTHORIZATION_LOST closures of a revocation are in the sink, so an
// embedder that ends the session next has them to send; nothing later is.
func TestSessionDrainDeliversTheClosuresOfSetPrincipal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ss, sink := f.session(alice)
	f.watch(ss, "own", "user/alice", "")
	gate := make(chan struct{})
	sink.fail = func(m watch.Message) error {
		if _, ok := m.(*watch.Closed); ok {
			<-gate // the closure is on its way to the sink
		}
		return nil
	}
	if n := f.s.SetPrincipal(alice.ID, statestore.Principal{}, true); n != 1 {
		t.Fatalf("SetPrincipal closed %d watches, want 1", n)
	}
	drained := make(chan struct{})
	go func() {
		ss.Drain()
		close(drained)
	}()
	select {
	case <-drained:
		t.Fatal("Drain returned before the closure reached the sink")
	case <-time.After(10 * time.Millisecond): // bounded: Drain must still be waiting
	}
	close(gate)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return")
	}
	if c := sink.nextClosed(t); c.Reason != watch.AuthorizationLost || c.WatchID != "own" {
		t.Fatalf("closed %+v, want own AUTHORIZATION_LOST", c)
	}
	ss.Close()
}

// stillClock reads a fake clock, and its timers never fire: the store's
// expirer never wakes on its own, so a lapsed lease stays in the view
// until something else meets it.
type stillClock struct{ f *clock.Fake }

func (c stillClock) Now() time.Time                     { return c.f.Now() }
func (c stillClock) NewTimer(time.Duration) clock.Timer { return stillTimer{} }

type stillTimer struct{}

func (stillTimer) C() <-chan time.Time { return nil }
func (stillTimer) Stop() bool          { return true }

// TestWatchSnapshotExpiresDueLeasesFirst: a watch whose snapshot meets a
// lease already due (the expirer has not run: its timers never fire here)
// journals the EXPIRE first and snapshots the state after it, so the
// snapshot holds no lapsed entry, its revision counts the EXPIRE, and the
// watch gets no update for it: disk and watch agree on every revision.
func TestWatchSnapshotExpiresDueLeasesFirst(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(t0)
	f := newFixture(t, func(o *statestore.Options) { o.Clock = stillClock{fake} })
	const ns = "user/alice"
	f.mustPut(alice, ns, "durable", docN(1))
	if _, err := f.lease(alice, ns, "leased", statestore.CreateOnly, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.Advance(5 * time.Second) // due (expiry is inclusive), not expired yet
	if got := journalKinds(t, f); len(got) != 2 {
		t.Fatalf("journal %v before the watch: the expirer ran, the test proves nothing", got)
	}

	ss, sink := f.session(alice)
	res := f.watch(ss, "w", ns, "")
	var keys []string
	for _, e := range res.Entries {
		keys = append(keys, e.Key)
	}
	if !slices.Equal(keys, []string{"durable"}) || res.SnapshotRevision != 3 {
		t.Fatalf("snapshot at revision %d holds %v; want only durable, at revision 3 (after the EXPIRE)", res.SnapshotRevision, keys)
	}
	kinds := journalKinds(t, f)
	if want := []journal.Kind{journal.KindPut, journal.KindPut, journal.KindExpire}; !slices.Equal(kinds, want) {
		t.Fatalf("journal %v, want %v", kinds, want)
	}
	if snap, ok := sink.next(t).(*watch.Snapshot); !ok || snap.SnapshotRevision != 3 {
		t.Fatalf("first message %#v, want the snapshot at revision 3", snap)
	}
	f.mustPut(alice, ns, "next", docN(2))
	if u := sink.nextUpdate(t); u.Sequence != 1 || u.Kind != watch.Put || u.Key != "next" || u.Revision != 4 {
		t.Fatalf("first update %+v, want the PUT of next at revision 4 (the EXPIRE is in the snapshot, not an update)", u)
	}
}
