package main

import (
	"errors"
	"runtime"

	"github.com/keeppeek/statestore/journal"
)

// errStop ends a walk early without an error.
var errStop = errors.New("stop")

// walkJournal calls fn, in index order, for every valid record with an
// index in from..to (to 0: to the end), skipping segments that end before
// from. Damage is passed to onDamage as a problem; torn reports whether it
// is a torn final record of the last segment that Open would cut (judged
// against floor, as Open judges it). Records whose index is
// unknown (after damage that misaligned the entries) are not passed to fn.
// fn returning errStop ends the walk with nil; any other error ends it with
// that error, as does onDamage. prog, if not nil, counts the bytes scanned.
func walkJournal(segs []journal.Segment, lim journal.Limits, floor journal.Floor, from, to uint64, prog *progress,
	fn func(seg journal.Segment, it *item, f *journal.Frame) error, onDamage func(p problem, torn bool) error) error {
	if len(segs) == 0 {
		return nil
	}
	lastStart := segs[len(segs)-1].Start
	first := 0
	for first+1 < len(segs) && segs[first+1].Start <= from {
		first++
	}
	if to != 0 {
		for len(segs) > first+1 && segs[len(segs)-1].Start > to {
			segs = segs[:len(segs)-1]
		}
	}
	var f journal.Frame
	var expect uint64 // where the next segment must start; 0 when unknown
	var prev journal.Segment
	err := scanJournal(segs[first:], lim, runtime.GOMAXPROCS(0), nil, func(s *segmentScan) error {
		if prog != nil {
			prog.add(s.seg.Size)
		}
		name := segFile(s.seg.Name())
		isLast := s.seg.Start == lastStart
		if expect != 0 && s.seg.Start != expect {
			p := problem{Severity: corruption, File: segFile(prev.Name()), Offset: prev.Size, Index: expect,
				Reason: "segment ends before index " + indexText(expect) + " but the next segment, " + s.seg.Name() + ", starts at " + indexText(s.seg.Start) + " (missing or duplicated segment)"}
			if err := onDamage(p, false); err != nil {
				return err
			}
		}
		expect, prev = s.next, s.seg
		di := 0
		damage := func(upTo int64) error {
			for ; di < len(s.damage) && s.damage[di].Offset < upTo; di++ {
				d := s.damage[di]
				if (d.Index != 0 && d.Index < from) || s.prewrittenTail(di, isLast, floor) {
					continue
				}
				torn, reason := s.torn(di, isLast, floor, lim)
				sev := corruption
				if torn {
					sev = repairable
				}
				if err := onDamage(problem{Severity: sev, File: name, Offset: d.Offset, Index: d.Index, Reason: reason}, torn); err != nil {
					return err
				}
			}
			return nil
		}
		for i := range s.items {
			it := &s.items[i]
			if err := damage(it.offset); err != nil {
				return err
			}
			if it.index == 0 || it.index < from {
				continue
			}
			if to != 0 && it.index > to {
				return errStop
			}
			s.frame(it, lim, &f)
			if err := fn(s.seg, it, &f); err != nil {
				return err
			}
		}
		return damage(s.seg.Size + 1)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
