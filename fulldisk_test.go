package statestore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/internal/smalldisk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/watch"
)

// fullDiskReserve is the reserve the full-disk tests give their store: a
// small one, so a 1 MiB tmpfs holds it beside the journal.
const fullDiskReserve = 64 << 10

// newFullDiskFixture opens a store on a fresh 1 MiB tmpfs, with no
// background checkpoint (so only the test decides what reaches the disk).
func newFullDiskFixture(t *testing.T) (*fixture, string) {
	mnt := smalldisk.Mount(t, 1<<20)
	// No pre-writing: these tests count the disk's space to the page and
	// compare the journal's bytes, and the pre-writer's background zeros
	// change both. (Pre-written zeros are space a delete or an EXPIRE can
	// use without allocating, so they only add to the reserve; a failed
	// pre-write stops pre-writing for that segment, see journal/prewrite.go.)
	f := newFixture(t, func(o *statestore.Options) {
		o.Dir, o.CheckpointBytes, o.ReserveBytes, o.NoPrewrite = mnt, -1, fullDiskReserve, true
	})
	f.dir = mnt
	return f, mnt
}

func reservePath(dir string) string {
	return filepath.Join(dir, statestore.StoreDirName, "journal", journal.ReserveFile)
}

// requireReserve fails t unless the reserve file is whole (want) or gone.
func requireReserve(t *testing.T, dir string, want bool) {
	t.Helper()
	fi, err := os.Stat(reservePath(dir))
	switch {
	case want && (err != nil || fi.Size() != fullDiskReserve || fi.Sys().(*syscall.Stat_t).Blocks*512 < fullDiskReserve):
		t.Fatalf("reserve should be whole (%d bytes, allocated): %v %v", fullDiskReserve, fi, err)
	case !want && !errors.Is(err, os.ErrNotExist):
		t.Fatalf("reserve should be given up, stat says %v", err)
	}
}

// requireEntries fails t unless the store holds exactly want in ns, each
// with its revision and document.
func requireEntries(t *testing.T, f *fixture, ns string, want map[string]statestore.Entry) {
	t.Helper()
	for key, w := range want {
		got, err := f.s.Get(ctx, admin, ns, key)
		if err != nil || got.Revision != w.Revision || string(got.Document) != string(w.Document) {
			t.Fatalf("%s/%s: %+v %v; want revision %d, document %s", ns, key, got, err, w.Revision, w.Document)
		}
	}
	if n := f.s.Namespace(ns).Entries; n != len(want) {
		t.Fatalf("namespace %s holds %d entries, want %d", ns, n, len(want))
	}
}

// wantReserveRefusal fails t unless err is the STORAGE refusal that names
// the reserve.
func wantReserveRefusal(t *testing.T, err error) {
	t.Helper()
	se := wantCode(t, err, statestore.Storage, "journal reserve")
	if !errors.Is(err, journal.ErrOnReserve) || !strings.Contains(se.Error(), "running on its reserve; only deletes are accepted") {
		t.Fatalf("refusal does not name the reserve: %v", err)
	}
}

// TestFullDiskNeverLocksTheOperatorOut fills a tmpfs through the API and
// checks the reserve's whole contract: the write that meets the full disk
// answers STORAGE and gives the reserve up; from then on every PUT is
// refused with STORAGE naming the reserve, while every committed entry
// stays readable, a DELETE commits and frees its key, a lease lapsing
// meanwhile is EXPIREd and reaches its watcher, a checkpoint fails cleanly
// leaving the journal as it was, and the store reopens with an overdue
// lease. Once space is freed from outside, PUTs are accepted again and the
// reserve is back; nothing acknowledged is lost across a reopen.
func TestFullDiskNeverLocksTheOperatorOut(t *testing.T) {
	f, mnt := newFullDiskFixture(t)
	const ns, leases = "group/disk", "service/leases"
	acked := map[string]statestore.Entry{}
	for i := range 10 {
		key := fmt.Sprintf("k%02d", i)
		acked[key] = f.mustPut(admin, ns, key, docN(i))
	}
	lapsing, err := f.lease(admin, leases, "lapses-while-full", statestore.CreateOnly, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.lease(admin, leases, "lapses-while-closed", statestore.CreateOnly, time.Minute); err != nil {
		t.Fatal(err)
	}
	ss, sink := f.session(admin)
	f.watch(ss, "leases", leases, "")
	requireReserve(t, mnt, true)

	filler := smalldisk.Fill(t, mnt, "filler")

	// A checkpoint on the full disk fails cleanly: STORAGE, and not one
	// byte of the journal changes.
	journalDir := filepath.Join(mnt, statestore.StoreDirName, "journal")
	before, err := filetree.Hashes(journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); statestore.CodeOf(err) != statestore.Storage || !journal.IsNoSpace(err) {
		t.Fatalf("checkpoint on a full disk: %v; want STORAGE wrapping ENOSPC", err)
	}
	after, err := filetree.Hashes(journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := filetree.Diff(before, after); len(d) > 0 {
		t.Fatalf("a failed checkpoint changed the journal: %v", d)
	}

	// Fill through the API: PUTs land in the tail page's slack until one
	// needs a page the disk no longer has.
	var failed error
	for i := 0; i < 10_000 && failed == nil; i++ {
		key := fmt.Sprintf("fill%04d", i)
		e, err := f.put(admin, ns, key, docN(i), statestore.Expect{})
		if err == nil {
			acked[key] = e
		}
		failed = err
	}
	wantCode(t, failed, statestore.Storage, "journal")
	if !journal.IsNoSpace(failed) {
		t.Fatalf("the write that met the full disk: %v; want ENOSPC", failed)
	}
	requireReserve(t, mnt, false)
	if st := f.s.Stats().JournalReserve; !st.Spent || st.Releases != 1 {
		t.Fatalf("reserve state after the full disk: %+v", st)
	}

	// Every PUT is refused now, a replacement and a new key alike.
	_, err = f.put(admin, ns, "k01", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	_, err = f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	requireEntries(t, f, ns, acked)

	// DELETE is admitted and frees the key.
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "k00"}); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	delete(acked, "k00")
	if _, err := f.s.Get(ctx, admin, ns, "k00"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("deleted key reads %v, want NOT_FOUND", err)
	}

	// A lease lapsing on the full disk is EXPIREd and reaches its watcher.
	f.clock.Advance(10 * time.Second)
	u := sink.nextUpdate(t)
	if u.Kind != watch.Expire || u.Key != "lapses-while-full" || u.Revision != lapsing.Revision+2 {
		t.Fatalf("watch update %+v; want EXPIRE of lapses-while-full at revision %d", u, lapsing.Revision+2)
	}
	requireEntries(t, f, ns, acked)

	// The other lease lapses while the store is down; on the still full
	// disk the restart purge commits its EXPIRE and the store opens.
	f.s.Close()
	f.s = nil
	f.clock.Advance(time.Minute)
	f.open()
	if got := f.s.OpenReport().Expired; got != 1 {
		t.Fatalf("restart purge expired %d leases, want 1", got)
	}
	if _, err := f.s.Get(ctx, admin, leases, "lapses-while-closed"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("overdue lease reads %v after reopen, want NOT_FOUND", err)
	}
	requireEntries(t, f, ns, acked)
	_, err = f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)

	// Space appears from outside: the next PUT restores the reserve and
	// is accepted.
	filler.Remove(t)
	e, err := f.put(admin, ns, "new", docN(2), statestore.Expect{})
	if err != nil {
		t.Fatalf("put once space is free: %v", err)
	}
	acked["new"] = e
	requireReserve(t, mnt, true)
	if st := f.s.Stats().JournalReserve; st.Spent || st.Restores != 1 {
		t.Fatalf("reserve state after space came back: %+v", st)
	}
	f.reopen()
	requireEntries(t, f, ns, acked)
	requireReserve(t, mnt, true)
}

// alignJournalTail puts padding entries until the tail segment ends on a
// page boundary, so the next record needs a page of its own: on a full
// tmpfs it then fails with ENOSPC instead of landing in the last page's
// slack.
func alignJournalTail(t *testing.T, f *fixture) {
	t.Helper()
	const page = 4096
	dir := filepath.Join(f.dir, statestore.StoreDirName, "journal")
	tail := func() int64 {
		segs, err := journal.ListSegments(dir)
		if err != nil || len(segs) == 0 {
			t.Fatalf("segments: %v %v", segs, err)
		}
		return segs[len(segs)-1].Size
	}
	pad := func(n int) []byte {
		// JSON whitespace: any amount of it is a valid document.
		return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"pad","media_kind":"video"%s}`, strings.Repeat(" ", n))
	}
	const probe = 200
	size := tail()
	f.mustPut(admin, "group/pad", "pad", pad(probe))
	overhead := tail() - size - probe // the frame and length prefix around the padding
	for range 4 {
		size = tail()
		rem := (page - size%page) % page
		if rem == 0 {
			return
		}
		if rem < overhead+1 {
			rem += page
		}
		f.mustPut(admin, "group/pad", "pad", pad(int(rem-overhead)))
	}
	t.Fatalf("could not align the journal tail (size %d)", tail())
}

// TestOpenOnFullDiskSpendsReserveForPurge: a store closed with its reserve
// whole, reopened on a disk filled meanwhile with a lease overdue, opens:
// the purge's EXPIRE fails for want of space, the journal gives the
// reserve up, and the EXPIRE is committed into it. The store then serves
// on its reserve.
func TestOpenOnFullDiskSpendsReserveForPurge(t *testing.T) {
	f, mnt := newFullDiskFixture(t)
	const ns = "service/leases"
	if _, err := f.lease(admin, ns, "holder", statestore.CreateOnly, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	kept := f.mustPut(admin, ns, "kept", docN(3))
	alignJournalTail(t, f)
	f.s.Close()
	f.s = nil
	requireReserve(t, mnt, true)
	smalldisk.Fill(t, mnt, "filler")

	f.clock.Advance(10 * time.Second)
	f.open()
	if got := f.s.OpenReport().Expired; got != 1 {
		t.Fatalf("restart purge expired %d leases, want 1", got)
	}
	if st := f.s.Stats().JournalReserve; !st.Spent || st.Releases != 1 {
		t.Fatalf("the purge should have spent the reserve: %+v", st)
	}
	requireReserve(t, mnt, false)
	if e, err := f.s.Get(ctx, admin, ns, "kept"); err != nil || e.Revision != kept.Revision {
		t.Fatalf("kept entry: %+v %v", e, err)
	}
	_, err := f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	f.reopen()
	if _, err := f.s.Get(ctx, admin, ns, "holder"); statestore.CodeOf(err) != statestore.NotFound || f.s.OpenReport().Expired != 0 {
		t.Fatalf("the purge's EXPIRE did not survive a reopen: %v, expired again %d", err, f.s.OpenReport().Expired)
	}
}

// TestExpiryRetryWaitsOnTheClock: when the journal refuses a lapsed
// lease's EXPIRE (a full disk with its reserve used up, a failing disk),
// the expiry goroutine tries again after a second of the store's clock,
// never at once in a loop; once the disk accepts, the EXPIRE commits and
// reaches the watcher.
func TestExpiryRetryWaitsOnTheClock(t *testing.T) {
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
