package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
	"github.com/keeppeek/statestore/journal"
)

// TestSyncFailureMidPipeline fails fdatasyncs while many writers keep the
// pipeline full, so batches are written behind the one whose sync fails.
// Every acknowledged write must survive, no failed write may show (in
// memory or after reopen), the store keeps accepting writes without a
// restart, and memory equals what reopening replays.
func TestSyncFailureMidPipeline(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = -1, faults })
	const (
		ns      = "group/pipeline"
		writers = 16
		rounds  = 40
	)
	var syncs, failed atomic.Int64
	restore := faults.SetSync(func(string) error {
		if n := syncs.Add(1); n%5 == 0 && failed.Load() < 4 {
			failed.Add(1)
			return syscall.EIO
		}
		return nil
	})
	var storageErrs atomic.Int64
	last := make([][]byte, writers) // the last acknowledged document per key
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("w%02d", w)
			for i := range rounds {
				x := statestore.CreateOnly
				if cur, err := f.s.Get(ctx, admin, ns, key); err == nil {
					x = statestore.IfRevision(cur.Revision)
				}
				doc := docN(w*1000 + i)
				_, err := f.put(admin, ns, key, doc, x)
				var se *statestore.Error
				switch {
				case err == nil:
					last[w] = doc
				case errors.As(err, &se) && se.Code == statestore.Storage:
					storageErrs.Add(1)
				default:
					t.Errorf("writer %d round %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	restore()
	if failed.Load() == 0 || storageErrs.Load() == 0 {
		t.Fatalf("no sync failed (%d syncs, %d failed, %d STORAGE answers): the test did not exercise failures", syncs.Load(), failed.Load(), storageErrs.Load())
	}
	// Without a restart, every writer can write again.
	for w := range writers {
		key := fmt.Sprintf("w%02d", w)
		x := statestore.CreateOnly
		if cur, err := f.s.Get(ctx, admin, ns, key); err == nil {
			x = statestore.IfRevision(cur.Revision)
		}
		doc := docN(w*1000 + 999)
		if _, err := f.put(admin, ns, key, doc, x); err != nil {
			t.Fatalf("write after the failures: %v", err)
		}
		last[w] = doc
	}
	check := func(when string) map[string]uint64 {
		revs := map[string]uint64{}
		for w := range writers {
			key := fmt.Sprintf("w%02d", w)
			e, err := f.s.Get(ctx, admin, ns, key)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, key, err)
			}
			if !bytes.Equal(e.Document, last[w]) {
				t.Fatalf("%s: %s holds %s, the last acknowledged write was %s", when, key, e.Document, last[w])
			}
			revs[key] = e.Revision
		}
		revs[""] = f.s.Namespace(ns).Revision
		return revs
	}
	before := check("before reopen")
	f.reopen()
	if after := check("after reopen"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("revisions changed across reopen:\nbefore %v\nafter  %v", before, after)
	}
	t.Logf("%d syncs, %d failed, %d writes answered STORAGE", syncs.Load(), failed.Load(), storageErrs.Load())
}

// TestSyncFailureLoneWriter: a write that finds the pipeline idle runs it
// in its own goroutine; a failed fdatasync there answers STORAGE, leaves
// nothing behind in memory or on disk, and the next write proceeds
// without a restart.
func TestSyncFailureLoneWriter(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.Faults = faults })
	const ns = "user/alice"
	first := f.mustPut(alice, ns, "kept", docN(1))
	restore := faults.SetSync(func(string) error { return syscall.EIO })
	_, err := f.put(alice, ns, "lost", docN(2), statestore.Expect{})
	restore()
	wantCode(t, err, statestore.Storage, "journal")
	if _, err := f.s.Get(ctx, alice, ns, "lost"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("failed write is visible: %v", err)
	}
	if rev := f.s.Namespace(ns).Revision; rev != first.Revision {
		t.Fatalf("namespace revision %d after a failed write, want %d", rev, first.Revision)
	}
	next := f.mustPut(alice, ns, "after", docN(3))
	if next.Revision != first.Revision+1 {
		t.Fatalf("write after the failure got revision %d, want %d", next.Revision, first.Revision+1)
	}
	f.reopen()
	if _, err := f.s.Get(ctx, alice, ns, "lost"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("failed write reappeared after reopen: %v", err)
	}
	if e, err := f.s.Get(ctx, alice, ns, "after"); err != nil || e.Revision != next.Revision {
		t.Fatalf("write after the failure lost on reopen: %v %v", e, err)
	}
}

// TestWritesPipelineBehindSync stalls the first fdatasync and checks the
// pipeline's contract around it: writers that arrive meanwhile are
// admitted and written once a group of minWriteBatch has gathered (so the
// next fdatasync covers them all at once), yet none is answered or visible
// before a sync covers it. Ops of a group still gathering when the stalled
// sync ends are admitted then, so three fdatasyncs cover every write.
func TestWritesPipelineBehindSync(t *testing.T) {
	t.Parallel()
	// The hook counts and stalls commit fdatasyncs: no pre-writer syncs.
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.NoPrewrite, o.Faults = -1, true, faults })
	const ns, later = "group/pipeline", 64
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	// Runs before the fixture's cleanup, so a failed assertion below never
	// leaves Close waiting on the stalled fdatasync.
	defer releaseOnce.Do(func() { close(release) })
	var syncs atomic.Int64
	defer faults.SetSync(func(string) error {
		if syncs.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	})()
	var answered atomic.Int64
	var wg sync.WaitGroup
	put := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.put(admin, ns, fmt.Sprintf("k%02d", i), docN(i), statestore.Expect{}); err != nil {
				t.Errorf("put %d: %v", i, err)
			}
			answered.Add(1)
		}()
	}
	put(0) // finds the pipeline idle and stalls in its own fdatasync
	<-entered
	for i := 1; i <= later; i++ {
		put(i)
	}
	// 64 queued writers make at least one full group; how many more join
	// it depends on when the write stage runs. The rest stay queued until
	// the stalled sync ends.
	const group = statestore.MinWriteBatch
	deadline := time.Now().Add(20 * time.Second)
	for {
		written, queued := f.s.JournalStats().Records, statestore.Queued(f.s)
		if written >= 1+group && written+uint64(queued) == later+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records written and %d ops queued while the first sync stalled; want at least %d written and all %d accounted for",
				written, queued, 1+group, later+1)
		}
		runtime.Gosched()
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d writes answered before any fdatasync completed", n)
	}
	for _, k := range []string{"k00", "k01", fmt.Sprintf("k%02d", group), fmt.Sprintf("k%02d", later)} {
		if _, err := f.s.Get(ctx, admin, ns, k); !errors.Is(err, statestore.ErrNotFound) {
			t.Fatalf("%s visible before its sync: %v", k, err)
		}
	}
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	if n := syncs.Load(); n > 3 {
		t.Fatalf("%d fdatasyncs for %d writes written during one stalled sync; want them grouped", n, later+1)
	}
	if e, err := f.s.Get(ctx, admin, ns, fmt.Sprintf("k%02d", later)); err != nil || e.Revision == 0 {
		t.Fatalf("write not visible after its sync: %v", err)
	}
}

// TestSyncFailureCrashCopy: right after an fdatasync failed, a crash (a
// copy of the store's files taken then, before Close writes anything)
// opens to exactly the acknowledged state: the failed batch's bytes were
// cut from the journal, so no later successful sync or replay can count
// them, and the next write reuses its revision.
func TestSyncFailureCrashCopy(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = -1, faults })
	const ns = "user/alice"
	for i := range 5 {
		f.mustPut(alice, ns, fmt.Sprintf("kept-%d", i), docN(i))
	}
	before := f.s.Namespace(ns)
	restore := faults.SetSync(func(string) error { return syscall.EIO })
	_, err := f.put(alice, ns, "lost", docN(9), statestore.Expect{})
	restore()
	wantCode(t, err, statestore.Storage, "journal")

	crash := t.TempDir()
	copyTree(t, f.dir, crash)
	c, err := statestore.Open(statestore.Options{Dir: crash, Clock: f.clock, Schemas: f.opts.Schemas})
	if err != nil {
		t.Fatalf("open the crash copy: %v", err)
	}
	defer c.Close()
	if cut := c.OpenReport().TailCut; cut != nil {
		t.Fatalf("crash copy had a torn tail: the failed batch's bytes were left in the journal: %v", cut)
	}
	if got := c.Namespace(ns); got != before {
		t.Fatalf("crash copy replays %+v, the acknowledged state is %+v", got, before)
	}
	if _, err := c.Get(ctx, alice, ns, "lost"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("the failed write is in the crash copy: %v", err)
	}
	// The live store goes on at the revision the failed write would have had.
	if e := f.mustPut(alice, ns, "after", docN(10)); e.Revision != before.Revision+1 {
		t.Fatalf("next write got revision %d, want %d", e.Revision, before.Revision+1)
	}
}

// copyTree copies the regular files under src into dst, keeping the layout.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncParksOnlyWhenOthersWait: a lone writer's syncs hold their
// processor (the faster way when nobody else needs it), while syncs that
// start with other callers queued park on the journal's io_uring, so the
// processor runs those callers meanwhile. The callers are made to queue by
// holding one sync (fault.Hooks.StallNextSync) while they arrive: left to
// the scheduler, a loaded machine under -race ran 64 writers' 1,280 puts
// as 1,300 lone syncs, nobody ever waiting. A round whose writers did not
// all arrive before the release is tried again, at most five times.
func TestSyncParksOnlyWhenOthersWait(t *testing.T) {
	t.Parallel()
	probe, err := uring.New()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	probe.Close()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.Faults = faults })
	for i := range 20 {
		f.mustPut(admin, "group/g1", "lone", docN(i))
	}
	if st := f.s.JournalStats(); st.Syncs < 20 || st.ParkedSyncs != 0 {
		t.Fatalf("lone writer: %d syncs, %d parked; want at least 20, none parked", st.Syncs, st.ParkedSyncs)
	}
	const writers = 64
	for round := range 5 {
		entered, release, restore := faults.StallNextSync()
		held := make(chan error, 1)
		go func() {
			_, err := f.put(admin, "group/g1", "held", docN(round), statestore.Expect{})
			held <- err
		}()
		<-entered
		var wg, arrived sync.WaitGroup
		arrived.Add(writers)
		for w := range writers {
			wg.Go(func() {
				arrived.Done()
				if _, err := f.put(admin, "group/g1", fmt.Sprintf("w%d", w), docN(round), statestore.Expect{}); err != nil {
					t.Error(err)
				}
			})
		}
		arrived.Wait()
		release()
		restore()
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if st := f.s.JournalStats(); st.ParkedSyncs > 0 {
			return
		}
	}
	st := f.s.JournalStats()
	t.Fatalf("%d writers queued behind a held sync, five times: none of %d syncs parked", writers, st.Syncs)
}

// TestWriteFailureRLimit makes the disk refuse a write for real: a child
// process lowers its RLIMIT_FSIZE below the next append, so write(2) fails
// with EFBIG part way. Every caller of the failed batch gets STORAGE,
// memory is unchanged, committed entries stay readable, and once the limit
// is lifted the same open store accepts writes and reopens cleanly.
func TestWriteFailureRLimit(t *testing.T) {
	// Serial: RLIMIT_FSIZE is process-wide.
	if os.Getenv(envFsizeChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailureRLimit$", "-test.v")
		cmd.Env = append(os.Environ(), envFsizeChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	// A file-size overrun raises SIGXFSZ, which kills by default; ignored,
	// the write returns EFBIG instead, as a full disk returns ENOSPC.
	signalIgnoreXFSZ()
	f := newFixture(t, func(o *statestore.Options) { o.SegmentSize = 1 << 20 })
	const ns = "user/alice"
	for i := 0; i < 10; i++ {
		f.mustPut(alice, ns, fmt.Sprintf("committed-%d", i), docN(i))
	}
	before := f.s.Namespace(ns)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	// The limit sits just past the records, inside the tail's pre-written
	// zeros: RLIMIT_FSIZE refuses writes past an offset, whatever the
	// file's size, so the next batch fails part way as on a full disk.
	segs, _ := journal.ListSegments(f.dir + "/state-store/journal")
	data, err := os.ReadFile(segs[len(segs)-1].Path)
	if err != nil {
		t.Fatal(err)
	}
	tail := len(bytes.TrimRight(data, "\x00"))
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(tail) + 150, Max: lim.Max}); err != nil {
		t.Skipf("cannot lower RLIMIT_FSIZE: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = f.put(alice, ns, fmt.Sprintf("refused-%d", i), docN(100+i), statestore.Expect{})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		se := wantCode(t, err, statestore.Storage, "journal")
		if !errors.Is(se, journal.ErrStorage) {
			t.Fatalf("put %d: STORAGE error does not wrap the journal failure: %v", i, err)
		}
	}
	if got := f.s.Namespace(ns); got != before {
		t.Fatalf("failed batch changed memory: %+v -> %+v", before, got)
	}
	for i := 0; i < 10; i++ {
		if _, err := f.s.Get(ctx, alice, ns, fmt.Sprintf("committed-%d", i)); err != nil {
			t.Fatalf("committed entry unreadable after the failure: %v", err)
		}
	}
	// Still failing while the limit holds, and still changing nothing.
	_, err = f.put(alice, ns, "refused-again", docN(7), statestore.Expect{})
	wantCode(t, err, statestore.Storage, "journal")
	// Space comes back: the same store accepts writes, without a restart.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	e := f.mustPut(alice, ns, "after", docN(8))
	if e.Revision != before.Revision+1 {
		t.Fatalf("first write after recovery got revision %d, want %d", e.Revision, before.Revision+1)
	}
	f.reopen()
	if f.s.OpenReport().TailCut != nil {
		t.Fatalf("reopen found a torn tail the recovery should have cut: %v", f.s.OpenReport().TailCut)
	}
	if got := f.s.Namespace(ns); got.Revision != before.Revision+1 || got.Entries != 11 {
		t.Fatalf("after reopen: %+v, want revision %d with 11 entries", got, before.Revision+1)
	}
	for i := range errs {
		if _, err := f.s.Get(ctx, alice, ns, fmt.Sprintf("refused-%d", i)); !errors.Is(err, statestore.ErrNotFound) {
			t.Fatalf("refused write %d visible after reopen: %v", i, err)
		}
	}
}

func signalIgnoreXFSZ() { signal.Ignore(syscall.SIGXFSZ) }
