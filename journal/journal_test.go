package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func testRecord(i int) *Record {
	return &Record{Kind: KindPut, Namespace: "user/alice", Key: fmt.Sprintf("k%03d", i%7), Revision: uint64(i), TimeMs: int64(i),
		Schema: "keeppeek.media-intent.v1", Owner: "alice", CreatedMs: 1, UpdatedMs: int64(i),
		Document: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), i%40)))}
}

func openJournal(t *testing.T, dir string, segSize int) (*Journal, *TailCut) {
	t.Helper()
	return openJournalOpts(t, dir, Options{SegmentSize: segSize})
}

// openJournalOpts opens the journal in dir with opts, giving it seams of
// its own when opts names none, so a test may install one after Open.
func openJournalOpts(t *testing.T, dir string, opts Options) (*Journal, *TailCut) {
	t.Helper()
	if opts.seams == nil {
		opts.seams = &seams{}
	}
	j, cut, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return j, cut
}

// writeJournal creates a journal of n records in several segments and
// returns its directory and the records.
func writeJournal(t *testing.T, n, segSize int) (string, []*Record) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, segSize)
	var recs []*Record
	for i := 1; i <= n; {
		var batch []*Record
		for k := 0; k < 1+i%3 && i <= n; k++ {
			batch = append(batch, testRecord(i))
			i++
		}
		first, err := j.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		if first != uint64(len(recs)+1) {
			t.Fatalf("first index %d, want %d", first, len(recs)+1)
		}
		recs = append(recs, batch...)
	}
	// Tail tests need a final record with another record before it in the
	// same segment.
	for len(entryOffsets(t, lastSegment(t, dir).Path)) < 2 {
		r := testRecord(len(recs) + 1)
		if _, err := j.Append([]*Record{r}); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, recs
}

// crashedBeforeLastAck puts the acknowledged-floor marker where a crash
// during the final record's append would have left it: below that record,
// which was written but never acknowledged.
func crashedBeforeLastAck(t *testing.T, dir string, recs []*Record) {
	t.Helper()
	if err := SetFloor(dir, uint64(len(recs)-1)); err != nil {
		t.Fatal(err)
	}
}

func replayAll(t *testing.T, j *Journal) []*Record {
	t.Helper()
	var got []*Record
	if err := j.Replay(j.FirstIndex(), func(idx uint64, r *Record) error {
		if idx != uint64(len(got)+1) {
			return fmt.Errorf("index %d after %d records", idx, len(got))
		}
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return got
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "journal")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// entryOffsets returns the byte offset of each entry in a segment file.
func entryOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	res, _ := scan(data, DefaultLimits, func(i int, off int64, r *Record) error { offs = append(offs, off); return nil })
	if res.bad != nil {
		t.Fatalf("segment %s already damaged at %d: %s", path, res.bad.offset, res.bad.reason)
	}
	return offs
}

func lastSegment(t *testing.T, dir string) Segment {
	t.Helper()
	segs, err := ListSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	return segs[len(segs)-1]
}

func TestAppendReplayReopen(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 60, 700)
	segs, _ := ListSegments(dir)
	if len(segs) < 4 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	j, cut := openJournal(t, dir, 700)
	defer j.Close()
	if cut != nil {
		t.Fatalf("clean journal reported a cut: %v", cut)
	}
	if j.LastIndex() != 60 || j.FirstIndex() != 1 {
		t.Fatalf("range %d..%d", j.FirstIndex(), j.LastIndex())
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, recs) {
		t.Fatal("replayed records differ from appended ones")
	}
	if first, err := j.Append([]*Record{testRecord(61)}); err != nil || first != 61 {
		t.Fatalf("append after reopen: %d %v", first, err)
	}
}
