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
// back: only segments wholly before the needed index go, the segment before
// the one holding it shrinks to its last record (tidwall/wal's front
// truncation rewrites one record, not a segment), every later segment and
// the tail keep their files untouched, and every needed record survives a
// reopen.
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
	stub := segs[3].Start - 1
	if err := j.Reclaim(need); err != nil {
		t.Fatal(err)
	}
	after := segmentList(t, dir)
	if want := after[1:]; fmt.Sprint(want) != fmt.Sprint(before[3:]) {
		t.Fatalf("segments from the one holding index %d changed:\nbefore %v\nafter  %v", need, before[3:], want)
	}
	frame, err := testRecord(int(stub)).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%d", stub, uvarintLen(uint64(len(frame)))+len(frame)); after[0] != want {
		t.Fatalf("first segment after the reclaim is %s, want the one-record stub %s", after[0], want)
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

	// Writing goes on after the reclaim, and a reopen sees exactly the
	// records from the stub on.
	if _, err := j.Append([]*Record{testRecord(n + 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openJournal(t, dir, 1024)
	defer j.Close()
	if j.FirstIndex() != stub || j.LastIndex() != n+1 {
		t.Fatalf("reopened journal holds %d..%d, want %d..%d", j.FirstIndex(), j.LastIndex(), stub, n+1)
	}
	next := stub
	err = j.Replay(stub, func(index uint64, rec *Record) error {
		if index != next || rec.Revision != index {
			return fmt.Errorf("record at index %d has revision %d, want index %d", index, rec.Revision, next)
		}
		next++
		return nil
	})
	if err != nil || next != n+2 {
		t.Fatalf("replay after the reclaim: %v (reached %d, want %d)", err, next, n+2)
	}
}
