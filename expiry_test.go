package statestore_test

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

func (f *fixture) lease(p statestore.Principal, ns, key string, x statestore.Expect, ttl time.Duration) (statestore.Entry, error) {
	return f.s.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: docN(7), Expect: x, TTL: ttl})
}

// journalKinds replays the store's journal and returns the kind of every
// record, to prove what was journaled rather than what memory says.
func journalKinds(t *testing.T, f *fixture) []journal.Kind {
	t.Helper()
	var kinds []journal.Kind
	err := journal.ReplayDir(filepath.Join(f.dir, statestore.StoreDirName, "journal"), 1, 0, journal.Limits{}, func(_ uint64, r *journal.Record) error {
		kinds = append(kinds, r.Kind)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// TestLeasePattern is the specification's service-coordination pattern.
func TestLeasePattern(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ns, key := "service/transcoder-a", "leases/front-door-video-browser-h264-720p"
	w1 := statestore.Principal{ID: "worker-1", Admin: true}
	w2 := statestore.Principal{ID: "worker-2", Admin: true}
	w3 := statestore.Principal{ID: "worker-3", Admin: true}
	claim, err := f.lease(w1, ns, key, statestore.CreateOnly, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if claim.ExpiresMs != t0.UnixMilli()+10_000 {
		t.Fatalf("expires_at_ms %d, want %d", claim.ExpiresMs, t0.UnixMilli()+10_000)
	}
	for _, w := range []statestore.Principal{w2, w3} {
		_, err := f.lease(w, ns, key, statestore.CreateOnly, 10*time.Second)
		if se := wantCode(t, err, statestore.Conflict, "expected_revision"); se.CurrentRevision != claim.Revision {
			t.Fatalf("standby sees revision %d, want %d", se.CurrentRevision, claim.Revision)
		}
	}
	// The holder renews with compare-and-set before the deadline.
	f.clock.Advance(8 * time.Second)
	renewed, err := f.lease(w1, ns, key, statestore.IfRevision(claim.Revision), 10*time.Second)
	if err != nil || renewed.ExpiresMs != f.clock.Now().UnixMilli()+10_000 {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	f.clock.Advance(8 * time.Second) // past the first deadline, before the renewed one
	if _, err := f.s.Get(ctx, w2, ns, key); err != nil {
		t.Fatalf("renewed lease lapsed early: %v", err)
	}
	// The holder stops renewing; the lease lapses.
	revBefore := f.s.Namespace(ns).Revision
	f.clock.Advance(2 * time.Second)
	_, err = f.s.Get(ctx, w2, ns, key)
	wantCode(t, err, statestore.NotFound, "key")
	if got := f.s.Namespace(ns).Revision; got != revBefore+1 {
		t.Fatalf("EXPIRE advanced the revision to %d, want exactly %d", got, revBefore+1)
	}
	kinds := journalKinds(t, f)
	if kinds[len(kinds)-1] != journal.KindExpire {
		t.Fatalf("last journal record is %v, want EXPIRE", kinds[len(kinds)-1])
	}
	// A standby's create-only claim now succeeds, exactly once.
	won, err := f.lease(w2, ns, key, statestore.CreateOnly, 10*time.Second)
	if err != nil || won.Owner != "worker-2" || won.Revision != revBefore+2 {
		t.Fatalf("standby claim: %+v %v", won, err)
	}
	_, err = f.lease(w3, ns, key, statestore.CreateOnly, 10*time.Second)
	wantCode(t, err, statestore.Conflict, "expected_revision")
}

// TestExpiredKeyObservedOnlyAfterExpire: a create-only put or a
// compare-and-set arriving after the deadline sees the key as gone, and the
// EXPIRE is committed before the write that observed the absence.
func TestExpiredKeyObservedOnlyAfterExpire(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, err := f.lease(alice, "user/alice", "lease", statestore.CreateOnly, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Second)
	_, err = f.lease(alice, "user/alice", "lease", statestore.IfRevision(e.Revision), 5*time.Second)
	if se := wantCode(t, err, statestore.Conflict, "expected_revision"); se.CurrentRevision != 0 {
		t.Fatalf("CAS on a lapsed lease sees revision %d, want 0 (absent)", se.CurrentRevision)
	}
	again, err := f.lease(alice, "user/alice", "lease", statestore.CreateOnly, 5*time.Second)
	if err != nil || again.Revision != e.Revision+2 {
		t.Fatalf("create after lapse: %+v %v (want revision %d: EXPIRE then PUT)", again, err, e.Revision+2)
	}
	kinds := journalKinds(t, f)
	want := []journal.Kind{journal.KindPut, journal.KindExpire, journal.KindPut}
	if len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Fatalf("journal %v, want %v", kinds, want)
	}
}

// TestRestartPurgesOverdueLeases: leases that lapse while the store is
// closed are expired on open, one EXPIRE each, before anything is served.
func TestRestartPurgesOverdueLeases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ns := "service/s1"
	f.mustPut(admin, ns, "durable", docN(1))
	for i, ttl := range []time.Duration{2 * time.Second, 3 * time.Second, time.Minute} {
		if _, err := f.lease(admin, ns, "lease-"+string(rune('a'+i)), statestore.Expect{}, ttl); err != nil {
			t.Fatal(err)
		}
	}
	f.mustPut(admin, "group/g", "other-ns", docN(2))
	if _, err := f.lease(admin, "group/g", "short", statestore.Expect{}, time.Second); err != nil {
		t.Fatal(err)
	}
	before := f.s.Namespace(ns)
	beforeG := f.s.Namespace("group/g")
	entries, bytes, _ := f.s.Usage()
	sizeA, _ := f.s.Get(ctx, admin, ns, "lease-a")
	f.s.Close()
	f.s = nil
	f.clock.Advance(10 * time.Second)
	f.open()
	if got := f.s.OpenReport().Expired; got != 3 {
		t.Fatalf("open expired %d leases, want 3", got)
	}
	after := f.s.Namespace(ns)
	if after.Revision != before.Revision+2 || after.Entries != before.Entries-2 || after.Bytes != before.Bytes-2*sizeA.Size() {
		t.Fatalf("namespace after purge %+v, before %+v", after, before)
	}
	if g := f.s.Namespace("group/g"); g.Revision != beforeG.Revision+1 || g.Entries != 1 {
		t.Fatalf("group namespace after purge %+v", g)
	}
	entries2, bytes2, _ := f.s.Usage()
	if entries2 != entries-3 || bytes2 >= bytes {
		t.Fatalf("totals after purge: %d entries %d bytes (before %d, %d)", entries2, bytes2, entries, bytes)
	}
	for _, k := range []string{"lease-a", "lease-b"} {
		if _, err := f.s.Get(ctx, admin, ns, k); !errors.Is(err, statestore.ErrNotFound) {
			t.Fatalf("%s survived the purge: %v", k, err)
		}
	}
	if _, err := f.s.Get(ctx, admin, ns, "lease-c"); err != nil {
		t.Fatalf("unexpired lease purged: %v", err)
	}
	e := f.mustPut(admin, ns, "next", docN(3))
	if e.Revision != after.Revision+1 {
		t.Fatalf("next write revision %d, want %d", e.Revision, after.Revision+1)
	}
	// The purge was journaled: a second reopen expires nothing more.
	f.reopen()
	if f.s.OpenReport().Expired != 0 || f.s.Namespace(ns).Revision != e.Revision {
		t.Fatalf("second reopen: %+v, revision %d", f.s.OpenReport(), f.s.Namespace(ns).Revision)
	}
}

// TestExpiryRetryWaitsOnTheClock: when the journal refuses a lapsed
// lease's EXPIRE (a full disk with its reserve used up, a failing disk),
// the expiry goroutine tries again after a second of the store's clock,
// never at once in a loop; once the disk accepts, the EXPIRE commits and
// reaches the watcher.
func TestExpiryRetryWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = -1, faults })
	const ns = "service/leases"
	lease, err := f.lease(admin, ns, "holder", statestore.CreateOnly, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ss, sink := f.session(admin)
	f.watch(ss, "w", ns, "")

	const failing = 3
	var (
		mu       sync.Mutex
		attempts []time.Time // fake time of each journal fdatasync
	)
	tried := make(chan struct{}, 1000)
	t.Cleanup(faults.SetSync(func(path string) error {
		if filepath.Base(path) == journal.FloorFile {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		now := f.clock.Now()
		if n := len(attempts); n > 0 && now.Before(attempts[n-1].Add(time.Second)) {
			t.Errorf("EXPIRE retried at %v, %v after the failed attempt: want a second's wait", now, now.Sub(attempts[n-1]))
		}
		attempts = append(attempts, now)
		tried <- struct{}{}
		if len(attempts) <= failing {
			return syscall.EIO
		}
		return nil
	}))
	drain := func() {
		for {
			select {
			case <-f.clock.Armed():
			default:
				return
			}
		}
	}
	// The expiry loop arms its timer for the lease after the commit, on its
	// own goroutine: advancing before that would make its first arm look
	// like a retry's below. Nothing else arms a timer here (no update is
	// pending acknowledgement).
	<-f.clock.Armed()
	f.clock.Advance(5 * time.Second)
	for range failing {
		<-tried
		<-f.clock.Armed() // the retry timer
		drain()
		f.clock.Advance(time.Second)
	}
	<-tried
	u := sink.nextUpdate(t)
	if u.Kind != watch.Expire || u.Key != "holder" || u.Revision != lease.Revision+1 {
		t.Fatalf("update %+v, want the EXPIRE at revision %d", u, lease.Revision+1)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != failing+1 {
		t.Fatalf("%d EXPIRE attempts, want %d", len(attempts), failing+1)
	}
}
