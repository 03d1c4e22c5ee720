package journal

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
)

func records(from, n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		out[i] = testRecord(from + i)
	}
	return out
}

func mustWrite(t *testing.T, j *Journal, recs []*Record, first uint64) {
	t.Helper()
	if got, err := j.Write(recs, first); err != nil || got != first {
		t.Fatalf("write at %d: first %d, err %v", first, got, err)
	}
}

// syncWays are the two ways to sync: holding the processor, and parked on
// an io_uring completion. Every contract of Sync holds for both.
var syncWays = []struct {
	name string
	sync func(j *Journal, upTo uint64) error
}{
	{"direct", (*Journal).Sync},
	{"parked", (*Journal).SyncParked},
}

// TestWriteThenSync pins the pipeline contract: written records are not
// acknowledged until a Sync covers them, one Sync covers every batch
// written before it, and Write refuses a batch that does not continue the
// written records.
func TestWriteThenSync(t *testing.T) {
	t.Parallel()
	for _, way := range syncWays {
		t.Run(way.name, func(t *testing.T) { testWriteThenSync(t, way.sync) })
	}
}

func testWriteThenSync(t *testing.T, sync func(*Journal, uint64) error) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1<<20)
	mustWrite(t, j, records(1, 3), 1)
	mustWrite(t, j, records(4, 2), 4)
	if j.LastIndex() != 0 || j.Written() != 5 {
		t.Fatalf("before sync: last %d written %d, want 0 and 5", j.LastIndex(), j.Written())
	}
	if err := sync(j, 5); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); j.LastIndex() != 5 || st.Syncs != 1 || st.Appends != 2 || st.Records != 5 {
		t.Fatalf("after sync: last %d, stats %+v", j.LastIndex(), st)
	}
	for _, first := range []uint64{5, 7, 1} {
		if _, err := j.Write(records(int(first), 1), first); !errors.Is(err, ErrStale) {
			t.Fatalf("write at %d after 5 records: %v, want ErrStale", first, err)
		}
	}
	if err := sync(j, 9); err == nil {
		t.Fatal("sync of records never written succeeded")
	}
	j.Close()
	j, _ = openJournal(t, dir, 1<<20)
	defer j.Close()
	if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, 5)) {
		t.Fatal("reopened journal differs from the synced records")
	}
}

// TestSyncFailureCutsBack: an fdatasync that fails answers an error, cuts
// every written-but-unsynced record off the files (so the batches written
// while it ran are gone too), and leaves the journal writable at the first
// unacknowledged index without a reopen.
func TestSyncFailureCutsBack(t *testing.T) {
	t.Parallel()
	for _, way := range syncWays {
		t.Run(way.name, func(t *testing.T) { testSyncFailureCutsBack(t, way.sync) })
	}
}

func testSyncFailureCutsBack(t *testing.T, sync func(*Journal, uint64) error) {
	dir := filepath.Join(t.TempDir(), "journal")
	// Small segments, so the unsynced records span a segment change.
	faults := &fault.Hooks{}
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 300, Faults: faults})
	mustWrite(t, j, records(1, 3), 1)
	if err := j.Sync(3); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, j, records(4, 4), 4)
	mustWrite(t, j, records(8, 4), 8)
	restore := faults.SetSync(func(string) error { return syscall.EIO })
	err := sync(j, 11)
	restore()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync under EIO: %v", err)
	}
	var se *StorageError
	if !errors.As(err, &se) || se.Index != 4 {
		t.Fatalf("error %v does not name index 4, the first record lost", err)
	}
	if j.LastIndex() != 3 || j.Written() != 3 || j.Stats().Failures != 1 {
		t.Fatalf("after failure: last %d written %d failures %d", j.LastIndex(), j.Written(), j.Stats().Failures)
	}
	if _, err := j.Write(records(12, 1), 12); !errors.Is(err, ErrStale) {
		t.Fatalf("write continuing the lost records: %v, want ErrStale", err)
	}
	if err := sync(j, 11); err == nil {
		t.Fatal("sync of cut-back records succeeded")
	}
	continuesAfterCut(t, j, dir, 300)
}

// continuesAfterCut writes two new records at index 4, the first one a
// failure cut back (records 1..3 were acknowledged), syncs them, closes j
// and checks that the journal in dir reopens with no cut and replays the
// acknowledged records and the new ones only.
func continuesAfterCut(t *testing.T, j *Journal, dir string, segSize int) {
	t.Helper()
	again := records(104, 2)
	for i, r := range again {
		r.Revision = uint64(4 + i)
	}
	mustWrite(t, j, again, 4)
	if err := j.Sync(5); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, cut := openJournal(t, dir, segSize)
	defer j.Close()
	if cut != nil {
		t.Fatalf("reopen after recovery reported a cut: %v", cut)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, append(records(1, 3), again...)) {
		t.Fatal("reopened journal holds records other than the acknowledged ones")
	}
}

// TestSyncRacingRecovery: a sync still in flight when a failure elsewhere
// cut the files back must not claim its records, even if its own
// fdatasync succeeds.
func TestSyncRacingRecovery(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 1 << 20, Faults: faults})
	defer j.Close()
	mustWrite(t, j, records(1, 2), 1)
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	// Before Close, so a failed assertion never leaves it behind the stall.
	defer releaseOnce.Do(func() { close(release) })
	var calls int
	var mu sync.Mutex
	defer faults.SetSync(func(string) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			close(entered)
			<-release // the first sync stalls inside its fdatasync
			return nil
		}
		return syscall.EIO // the second fails and recovers the journal
	})()
	done := make(chan error)
	go func() { done <- j.Sync(2) }()
	<-entered
	if err := j.Sync(2); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second sync: %v, want EIO", err)
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-done; err == nil {
		t.Fatal("the stalled sync claimed records a recovery had cut back")
	}
	if j.LastIndex() != 0 || j.Written() != 0 {
		t.Fatalf("last %d written %d after the recovery, want 0", j.LastIndex(), j.Written())
	}
}

// holdWrites makes the next batch j hands to tidwall/wal wait, inside
// Write, until release is closed; entered is closed once it waits.
func holdWrites(j *Journal) (entered, release chan struct{}) {
	g := newGate()
	j.opts.seams.writeBatch.set(func(l *wal.Log, b *wal.Batch) error {
		g.hold(nil)
		return l.WriteBatch(b)
	})
	return g.entered, g.release
}

// gate holds the first goroutine that calls hold until release is closed,
// closing entered once it is there: a test seam made slow on demand.
type gate struct {
	entered, release chan struct{}
	once, opened     sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

// open closes release, once however often it is called (a deferred open
// keeps a failing test from leaving the held goroutine behind).
func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

// hold runs first (if not nil) and holds, on the first call only; later
// calls pass straight through.
func (g *gate) hold(first func()) {
	g.once.Do(func() {
		if first != nil {
			first()
		}
		close(g.entered)
		<-g.release
	})
}

// TestSyncAcknowledgesDuringWrite: a Sync acknowledges the records written
// before it while the next batch is still being written (the writer holds
// wmu, never mu, across its batch). If Write held the lock Sync
// acknowledges under, the Sync below would wait for the held batch and the
// test would never finish.
func TestSyncAcknowledgesDuringWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1<<20)
	defer j.Close()
	mustWrite(t, j, records(1, 3), 1)
	entered, release := holdWrites(j)
	wrote := make(chan error)
	go func() {
		_, err := j.Write(records(4, 2), 4)
		wrote <- err
	}()
	<-entered
	if err := j.Sync(3); err != nil {
		t.Fatalf("sync while a batch is being written: %v", err)
	}
	if j.LastIndex() != 3 || j.Written() != 3 {
		t.Fatalf("during the held write: last %d written %d, want 3 and 3", j.LastIndex(), j.Written())
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(5); err != nil || j.LastIndex() != 5 {
		t.Fatalf("sync after the write: %v, last %d", err, j.LastIndex())
	}
}

// TestSyncFailureDuringWrite: an fdatasync that fails while the next batch
// is being written cuts the files back only once that batch is in them
// (the cut takes wmu), and the cut removes it too: its records are never
// acknowledged, the files hold the acknowledged records only, and the
// journal goes on at the first lost index.
func TestSyncFailureDuringWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 1 << 20, Faults: faults})
	mustWrite(t, j, records(1, 3), 1)
	if err := j.Sync(3); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, j, records(4, 2), 4)
	entered, release := holdWrites(j)
	wrote := make(chan error)
	go func() {
		_, err := j.Write(records(6, 2), 6)
		wrote <- err
	}()
	<-entered
	synced := make(chan error)
	restore := faults.SetSync(func(string) error { return syscall.EIO })
	go func() { synced <- j.Sync(5) }()
	close(release)
	<-wrote // either outcome: the batch was being written as the sync failed
	err := <-synced
	restore()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync under EIO: %v", err)
	}
	if err := j.Sync(7); err == nil {
		t.Fatal("the batch written during the failed sync was acknowledged")
	}
	if j.LastIndex() != 3 || j.Written() != 3 {
		t.Fatalf("after the failure: last %d written %d, want 3 and 3", j.LastIndex(), j.Written())
	}
	continuesAfterCut(t, j, dir, 1<<20)
}

// TestRingsFollowOptions: a syncing journal opens its two rings (where the
// kernel allows io_uring), and DirectSync or NoSync opens none, so every
// fdatasync then runs in the calling goroutine.
func TestRingsFollowOptions(t *testing.T) {
	t.Parallel()
	probe, err := uring.New()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	probe.Close()
	for _, c := range []struct {
		name  string
		opts  Options
		rings bool
	}{
		{"default", Options{}, true},
		{"DirectSync", Options{DirectSync: true}, false},
		{"NoSync", Options{NoSync: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _, err := Open(filepath.Join(t.TempDir(), "journal"), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if got := j.rings.commit != nil && j.rings.background != nil; got != c.rings {
				t.Fatalf("rings open: %v, want %v", got, c.rings)
			}
			mustWrite(t, j, records(1, 2), 1)
			if err := j.SyncParked(2); err != nil || j.LastIndex() != 2 {
				t.Fatalf("SyncParked: %v, last %d", err, j.LastIndex())
			}
		})
	}
}

// TestFaultsStayWithTheirJournal: Options.Faults is consulted by every
// fsync of the journal given it, and by no other journal's: a failing
// fdatasync hook fails that journal's commits only, and its disk hook sees
// the directory fsync that makes a new segment durable (through the
// journal's disk.FS), whose failure fails the commit that needs it.
func TestFaultsStayWithTheirJournal(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	mine, _ := openJournalOpts(t, filepath.Join(t.TempDir(), "journal"), Options{SegmentSize: 300, Faults: faults})
	defer mine.Close()
	other, _ := openJournal(t, filepath.Join(t.TempDir(), "journal"), 300)
	defer other.Close()

	restore := faults.SetSync(func(string) error { return syscall.EIO })
	if _, err := mine.Append(records(1, 1)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append under its own failing hook: %v, want EIO", err)
	}
	if _, err := other.Append(records(1, 1)); err != nil {
		t.Fatalf("another journal's append failed with this one's hook: %v", err)
	}
	restore()

	var dirs []string
	faults.SetDiskSync(func(path string) error {
		dirs = append(dirs, path)
		if path == mine.Dir() {
			return syscall.EIO
		}
		return nil
	})
	// Enough records to open a new segment, which the commit's directory
	// fsync must cover.
	_, err := mine.Append(records(1, 8))
	if !errors.Is(err, syscall.EIO) || !slices.Contains(dirs, mine.Dir()) {
		t.Fatalf("append into a new segment under a failing directory fsync: %v, disk hook saw %q; want EIO for %s", err, dirs, mine.Dir())
	}
	if mine.LastIndex() != 0 {
		t.Fatalf("last index %d after the failed commits, want 0", mine.LastIndex())
	}
}
