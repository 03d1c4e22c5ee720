package main

import (
	"fmt"
	"io"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// exitError carries the exit code a failure maps to.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitErr(code int, format string, args ...any) *exitError {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// state is the store's state at one journal index, rebuilt from the files.
type state struct {
	view     *materialize.View
	index    uint64 // every record <= index applied, none after
	base     *ckpt  // checkpoint the replay started from; nil: the journal's start
	replayed int
	skipped  []*ckpt  // newer checkpoints that did not load
	torn     *problem // a torn final record left out (it was never acknowledged)
}

// materializeAt rebuilds the state as of index at (0: the end of the
// journal): from the newest checkpoint at or below at that loads, else from
// the journal's start, replaying with the checks the store applies at
// open. Any record that fails them, or damage before at, is an error
// (exit 1); an index outside what the files hold is a usage error (exit 2).
func materializeAt(root, journalDir string, chk *statestore.ReplayChecker, at uint64, progressTo io.Writer) (*state, error) {
	ckpts, err := listCheckpoints(root)
	if err != nil {
		return nil, exitErr(exitUsage, "%v", err)
	}
	segs, err := listSegments(journalDir)
	if err != nil {
		return nil, exitErr(exitUsage, "%v", err)
	}
	floor, _, err := ackFloor(root, journalDir)
	if err != nil {
		return nil, exitErr(exitUsage, "%v", err)
	}
	st := &state{}
	for i := len(ckpts) - 1; i >= 0; i-- {
		ck := ckpts[i]
		if at != 0 && ck.Index > at {
			continue
		}
		if ck.load(chk) != nil {
			st.skipped = append(st.skipped, ck)
			continue
		}
		st.base = ck
		break
	}
	from := uint64(1)
	var view *materialize.View
	if st.base != nil {
		from = st.base.Index + 1
		view = st.base.View
	}
	rp := newViewReplayer(chk, view)
	st.view, st.index = rp.view, from-1
	if len(segs) > 0 && segs[0].Start > from {
		what := "the journal's end"
		if at != 0 {
			what = fmt.Sprintf("index %d", at)
		}
		if st.base == nil {
			return nil, exitErr(exitUsage, "cannot rebuild the state as of %s: the journal starts at index %d and no checkpoint at or below it loads (the oldest record available is %d)",
				what, segs[0].Start, segs[0].Start)
		}
		return nil, exitErr(exitProblems, "journal starts at index %d, after checkpoint %s (index %d): records %d..%d are missing",
			segs[0].Start, st.base.Name(), st.base.Index, from, segs[0].Start-1)
	}
	lim := chk.JournalLimits()
	prog := startProgress(progressTo, "replay", journalSize(segs))
	defer prog.finish()
	err = walkJournal(segs, lim, floor, from, at, prog, func(seg journal.Segment, it *item, f *frame) error {
		if it.index != st.index+1 {
			return exitErr(exitProblems, "record %d (segment %s, offset %d) follows index %d: records are missing", it.index, seg.Name(), it.offset, st.index)
		}
		_, prob := rp.apply(f)
		if prob != nil {
			return exitErr(exitProblems, "index %d (segment %s, offset %d): %v", it.index, seg.Name(), it.offset, prob)
		}
		st.index = it.index
		st.replayed++
		return nil
	}, func(p problem, torn bool) error {
		if torn && at == 0 {
			st.torn = &p
			return nil
		}
		return exitErr(exitProblems, "damaged record at index %s (%s, offset %s): %s; kpjournal verify lists every problem",
			indexText(p.Index), p.File, offsetText(p.Offset), p.Reason)
	})
	if err != nil {
		if ee, ok := err.(*exitError); ok {
			return nil, ee
		}
		return nil, exitErr(exitUsage, "%v", err)
	}
	if at != 0 && st.index < at {
		return nil, exitErr(exitUsage, "index %d is beyond the end of the journal (its last record is %d)", at, st.index)
	}
	return st, nil
}
