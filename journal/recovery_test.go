package journal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestTornTailEveryOffset cuts the last segment at every byte inside its
// final record: open must drop exactly that record, report the cut, and
// keep every earlier record.
func TestTornTailEveryOffset(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 23, 900)
	crashedBeforeLastAck(t, dir, recs)
	last := lastSegment(t, dir)
	offs := entryOffsets(t, last.Path)
	if len(offs) < 2 {
		t.Fatalf("last segment holds %d records; the test wants at least 2", len(offs))
	}
	final := offs[len(offs)-1]
	for cutAt := final + 1; cutAt < last.Size; cutAt++ {
		d := copyDir(t, dir)
		if err := os.Truncate(filepath.Join(d, last.Name()), cutAt); err != nil {
			t.Fatal(err)
		}
		j, cut := openJournal(t, d, 900)
		if cut == nil || cut.Offset != final || cut.Index != uint64(len(recs)) || cut.Bytes != cutAt-final {
			t.Fatalf("cut at %d: report %+v, want offset %d index %d bytes %d", cutAt, cut, final, len(recs), cutAt-final)
		}
		if _, err := os.Stat(cut.SavedAs); err != nil {
			t.Fatalf("damaged segment not kept: %v", err)
		}
		if got := replayAll(t, j); !reflect.DeepEqual(got, recs[:len(recs)-1]) {
			t.Fatalf("cut at %d: replay lost more than the torn record", cutAt)
		}
		if first, err := j.Append([]*Record{testRecord(99)}); err != nil || first != uint64(len(recs)) {
			t.Fatalf("append after repair: %d %v", first, err)
		}
		j.Close()
	}
}

// TestZeroFilledTail pins how Open reads zeros at the end of the last
// segment. A zero run from an entry boundary to the end of the file is what
// pre-writing leaves (or records whose data never reached the disk): it is
// trimmed without a TailCut or a quarantine copy. Zeros that start inside
// an entry are a torn write: cut, reported, and quarantined.
func TestZeroFilledTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		damage  func(data []byte, final int64) []byte
		cut     bool // a TailCut is reported (else a silent trim)
		trimmed func(data []byte, final int64) int64
		keep    func(n int) int
	}{
		{"zeros appended after the last record", func(d []byte, _ int64) []byte { return append(d, make([]byte, 4096)...) },
			false, func([]byte, int64) int64 { return 4096 }, func(n int) int { return n }},
		{"final record zeroed", func(d []byte, final int64) []byte {
			clear(d[final:])
			return d
		}, false, func(d []byte, final int64) int64 { return int64(len(d)) - final }, func(n int) int { return n - 1 }},
		{"final record half zeroed plus zero page", func(d []byte, final int64) []byte {
			clear(d[final+int64(len(d[final:])/2):])
			return append(d, make([]byte, 512)...)
		}, true, nil, func(n int) int { return n - 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, recs := writeJournal(t, 17, 1000)
			crashedBeforeLastAck(t, dir, recs)
			last := lastSegment(t, dir)
			offs := entryOffsets(t, last.Path)
			final := offs[len(offs)-1]
			data, _ := os.ReadFile(last.Path)
			damaged := tc.damage(data, final)
			if err := os.WriteFile(last.Path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			quarantine := filepath.Join(filepath.Dir(dir), "quarantine")
			j, cut := openJournal(t, dir, 1000)
			defer j.Close()
			kept := tc.keep(len(recs))
			switch {
			case tc.cut && (cut == nil || cut.Index != uint64(kept+1)):
				t.Fatalf("cut %+v, want one at index %d", cut, kept+1)
			case !tc.cut && cut != nil:
				t.Fatalf("zero run reported as a torn tail: %v", cut)
			case !tc.cut && j.Stats().Trimmed != tc.trimmed(damaged, final):
				t.Fatalf("trimmed %d bytes, want %d", j.Stats().Trimmed, tc.trimmed(damaged, final))
			}
			if ents, _ := os.ReadDir(quarantine); (len(ents) > 0) != tc.cut {
				t.Fatalf("quarantine holds %d files, want a copy only for a torn tail", len(ents))
			}
			if got := replayAll(t, j); !reflect.DeepEqual(got, recs[:kept]) {
				t.Fatalf("replay kept %d records, want %d", len(got), kept)
			}
		})
	}
}

// TestFlippedByteInLastSegment flips bytes of every record but the final
// one of the last segment: that is corruption, not a torn tail, and Open
// must name the index and offset.
func TestFlippedByteInLastSegment(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 23, 900)
	last := lastSegment(t, dir)
	offs := entryOffsets(t, last.Path)
	for i, off := range offs[:len(offs)-1] {
		next := offs[i+1]
		for _, at := range []int64{off, off + 1, off + 5, (off + next) / 2, next - 1} {
			d := copyDir(t, dir)
			p := filepath.Join(d, last.Name())
			data, _ := os.ReadFile(p)
			data[at] ^= 0x5A
			os.WriteFile(p, data, 0o644)
			_, _, err := Open(d, Options{SegmentSize: 900})
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: want *CorruptError, got %v", at, err)
			}
			if ce.Index != last.Start+uint64(i) || ce.Offset != off || ce.Segment != last.Name() {
				t.Fatalf("flip at %d: error names index %d offset %d segment %s, want %d %d %s (%v)",
					at, ce.Index, ce.Offset, ce.Segment, last.Start+uint64(i), off, last.Name(), err)
			}
		}
	}
}

// TestRecoverDropsFailedBatch simulates a batch whose write reached the file
// but whose fsync failed: the records must not survive recovery or reopen.
func TestRecoverDropsFailedBatch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1<<20)
	for i := 1; i <= 5; i++ {
		if _, err := j.Append([]*Record{testRecord(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// What a failed batch may leave: whole records and a torn one, where
	// tidwall/wal writes (at its offset, over pre-written zeros if any).
	tail := lastSegment(t, dir)
	f, _ := os.OpenFile(tail.Path, os.O_WRONLY, 0)
	var batch []byte
	for i := 6; i <= 8; i++ {
		frame, _ := testRecord(i).Encode()
		batch = binary.AppendUvarint(batch, uint64(len(frame)))
		batch = append(batch, frame...)
	}
	batch = append(batch, 0x80, 0x01, 1, 2, 3)
	j.mu.Lock()
	f.WriteAt(batch, j.tailBytes)
	f.Close()
	j.broken = errors.New("injected fsync failure")
	j.mu.Unlock()
	first, err := j.Append([]*Record{testRecord(106)})
	if err != nil || first != 6 {
		t.Fatalf("append after recovery: index %d, %v", first, err)
	}
	j.Close()
	j2, cut := openJournal(t, dir, 1<<20)
	defer j2.Close()
	if cut != nil {
		t.Fatalf("recovery left a torn tail: %v", cut)
	}
	got := replayAll(t, j2)
	if len(got) != 6 || got[5].Revision != 106 {
		t.Fatalf("after recovery: %d records, last revision %d; want 6 ending in 106", len(got), got[len(got)-1].Revision)
	}
}
