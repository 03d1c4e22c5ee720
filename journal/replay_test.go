package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFlippedByteInSealedSegment(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 40, 700)
	segs, _ := ListSegments(dir)
	sealed := segs[1]
	offs := entryOffsets(t, sealed.Path)
	for i, off := range offs {
		for _, delta := range []int64{0, 3, 12} {
			d := copyDir(t, dir)
			p := filepath.Join(d, sealed.Name())
			data, _ := os.ReadFile(p)
			data[off+delta] ^= 0x01
			os.WriteFile(p, data, 0o644)
			j, _, err := Open(d, Options{SegmentSize: 700})
			if err != nil {
				t.Fatalf("open reads only the tail, but failed: %v", err)
			}
			err = j.Replay(1, func(uint64, *Record) error { return nil })
			j.Close()
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("flip at %d: want *CorruptError, got %v", off+delta, err)
			}
			if ce.Index != sealed.Start+uint64(i) || ce.Offset != off || ce.Segment != sealed.Name() {
				t.Fatalf("flip at %d: names index %d offset %d in %s, want %d %d in %s", off+delta, ce.Index, ce.Offset, ce.Segment, sealed.Start+uint64(i), off, sealed.Name())
			}
		}
	}
	// A sealed segment cut short is corruption too, never a torn tail.
	d := copyDir(t, dir)
	os.Truncate(filepath.Join(d, sealed.Name()), sealed.Size-3)
	j, _ := openJournal(t, d, 700)
	defer j.Close()
	if err := j.Replay(1, func(uint64, *Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated sealed segment: %v", err)
	}
}

func TestMissingAndDuplicatedSegments(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 40, 700)
	segs, _ := ListSegments(dir)
	t.Run("missing middle segment", func(t *testing.T) {
		d := copyDir(t, dir)
		os.Remove(filepath.Join(d, segs[1].Name()))
		j, _ := openJournal(t, d, 700)
		defer j.Close()
		err := j.Replay(1, func(uint64, *Record) error { return nil })
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Segment != segs[0].Name() || ce.Index != segs[1].Start {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("segment duplicated under a later name", func(t *testing.T) {
		d := copyDir(t, dir)
		data, _ := os.ReadFile(segs[1].Path)
		os.WriteFile(filepath.Join(d, segmentName(segs[1].Start+1)), data, 0o644)
		_, _, err := Open(d, Options{SegmentSize: 700})
		if err == nil {
			j, _ := openJournal(t, d, 700)
			err = j.Replay(1, func(uint64, *Record) error { return nil })
			j.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
}
