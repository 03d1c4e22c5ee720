package journal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
