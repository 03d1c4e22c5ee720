package journal

import (
	"fmt"
	"path/filepath"
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

// TestReclaimFreesWholeSegmentsOnly pins how checkpoints give journal space
// back: only segments wholly before the needed index go (removed as files,
// without tidwall/wal rewriting anything), the segment holding it, every
// later segment and the tail keep their files untouched, writing goes on,
// a front truncation after it still works, and every needed record
// survives a reopen.
func TestReclaimFreesWholeSegmentsOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1024)
	const n = 120
	for i := 1; i <= n; i++ {
		if _, err := j.Append([]*Record{testRecord(i)}); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := ListSegments(dir)
	if err != nil || len(segs) < 6 {
		t.Fatalf("want at least 6 segments to work with, got %d (%v)", len(segs), err)
	}

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
	err = j.Replay(stub, func(index uint64, rec *Record) error {
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
