package journal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// TestCrashStatesOfPrewriting copies a live journal's files at moments a
// crash could freeze them and opens the copy: with the tail pre-written (a
// kill between pre-writes), with a chunk only partly written (a kill during
// pre-writing, or a trim that shortened the zeros but not yet to the
// records), and with a record written over zeros whose data never reached
// the disk. Every acknowledged record must be there; zeros are trimmed
// without a TailCut or a quarantine copy; zeros where the floor says
// records were acknowledged refuse to open and change nothing.
func TestCrashStatesOfPrewriting(t *testing.T) {
	t.Parallel()
	const seg = 256 << 10
	tests := []struct {
		name    string
		damage  func(data []byte, recordsEnd, final int64) []byte
		keep    int  // records the reopened journal holds, of 12
		refuse  bool // the floor is 12: Open must refuse
		trimmed bool
	}{
		{"pre-written tail", func(d []byte, _, _ int64) []byte { return d }, 12, false, true},
		{"pre-write cut mid-chunk", func(d []byte, end, _ int64) []byte { return d[:end+4097] }, 12, false, true},
		{"trim interrupted", func(d []byte, end, _ int64) []byte { return d[:end+1] }, 12, false, true},
		{"already trimmed", func(d []byte, end, _ int64) []byte { return d[:end] }, 12, false, false},
		{"unacknowledged record lost over zeros", func(d []byte, end, final int64) []byte {
			clear(d[final:end])
			return d
		}, 11, false, true},
		{"acknowledged record lost over zeros", func(d []byte, end, final int64) []byte {
			clear(d[final:end])
			return d
		}, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := filepath.Join(t.TempDir(), "live")
			j, _ := openJournal(t, live, seg)
			if _, err := j.Append(records(1, 12)); err != nil {
				t.Fatal(err)
			}
			waitPrewriteIdle(t, j)
			src := lastSegment(t, live)
			data, err := os.ReadFile(src.Path)
			if err != nil {
				t.Fatal(err)
			}
			end := j.tailBytes
			offs := entryOffsets(t, src.Path)
			j.Close()
			if int64(len(data)) <= end {
				t.Fatalf("live tail holds %d bytes, no pre-written space after %d", len(data), end)
			}
			crashed := filepath.Join(t.TempDir(), "crashed", "journal")
			if err := os.MkdirAll(crashed, 0o755); err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(data, end, offs[len(offs)-1])
			path := filepath.Join(crashed, src.Name())
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := SetFloor(crashed, uint64(tc.keep)); err != nil {
				t.Fatal(err)
			}
			if tc.refuse {
				if err := SetFloor(crashed, 12); err != nil {
					t.Fatal(err)
				}
				_, _, err := Open(crashed, Options{SegmentSize: seg})
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Index != 12 {
					t.Fatalf("open over zeros where record 12 was acknowledged: %v, want corruption at index 12", err)
				}
				if got, _ := os.ReadFile(path); !reflect.DeepEqual(got, damaged) {
					t.Fatal("a refused open changed the segment")
				}
				return
			}
			j, cut := openJournal(t, crashed, seg)
			defer j.Close()
			if cut != nil {
				t.Fatalf("zeros reported as a torn tail: %v", cut)
			}
			if got := j.Stats().Trimmed; (got > 0) != tc.trimmed {
				t.Fatalf("trimmed %d bytes, want trimmed=%v", got, tc.trimmed)
			}
			if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(crashed), "quarantine")); len(ents) != 0 {
				t.Fatalf("quarantine holds %d files after a zero trim", len(ents))
			}
			if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, tc.keep)) {
				t.Fatalf("replay returned %d records, want %d", len(got), tc.keep)
			}
			if _, err := j.Append(records(tc.keep+1, 1)); err != nil {
				t.Fatalf("append after the trim: %v", err)
			}
		})
	}
}

// TestSealedSegmentEndingInZerosIsCorrupt: pre-writing never leaves zeros
// in a sealed segment, so zeros there are damage, named by segment and
// index, never trimmed.
func TestSealedSegmentEndingInZerosIsCorrupt(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 40, 1000)
	segs, _ := ListSegments(dir)
	if len(segs) < 2 {
		t.Fatal("want at least two segments")
	}
	first := segs[0]
	data, _ := os.ReadFile(first.Path)
	if err := os.WriteFile(first.Path, append(data, make([]byte, 300)...), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ReplayDir(dir, 1, uint64(len(recs)), DefaultLimits, func(uint64, *Record) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != first.Name() || ce.Index != segs[1].Start {
		t.Fatalf("replay over a sealed segment ending in zeros: %v, want corruption in %s at index %d", err, first.Name(), segs[1].Start)
	}
}

// TestPrewriteSyncFailureRecovers: a failed fdatasync of pre-written zeros
// may have cost dirty pages of records in the same file, so the journal
// treats it as a failed commit: the next write recovers (cut back to the
// last acknowledged record, reopen) and every acknowledged record stays.
func TestPrewriteSyncFailureRecovers(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 512<<10)
	if _, err := j.Append(records(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// The reopened journal's pre-writer starts at once, and its sync fails.
	faults := &fault.Hooks{}
	restore := faults.SetPrewriteSync(func(string) error { return syscall.EIO })
	j, _ = openJournalOpts(t, dir, Options{SegmentSize: 512 << 10, Faults: faults})
	defer j.Close()
	st := waitPrewriteIdle(t, j)
	restore()
	if st.PrewriteFailures != 1 || st.Prewritten != 0 {
		t.Fatalf("after one failed pre-write sync: PrewriteFailures %d, Prewritten %d", st.PrewriteFailures, st.Prewritten)
	}
	if _, err := j.Append(records(6, 2)); err != nil {
		t.Fatalf("append after a failed pre-write sync: %v", err)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, 7)) {
		t.Fatalf("replay returned %d records, want 7", len(got))
	}
	if st := waitPrewriteIdle(t, j); st.Prewritten == 0 {
		t.Fatal("pre-writing did not resume after the recovery")
	}
}

// TestPrewriteWriteFailureRests: a zero write that fails (a full disk, say)
// costs no record: pre-writing stops for that segment, whatever wakes the
// pre-writer afterwards, commits append as tidwall/wal alone would, and
// the next segment is pre-written again.
func TestPrewriteWriteFailureRests(t *testing.T) {
	t.Parallel()
	const seg = 16 << 10
	var (
		mu     sync.Mutex
		writes = map[string]int{} // zero writes tried, by segment file
		full   = true
	)
	s := &seams{}
	s.writeZeros.set(func(f *os.File, n, off int64) error {
		mu.Lock()
		defer mu.Unlock()
		writes[filepath.Base(f.Name())]++
		if full {
			return syscall.ENOSPC
		}
		return writeZerosAt(f, n, off)
	})
	tried := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return writes[name]
	}
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: seg, seams: s})
	defer j.Close()
	first := lastSegment(t, dir)
	if st := waitPrewriteIdle(t, j); st.PrewriteFailures != 1 || st.Prewritten != 0 {
		t.Fatalf("after a failed zero write: PrewriteFailures %d, Prewritten %d; want 1 and 0", st.PrewriteFailures, st.Prewritten)
	}
	next := 1
	for range 3 {
		if _, err := j.Append(records(next, 5)); err != nil {
			t.Fatalf("append after a failed zero write: %v", err)
		}
		next += 5
		waitPrewriteIdle(t, j)
	}
	if n := tried(first.Name()); n != 1 {
		t.Fatalf("%d zero writes tried on the segment where one failed, want that one only", n)
	}
	j.mu.Lock()
	recordBytes := j.tailBytes
	j.mu.Unlock()
	if size := fileSize(t, first.Path); size != recordBytes {
		t.Fatalf("tail file is %d bytes, want its %d bytes of records only", size, recordBytes)
	}

	mu.Lock()
	full = false
	mu.Unlock()
	for lastSegment(t, dir).Start == first.Start {
		if _, err := j.Append(records(next, 5)); err != nil {
			t.Fatal(err)
		}
		next += 5
	}
	if st := waitPrewriteIdle(t, j); st.Prewritten == 0 || tried(lastSegment(t, dir).Name()) == 0 {
		t.Fatalf("the next segment was not pre-written: Prewritten %d", st.Prewritten)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, next-1)) {
		t.Fatalf("replay returned %d records, want %d", len(got), next-1)
	}
}
