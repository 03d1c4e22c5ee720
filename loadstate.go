package statestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// State is a store's state at one journal index, rebuilt from its files
// the way Open rebuilds it: the newest checkpoint image that loads, then
// every journal record after it, each checked as at admission.
type State struct {
	View  *materialize.View
	Index uint64 // every record up to Index is applied, none after it
	// Checkpoint says which image the replay started from and which newer
	// ones did not load.
	Checkpoint CheckpointReport
	Replayed   int   // journal records applied after the image
	FrameBytes int64 // their frame bytes: journal the next checkpoint retires
	// TornTail is a torn final record left out, as Open would cut it
	// (never set by Open, which has cut it before it loads the state).
	TornTail *journal.TailCut

	unloadable []string // paths of the images that did not load
}

// LoadOptions are the bounds and schemas a store runs with; zero fields
// take the defaults, as in [Options].
type LoadOptions struct {
	Limits  quota.Limits
	Schemas *schema.Registry
}

// IndexRangeError says that the files cannot give the state at the index
// asked for: it is before the oldest record a checkpoint can be continued
// from, or after the journal's end.
type IndexRangeError struct {
	At     uint64
	Reason string
}

func (e *IndexRangeError) Error() string {
	return fmt.Sprintf("cannot rebuild the state as of index %d: %s", e.At, e.Reason)
}

// errPastAt ends a replay at the index asked for.
var errPastAt = errors.New("past the index asked for")

// LoadState rebuilds the state of the store in dir (the directory given as
// Options.Dir) as of journal index at, or as of the journal's end when at
// is 0, without changing any file or taking the store's lock: tools read a
// stopped store's files with it. It starts from the newest checkpoint
// image at or below at that loads, falls back as Open does when none
// loads, and replays the journal from there with every check Open applies.
// A torn final record, which Open would cut, is left out and reported in
// State.TornTail; any other damage, or a record that fails a check, is a
// *journal.CorruptError naming its index, segment and offset. An index
// the files cannot reach is an *IndexRangeError.
func LoadState(dir string, at uint64, opts LoadOptions) (*State, error) {
	chk, err := NewReplayChecker(opts.Limits, opts.Schemas)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, StoreDirName)
	jdir := filepath.Join(root, "journal")
	src := stateSource{root: root, journalDir: jdir, at: at, chk: chk, log: slog.New(slog.DiscardHandler)}
	segs, err := journal.ListSegments(jdir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	src.first = 1
	if len(segs) > 0 {
		src.first = segs[0].Start
		if src.last, err = lastIndex(segs[len(segs)-1], chk.JournalLimits()); err != nil {
			return nil, err
		}
	}
	if at != 0 && at+1 < src.first {
		return nil, &IndexRangeError{At: at, Reason: fmt.Sprintf("the journal starts at index %d and no checkpoint can be continued to an earlier index (the oldest record available is %d)", src.first, src.first)}
	}
	if src.floor, err = CheckpointFloor(root); err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		src.journalDir = "" // nothing to replay
	} else {
		if src.floor, err = journal.LoadFloor(jdir, src.floor); err != nil {
			return nil, err
		}
		// Open's own check: records up to the floor were acknowledged.
		if err := journal.CheckFloor(src.last, segs[len(segs)-1].Name(), src.floor); err != nil && at == 0 {
			return nil, err
		}
		src.judgeTail = true
	}
	st, err := loadState(src)
	if err != nil {
		return nil, err
	}
	if at != 0 && st.Index < at {
		return nil, &IndexRangeError{At: at, Reason: fmt.Sprintf("index %d is beyond the end of the journal (its last record is %d)", at, st.Index)}
	}
	return st, nil
}

// lastIndex is the index of the last whole record of the journal whose
// last segment is seg: damage ends it, as a torn tail would be cut.
func lastIndex(seg journal.Segment, lim journal.Limits) (uint64, error) {
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		return 0, err
	}
	sc := journal.NewScanner(data, seg.Start, lim, journal.StopAtDamage)
	for sc.Next() {
	}
	next, _ := sc.NextIndex()
	return next - 1, nil
}

// stateSource is what loadState reads: the files of one store, and what is
// known of its journal.
type stateSource struct {
	root        string
	journalDir  string // "": the journal holds no segment
	first, last uint64 // the journal's first index and its last record
	at          uint64 // 0: the end
	chk         *ReplayChecker
	log         *slog.Logger
	// judgeTail: damage that ends the journal may be a torn tail, judged
	// against floor (LoadState; Open has cut one already, so to it any
	// damage is corruption).
	judgeTail bool
	floor     journal.Floor
}

// loadState is the one way the state is rebuilt from files, for Open and
// for LoadState.
func loadState(src stateSource) (*State, error) {
	st := &State{}
	view, ckptIndex, err := src.loadCheckpoint(st)
	if err != nil {
		return nil, err
	}
	if st.Checkpoint.Path != "" {
		err = checkJournalCovers(src.first, src.last, ckptIndex, st.Checkpoint.Path)
	} else if src.first > 1 {
		err = &journal.CorruptError{Index: src.first, Reason: fmt.Sprintf("journal starts at index %d but no checkpoint covers indexes before it", src.first)}
	}
	if err != nil {
		return nil, err
	}
	st.View, st.Index = view, ckptIndex
	lim := src.chk.JournalLimits()
	if src.journalDir == "" || src.at != 0 && ckptIndex >= src.at {
		return st, nil
	}
	last := src.last
	if src.judgeTail {
		last = 0 // whatever the files hold; the tail is judged below
	}
	err = journal.ReplayDir(src.journalDir, ckptIndex+1, last, lim, func(idx uint64, rec *journal.Record) error {
		if err := src.chk.Check(view, rec); err != nil {
			return err
		}
		_, err := view.Apply(rec)
		st.Index = idx
		st.Replayed++
		st.FrameBytes += int64(rec.EncodedSize())
		if err == nil && idx == src.at {
			err = errPastAt // done: what follows, damage included, is not asked for
		}
		return err
	})
	if errors.Is(err, errPastAt) {
		err = nil
	}
	var ce *journal.CorruptError
	if src.judgeTail && errors.As(err, &ce) && ce.Err == nil {
		if cut, terr := src.tornTail(ce); terr == nil {
			st.TornTail, err = cut, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// tornTail reports whether the damage ce that ended a replay is a torn
// final record, by the rule Open cuts one by (journal.JudgeTail).
func (src stateSource) tornTail(ce *journal.CorruptError) (*journal.TailCut, error) {
	segs, err := journal.ListSegments(src.journalDir)
	if err != nil || len(segs) == 0 || segs[len(segs)-1].Name() != ce.Segment {
		return nil, errors.New("not in the last segment")
	}
	data, err := os.ReadFile(segs[len(segs)-1].Path)
	if err != nil {
		return nil, err
	}
	if err := journal.JudgeTail(ce.Segment, data, ce.Offset, ce.Index, src.floor, src.chk.JournalLimits()); err != nil {
		return nil, err
	}
	return &journal.TailCut{Segment: ce.Segment, Offset: ce.Offset, Index: ce.Index, Bytes: int64(len(data)) - ce.Offset, Reason: ce.Reason}, nil
}

// loadCheckpoint loads the newest image at or below src.at that loads,
// falling back to older ones. When none loads, the journal decides: if it
// still holds every record from index 1 (src.first is 1), replay starts
// from the empty state and the skipped images are reported; otherwise the
// records before src.first live only in the damaged images, and the load
// is refused, saying so and how to get out.
func (src stateSource) loadCheckpoint(st *State) (*materialize.View, uint64, error) {
	files, err := checkpoint.List(src.root)
	if err != nil {
		return nil, 0, err
	}
	rep := &st.Checkpoint
	considered := 0
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if src.at != 0 && f.Index > src.at {
			continue
		}
		considered++
		_, v, err := src.chk.LoadImage(f)
		if err != nil {
			rep.Skipped = append(rep.Skipped, err)
			st.unloadable = append(st.unloadable, f.Path)
			src.log.Warn("state store: skipping checkpoint", "path", f.Path, "err", err)
			continue
		}
		rep.Path, rep.Index = f.Path, f.Index
		return v, f.Index, nil
	}
	if considered > 0 && src.first > 1 {
		return nil, 0, &NoCheckpointError{JournalFirst: src.first, Skipped: rep.Skipped}
	}
	if considered > 0 {
		src.log.Warn("state store: no checkpoint loads; the journal holds every record from index 1, replaying it from the empty state",
			"skipped", considered)
	}
	return materialize.New(), 0, nil
}

// LoadImage decodes the checkpoint image f with the checks Open applies
// to one: the decoder's bounds, the header's index against the file's
// name, and every bound and identifier rule on the whole image.
func (c *ReplayChecker) LoadImage(f checkpoint.File) (checkpoint.Header, *materialize.View, error) {
	hdr, v, err := checkpoint.ReadFile(f.Path, c.CheckpointLimits())
	if err == nil && hdr.Index != f.Index {
		err = fmt.Errorf("checkpoint %s: header index %d disagrees with its name", f.Path, hdr.Index)
	}
	if err == nil {
		err = c.CheckView(v)
	}
	if err != nil {
		return checkpoint.Header{}, nil, err
	}
	return hdr, v, nil
}
