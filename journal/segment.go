package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Segment describes one segment file of the journal.
type Segment struct {
	Start uint64 // journal index of the segment's first entry
	Path  string
	Size  int64
}

// Name is the segment's file name.
func (s Segment) Name() string { return filepath.Base(s.Path) }

// ListSegments returns the journal's segment files in index order. Files
// that are not segments (temporaries, truncation markers) are ignored.
func ListSegments(dir string) ([]Segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list journal directory %s: %w", dir, err)
	}
	var segs []Segment
	for _, e := range ents {
		name := e.Name()
		start, ok := parseSegmentName(name)
		if e.IsDir() || !ok {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			// Removed since the directory was read, by a Reclaim
			// (readers such as Size, the store's metrics and tools take
			// no lock of the journal): a segment that is gone is not
			// listed.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat segment %s: %w", name, err)
		}
		segs = append(segs, Segment{Start: start, Path: filepath.Join(dir, name), Size: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Start < segs[j].Start })
	return segs, nil
}

// badSpot is the first entry of a segment that does not parse.
type badSpot struct {
	offset int64
	reason string
}

// scanResult summarizes a sequential parse of one segment's bytes.
type scanResult struct {
	count int      // valid entries before the bad spot (or all of them)
	end   int64    // offset just past the last valid entry
	bad   *badSpot // nil when every byte parsed
	// zeros is the length of a run of zero bytes from end, an entry
	// boundary, to the end of the data: pre-written space, not a bad spot
	// (only the last segment may hold one; see prewrite.go).
	zeros int64
}

// scan reads data entry by entry with a Scanner that stops at damage, as
// Open and Replay read a segment, and calls fn with each valid record. It
// stops at the first entry that fails to parse or decode; zeros from an
// entry boundary to the end are pre-written space, not a bad spot. An
// error from fn stops the scan and is returned as is.
func scan(data []byte, lim Limits, fn func(i int, off int64, rec *Record) error) (scanResult, error) {
	var res scanResult
	sc := NewScanner(data, 1, lim, StopAtDamage)
	for sc.Next() {
		if d := sc.Damage(); d != nil {
			if d.Prewritten {
				res.zeros = int64(len(data)) - d.Offset
			} else {
				res.bad = &badSpot{offset: d.Offset, reason: d.Reason}
			}
			return res, nil
		}
		if fn != nil {
			if err := fn(res.count, sc.Offset(), sc.Frame().Record()); err != nil {
				return res, err
			}
		}
		res.count++
		res.end = sc.End()
	}
	return res, nil
}

// NextFrame reports the offset of the first position at or after from in a
// segment's bytes where a whole entry holding a valid frame starts, or -1.
// Tools that resynchronize after damage use it, so they judge "a valid
// record follows" exactly as Open does.
func NextFrame(data []byte, from int64, lim Limits) int64 { return validFrameAfter(data, from, lim) }

// validFrameAfter reports the offset of the first position after from where
// a whole, checksummed frame starts, or -1. It tries every byte offset, not
// just the next entry boundary, because a damaged length prefix misaligns the
// sequential parse: following it blindly would mistake good records behind
// the damage for a torn tail and cut acknowledged data. Each offset costs
// O(1) unless its bytes form a structurally consistent frame, so the scan
// stays linear in the tail's size for any damage a crash or a fuzzer makes.
func validFrameAfter(data []byte, from int64, lim Limits) int64 {
	for off := int(from); off < len(data); off++ {
		n, w := entryLen(data[off:])
		if w <= 0 || n < MinFrameSize || n > uint64(len(data)-off-w) {
			continue
		}
		frame := data[off+w : off+w+int(n)]
		if !PlausibleFrame(frame, lim) {
			continue
		}
		if _, err := Decode(frame, lim); err == nil {
			return int64(off)
		}
	}
	return -1
}
