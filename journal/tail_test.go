package journal

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// TestJudgeTailShapes pins the torn-tail rule on the bytes themselves:
// from the damaged entry to the end of the file, only what an interrupted
// append leaves (a cut, zeros, a frame whose written part is a consistent
// header and whose end is missing or zero) may be cut, above the floor;
// every other shape is a *CorruptError naming the index and offset.
func TestJudgeTailShapes(t *testing.T) {
	t.Parallel()
	clean, offs := segmentBytes(t, sixPuts())
	final := int64(offs[5]) // the sixth record's entry: index 6
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), clean...)) }
	tests := []struct {
		name   string
		data   []byte
		off    int64 // where the damage starts
		floor  uint64
		reason string // "" for a torn tail, else what the refusal says
	}{
		{"final record cut short", clean[:len(clean)-5], final, 0, ""},
		{"final record's end zero-filled", edit(func(b []byte) []byte { clear(b[final+20:]); return b }), final, 0, ""},
		{"final record cut, zeros after", append(append([]byte(nil), clean[:len(clean)-5]...), make([]byte, 100)...), final, 0, ""},
		{"nothing but zeros", append(append([]byte(nil), clean[:final]...), make([]byte, 64)...), final, 0, ""},
		{"torn at the floor", clean[:len(clean)-5], final, 6, "were acknowledged"},
		{"whole final record fails its checksum", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), final, 0, "whole final record"},
		{"non-zero bytes after a damaged record", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return append(b, 7, 7, 7) }), final, 0, "non-zero bytes follow"},
		{"a valid record after the damage", edit(func(b []byte) []byte { b[offs[4]+30] ^= 1; return b }), int64(offs[4]), 0, "a valid record follows"},
		{"length beyond the largest frame", binary.AppendUvarint(append([]byte(nil), clean[:final]...), 1<<40), final, 0, "exceeds the largest frame"},
		{"length below the smallest frame", append(append([]byte(nil), clean[:final]...), 3, 1, 1, 1), final, 0, "below the"},
		{"empty entry then data", append(append([]byte(nil), clean[:final]...), 0, 9, 9), final, 0, "empty entry followed by"},
		{"torn frame with a version no encoder wrote", edit(func(b []byte) []byte { b[final+1] = FormatVersion + 1; return b[:len(b)-5] }), final, 0, "header is not one the journal writes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := JudgeTail("seg", tc.data, tc.off, 6, Floor{Index: tc.floor, Source: "test"}, DefaultLimits)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("a torn tail refused: %v", err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Index != 6 || ce.Offset != tc.off || ce.Segment != "seg" {
				t.Fatalf("got %v, want a *CorruptError at index 6, offset %d of seg", err, tc.off)
			}
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("reason %q, want it to say %q", ce.Reason, tc.reason)
			}
		})
	}
}
