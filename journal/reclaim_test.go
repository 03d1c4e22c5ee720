package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// segmentList renders the segment files as start:size, the identity a
// reclaim must keep for every segment it does not free.
func segmentList(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = fmt.Sprintf("%d:%d", s.Start, s.Size)
	}
	return out
}

// segmentedJournal opens a journal of 1 KiB segments and appends records
// 1..n one at a time, which must fill at least minSegs segments, and waits
// for the pre-writer to be done with the tail.
func segmentedJournal(t *testing.T, n, minSegs int) (string, *Journal, []Segment) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1024)
	for i := 1; i <= n; i++ {
		if _, err := j.Append([]*Record{testRecord(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The pre-writer would otherwise grow the tail behind the caller's
	// listings.
	waitPrewriteIdle(t, j)
	segs, err := ListSegments(dir)
	if err != nil || len(segs) < minSegs {
		t.Fatalf("want at least %d segments to work with, got %d (%v)", minSegs, len(segs), err)
	}
	return dir, j, segs
}

// TestReclaimFreesWholeSegmentsOnly pins how checkpoints give journal space
// back: only segments wholly before the needed index go (removed as files,
// without tidwall/wal rewriting anything), the segment holding it, every
// later segment and the tail keep their files untouched, writing goes on,
// a front truncation after it still works, and every needed record
// survives a reopen.
func TestReclaimFreesWholeSegmentsOnly(t *testing.T) {
	t.Parallel()
	const n = 120
	dir, j, segs := segmentedJournal(t, n, 6)

	before := segmentList(t, dir)
	if err := j.Reclaim(segs[0].Start + 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentList(t, dir); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("reclaim inside the first segment changed the files:\nbefore %v\nafter  %v", before, got)
	}

	need := segs[3].Start + 2
	stub := segs[3].Start
	if err := j.Reclaim(need); err != nil {
		t.Fatal(err)
	}
	after := segmentList(t, dir)
	if fmt.Sprint(after) != fmt.Sprint(before[3:]) {
		t.Fatalf("after reclaiming to index %d:\nbefore %v\nafter  %v, want the segments from the one holding it", need, before, after)
	}
	if j.FirstIndex() != stub {
		t.Fatalf("first index %d after the reclaim, want %d", j.FirstIndex(), stub)
	}
	if err := j.Reclaim(need); err != nil {
		t.Fatal(err)
	}
	if got := segmentList(t, dir); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Fatalf("a second reclaim at the same index changed the files:\nbefore %v\nafter  %v", after, got)
	}

	// Writing goes on after the reclaim; a front truncation after it
	// (tidwall/wal's list of segments is stale) still works; a reopen sees
	// exactly the records from the truncation on.
	if _, err := j.Append([]*Record{testRecord(n + 1)}); err != nil {
		t.Fatal(err)
	}
	stub++
	if err := j.TruncateFront(stub); err != nil {
		t.Fatalf("truncate front after a reclaim: %v", err)
	}
	if _, err := j.Append([]*Record{testRecord(n + 2)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openJournal(t, dir, 1024)
	defer j.Close()
	if j.FirstIndex() != stub || j.LastIndex() != n+2 {
		t.Fatalf("reopened journal holds %d..%d, want %d..%d", j.FirstIndex(), j.LastIndex(), stub, n+2)
	}
	next := stub
	err := j.Replay(stub, func(index uint64, rec *Record) error {
		if index != next || rec.Revision != index {
			return fmt.Errorf("record at index %d has revision %d, want index %d", index, rec.Revision, next)
		}
		next++
		return nil
	})
	if err != nil || next != n+3 {
		t.Fatalf("replay after the reclaim: %v (reached %d, want %d)", err, next, n+3)
	}
}

// TestReclaimUnlinksOutsideTheWriteLock: freeing a segment's blocks can wait
// on the file system's own journal for milliseconds, so a Reclaim in the
// middle of an unlink must hold up no Write or Sync. Close waits for the
// unlinks to finish (another process may own the directory once it
// returns), and a Reclaim after Close removes nothing.
func TestReclaimUnlinksOutsideTheWriteLock(t *testing.T) {
	t.Parallel()
	const n = 60
	dir, j, segs := segmentedJournal(t, n, 5)
	g := newGate()
	var first string
	j.opts.seams.removeSegmentFile.set(func(path string) error {
		g.hold(func() { first = path })
		return os.Remove(path)
	})

	defer g.open() // a failure below must not leave the Reclaim hanging
	reclaimed := make(chan error, 1)
	go func() { reclaimed <- j.Reclaim(segs[3].Start + 1) }()
	if <-g.entered; first != segs[0].Path {
		t.Fatalf("first unlink is of %s, want the oldest segment, %s", first, segs[0].Path)
	}
	// The unlink hangs: commits go on (this Append would hang otherwise).
	if _, err := j.Append([]*Record{testRecord(n + 1)}); err != nil {
		t.Fatalf("append during a reclaim: %v", err)
	}

	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	untilBlockedIn(t, "journal.(*Journal).Close(", "sync.Mutex.Lock", closed, "Close returned while a Reclaim was unlinking")
	g.open()
	if err := <-reclaimed; err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	after := segmentList(t, dir)
	if after[0] != fmt.Sprintf("%d:%d", segs[3].Start, segs[3].Size) {
		t.Fatalf("segments after the reclaim: %v, want them to start with segment %d", after, segs[3].Start)
	}
	if err := j.Reclaim(n + 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("reclaim after close: %v, want ErrClosed", err)
	}
	if got := segmentList(t, dir); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Fatalf("a reclaim after close changed the files:\nbefore %v\nafter  %v", after, got)
	}
	j, _ = openJournal(t, dir, 1024)
	defer j.Close()
	if j.FirstIndex() != segs[3].Start || j.LastIndex() != n+1 {
		t.Fatalf("reopened journal holds %d..%d, want %d..%d", j.FirstIndex(), j.LastIndex(), segs[3].Start, n+1)
	}
}

// blockedIn reports whether some goroutine that the test function test
// started (with a go statement in its body), and whose stack passes through
// fn, is parked in state. Goroutines of other tests do not count: tests
// running in parallel park in the same functions.
func blockedIn(test, fn, state string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	creator := "created by github.com/keeppeek/statestore/journal." + test + " in goroutine "
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) && strings.Contains(g, creator) && strings.HasPrefix(g[strings.IndexByte(g, '['):], "["+state) {
			return true
		}
	}
	return false
}

// untilBlockedIn waits until a goroutine the top-level test t started is
// seen blocked in fn in state (see blockedIn). If done delivers first, the
// goroutine finished instead of blocking, and the test fails with what and
// its error.
func untilBlockedIn(t *testing.T, fn, state string, done <-chan error, what string) {
	t.Helper()
	for !blockedIn(t.Name(), fn, state) {
		select {
		case err := <-done:
			t.Fatalf("%s (%v)", what, err)
		default:
		}
		runtime.Gosched()
	}
}

func TestTruncateFront(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 50, 700)
	j, _ := openJournal(t, dir, 700)
	if err := j.TruncateFront(31); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, _ = openJournal(t, dir, 700)
	defer j.Close()
	if j.FirstIndex() != 31 || j.LastIndex() != uint64(len(recs)) {
		t.Fatalf("range %d..%d after truncation", j.FirstIndex(), j.LastIndex())
	}
	var got []*Record
	j.Replay(31, func(idx uint64, r *Record) error { got = append(got, r); return nil })
	if !reflect.DeepEqual(got, recs[30:]) {
		t.Fatalf("replay after truncation: %d records", len(got))
	}
	// Truncating everything leaves an empty journal that continues the indexes.
	next := uint64(len(recs) + 1)
	if err := j.TruncateFront(next); err != nil {
		t.Fatal(err)
	}
	if first, err := j.Append([]*Record{testRecord(51)}); err != nil || first != next {
		t.Fatalf("append after full truncation: %d %v", first, err)
	}
}

func TestFinishInterruptedTruncation(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 50, 700)
	segs, _ := ListSegments(dir)
	// A crash after tidwall/wal wrote the .START marker but before it
	// removed the old segments: open must complete the truncation.
	target := segs[2].Start + 1
	var ebuf []byte
	data, _ := os.ReadFile(segs[2].Path)
	offs := entryOffsets(t, segs[2].Path)
	ebuf = data[offs[1]:]
	os.WriteFile(filepath.Join(dir, segmentName(target)+".START"), ebuf, 0o644)
	os.WriteFile(filepath.Join(dir, segmentName(target)+".START.TEMP"), []byte("junk"), 0o644)
	j, _ := openJournal(t, dir, 700)
	defer j.Close()
	if j.FirstIndex() != target {
		t.Fatalf("first index %d, want %d", j.FirstIndex(), target)
	}
	var got []*Record
	if err := j.Replay(target, func(idx uint64, r *Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs[target-1:]) {
		t.Fatalf("replay after finishing truncation: %d records", len(got))
	}
}
