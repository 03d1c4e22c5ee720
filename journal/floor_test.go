package journal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// TestOpenRefusesDamageAtTheFloor: once a journal was served, MarkServed
// and Close raise the ACKNOWLEDGED marker to its last record, and from then
// on Open refuses, naming the first missing or damaged index and changing
// no file, whatever took acknowledged records away: a torn final record
// (never cut at or below the floor), the final record gone whole, the tail
// segment emptied, or deleted.
func TestOpenRefusesDamageAtTheFloor(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 900)
	if _, err := j.Append(records(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := j.MarkServed(); err != nil {
		t.Fatal(err)
	}
	if fl, err := ReadFloor(dir); err != nil || fl.Index != 3 {
		t.Fatalf("marker after MarkServed: %+v %v, want index 3", fl, err)
	}
	n := 3
	for len(entryOffsets(t, lastSegment(t, dir).Path)) < 2 || n < 23 {
		n++
		if _, err := j.Append(records(n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if fl, err := ReadFloor(dir); err != nil || fl.Index != uint64(n) {
		t.Fatalf("marker after Close: %+v %v, want index %d", fl, err, n)
	}
	tail := lastSegment(t, dir)
	offs := entryOffsets(t, tail.Path)
	final := offs[len(offs)-1]

	tests := []struct {
		name   string
		damage func(path string) error
		index  uint64 // the first index the refusal names
		reason string
	}{
		{"torn final record", func(p string) error { return os.Truncate(p, final+3) }, uint64(n), "were acknowledged"},
		{"final record gone whole", func(p string) error { return os.Truncate(p, final) }, uint64(n), "are missing"},
		{"tail segment emptied", func(p string) error { return os.Truncate(p, 0) }, tail.Start, "are missing"},
		{"tail segment deleted", os.Remove, tail.Start, "are missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			if err := tc.damage(filepath.Join(d, tail.Name())); err != nil {
				t.Fatal(err)
			}
			before := fileBytes(t, d)
			j, _, err := Open(d, Options{SegmentSize: 900})
			if err == nil {
				j.Close()
				t.Fatal("Open accepted a journal missing acknowledged records")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Index != tc.index || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("refusal %v: want a *CorruptError at index %d saying %q", err, tc.index, tc.reason)
			}
			if after := fileBytes(t, d); !reflect.DeepEqual(after, before) {
				t.Fatal("a refused Open changed the journal's files")
			}
		})
	}
}

// A journal whose every segment is gone while records were acknowledged
// (by the marker, or by a checkpoint's Options.Floor) refuses to open, names
// the missing records, and creates nothing: not the directory, not the
// empty first segment tidwall/wal would start.
func TestOpenRefusesMissingSegmentsWithoutCreatingAny(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) Options
	}{
		{"marker, no segment", func(t *testing.T, dir string) Options {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := SetFloor(dir, 12); err != nil {
				t.Fatal(err)
			}
			return Options{NoSync: true}
		}},
		{"checkpoint floor, empty directory", func(t *testing.T, dir string) Options {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return Options{NoSync: true, Floor: Floor{Index: 12, Source: "checkpoint image"}}
		}},
		{"checkpoint floor, no directory", func(t *testing.T, dir string) Options {
			return Options{NoSync: true, Floor: Floor{Index: 12, Source: "checkpoint image"}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			opts := tc.setup(t, dir)
			before, _ := os.ReadDir(dir)
			j, _, err := Open(dir, opts)
			if err == nil {
				j.Close()
				t.Fatal("Open accepted a journal with no segment below an acknowledged floor")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Index != 1 || !strings.Contains(err.Error(), "records 1..12 are missing") {
				t.Fatalf("refusal %v: want a *CorruptError at index 1 naming records 1..12", err)
			}
			after, statErr := os.ReadDir(dir)
			if len(after) != len(before) || (before == nil) != errors.Is(statErr, os.ErrNotExist) {
				t.Fatalf("a refused Open changed %s: %d entries before, %d after (%v)", dir, len(before), len(after), statErr)
			}
		})
	}
}

// TestNewSegmentMarkerOffCommitPath: the acknowledged-floor marker that a
// new segment's first sync raises is written in the background: that Sync
// returns while the marker's fdatasync is held, and the marker then holds
// the index the sync acknowledged (only ever an acknowledged one).
func TestNewSegmentMarkerOffCommitPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _, err := Open(dir, Options{SegmentSize: 4096, NoPrewrite: true, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// Removed before Close, whose marker sync would otherwise wait here.
	defer faults.SetSync(func(path string) error {
		if filepath.Base(path) == FloorFile {
			entered <- struct{}{}
			<-release
		}
		return nil
	})()
	next := uint64(1)
	for {
		segs, _ := ListSegments(dir)
		mustWrite(t, j, []*Record{testRecord(int(next))}, next)
		after, _ := ListSegments(dir)
		if len(after) > len(segs) {
			break
		}
		if err := j.Sync(next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	// The batch that sealed the old segment is durable already (tidwall/wal
	// fsynced it); the sync covering the new segment's first record raises
	// the marker.
	next++
	mustWrite(t, j, []*Record{testRecord(int(next))}, next)
	synced := make(chan error, 1)
	go func() { synced <- j.Sync(next) }()
	<-entered                        // the marker's fdatasync is held...
	if err := <-synced; err != nil { // ...and the commit's Sync returns regardless
		t.Fatal(err)
	}
	if j.LastIndex() != next {
		t.Fatalf("last index %d, want %d", j.LastIndex(), next)
	}
	close(release)
	j.floorWG.Wait()
	fl, err := ReadFloor(dir)
	if err != nil || fl.Index != next {
		t.Fatalf("marker %+v (%v) after the background raise, want index %d", fl, err, next)
	}
}
