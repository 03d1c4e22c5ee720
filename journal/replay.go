package journal

import (
	"fmt"
	"os"
)

// Replay reads every record with index >= from, in order, validating the
// framing of each and the index continuity across segment files, and calls
// fn. An error from fn, or any damage, stops the replay and comes back as a
// *CorruptError naming the journal index, segment and offset.
func (j *Journal) Replay(from uint64, fn func(index uint64, rec *Record) error) error {
	j.mu.Lock()
	last := j.last
	j.mu.Unlock()
	return ReplayDir(j.dir, from, last, j.opts.Limits, fn)
}

// ReplayDir is Replay on a journal directory that is not open, for tools.
// last is the index the replay must reach; pass 0 to accept whatever the
// files hold (a torn tail is then reported as corruption, since nothing here
// may cut it).
func ReplayDir(dir string, from, last uint64, lim Limits, fn func(index uint64, rec *Record) error) error {
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	segs, err := ListSegments(dir)
	if err != nil {
		return &StorageError{Op: "replay", Err: err}
	}
	for i, s := range segs {
		next := uint64(0)
		if i+1 < len(segs) {
			next = segs[i+1].Start
			if next <= s.Start {
				return &CorruptError{Segment: s.Name(), Index: s.Start, Reason: "segment start indexes are not increasing"}
			}
			if next <= from {
				continue
			}
		}
		data, err := os.ReadFile(s.Path)
		if err != nil {
			return &StorageError{Op: "replay", Err: fmt.Errorf("read segment %s: %w", s.Name(), err)}
		}
		res, err := scan(data, lim, func(k int, off int64, rec *Record) error {
			idx := s.Start + uint64(k)
			if idx < from {
				return nil
			}
			if err := fn(idx, rec); err != nil {
				return &CorruptError{Segment: s.Name(), Offset: off, Index: idx, Reason: err.Error(), Err: err}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if res.bad != nil {
			return &CorruptError{Segment: s.Name(), Offset: res.bad.offset, Index: s.Start + uint64(res.count), Reason: res.bad.reason}
		}
		if res.zeros > 0 && next != 0 {
			// Pre-writing never passes the entry that seals a segment.
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: s.Start + uint64(res.count),
				Reason: fmt.Sprintf("sealed segment ends in %d zero bytes (empty entries)", res.zeros)}
		}
		end := s.Start + uint64(res.count)
		if next != 0 && end != next {
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: end,
				Reason: fmt.Sprintf("segment holds records up to index %d but the next segment starts at %d (missing or duplicated segment)", end-1, next)}
		}
		if next == 0 && last != 0 && end-1 != last {
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: end,
				Reason: fmt.Sprintf("journal ends at index %d, expected %d", end-1, last)}
		}
	}
	return nil
}
