package recovery

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

	// Unloadable lists the paths of the images that did not load: no
	// fallback, so the store's pruning must not count them.
	Unloadable []string
}

// StoreDirName is the directory, inside a store's Dir, that holds its
// files: the journal, checkpoints, the quarantine and the LOCK file. It is
// statestore.StoreDirName (a test holds the two equal).
const StoreDirName = "state-store"

// LoadOptions are the bounds and schemas a store runs with; zero fields
// take the defaults, as in statestore.Options.
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
	chk, err := NewChecker(opts.Limits, opts.Schemas)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, StoreDirName)
	jdir := filepath.Join(root, "journal")
	src := Source{Root: root, JournalDir: jdir, At: at, Checker: chk, Log: slog.New(slog.DiscardHandler)}
	segs, err := journal.ListSegments(jdir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	src.First = 1
	if len(segs) > 0 {
		src.First = segs[0].Start
		if src.Last, err = lastIndex(segs[len(segs)-1], chk.JournalLimits()); err != nil {
			return nil, err
		}
	}
	if at != 0 && at+1 < src.First {
		return nil, &IndexRangeError{At: at, Reason: fmt.Sprintf("the journal starts at index %d and no checkpoint can be continued to an earlier index (the oldest record available is %d)", src.First, src.First)}
	}
	if src.Floor, err = CheckpointFloor(root); err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		src.JournalDir = "" // nothing to replay
	} else {
		if src.Floor, err = journal.LoadFloor(jdir, src.Floor); err != nil {
			return nil, err
		}
		// Open's own check: records up to the floor were acknowledged.
		if err := journal.CheckFloor(src.Last, segs[len(segs)-1].Name(), src.Floor); err != nil && at == 0 {
			return nil, err
		}
		src.JudgeTail = true
	}
	st, err := Load(src)
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

// Source is what Load reads: the files of one store, and what is known of
// its journal.
type Source struct {
	Root        string // the store's files: Dir/state-store
	JournalDir  string // "": the journal holds no segment
	First, Last uint64 // the journal's first index and its last record
	At          uint64 // 0: the end
	Checker     *Checker
	Log         *slog.Logger
	// JudgeTail: damage that ends the journal may be a torn tail, judged
	// against Floor (LoadState; Open has cut one already, so to it any
	// damage is corruption).
	JudgeTail bool
	Floor     journal.Floor
}

// Load is the one way the state is rebuilt from files, for Open and for
// LoadState.
func Load(src Source) (*State, error) {
	st := &State{}
	view, ckptIndex, err := src.loadCheckpoint(st)
	if err != nil {
		return nil, err
	}
	if st.Checkpoint.Path != "" {
		err = checkJournalCovers(src.First, src.Last, ckptIndex, st.Checkpoint.Path)
	} else if src.First > 1 {
		err = &journal.CorruptError{Index: src.First, Reason: fmt.Sprintf("journal starts at index %d but no checkpoint covers indexes before it", src.First)}
	}
	if err != nil {
		return nil, err
	}
	st.View, st.Index = view, ckptIndex
	lim := src.Checker.JournalLimits()
	if src.JournalDir == "" || src.At != 0 && ckptIndex >= src.At {
		return st, nil
	}
	last := src.Last
	if src.JudgeTail {
		last = 0 // whatever the files hold; the tail is judged below
	}
	// Each record's metadata and bounds are checked here, in order, before
	// its document goes to the pool: metadata before documents, as at
	// admission.
	docs := src.Checker.newDocPool("")
	err = journal.ReplayDir(src.JournalDir, ckptIndex+1, last, lim, func(idx uint64, rec *journal.Record) error {
		if docs.hasFailed() {
			return errDocumentFailed
		}
		if err := src.Checker.checkState(view, idx, rec); err != nil {
			return err
		}
		if rec.Kind == journal.KindPut {
			docs.add(docJob{seq: idx, index: idx, namespace: rec.Namespace, key: rec.Key, schema: rec.Schema, doc: rec.Document})
		}
		_, err := view.Apply(rec)
		st.Index = idx
		st.Replayed++
		st.FrameBytes += int64(rec.EncodedSize())
		if err == nil && idx == src.At {
			err = errPastAt // done: what follows, damage included, is not asked for
		}
		return err
	})
	if errors.Is(err, errPastAt) {
		err = nil
	}
	// A document that fails comes before whatever ended the replay (only
	// records before that were handed out), so it is the refusal.
	if de := docs.wait(); de != nil && (err == nil || errors.Is(err, errDocumentFailed) || isCorrupt(err)) {
		err = locate(src.JournalDir, lim, de)
	}
	var ce *journal.CorruptError
	if src.JudgeTail && errors.As(err, &ce) && ce.Err == nil {
		if cut, terr := src.tornTail(ce); terr == nil {
			st.TornTail, err = cut, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// isCorrupt reports whether err is a refusal of the journal's contents
// (rather than a failure to read them).
func isCorrupt(err error) bool {
	var ce *journal.CorruptError
	return errors.As(err, &ce)
}

// tornTail reports whether the damage ce that ended a replay is a torn
// final record, by the rule Open cuts one by (journal.JudgeTail).
func (src Source) tornTail(ce *journal.CorruptError) (*journal.TailCut, error) {
	segs, err := journal.ListSegments(src.JournalDir)
	if err != nil || len(segs) == 0 || segs[len(segs)-1].Name() != ce.Segment {
		return nil, errors.New("not in the last segment")
	}
	data, err := os.ReadFile(segs[len(segs)-1].Path)
	if err != nil {
		return nil, err
	}
	if err := journal.JudgeTail(ce.Segment, data, ce.Offset, ce.Index, src.Floor, src.Checker.JournalLimits()); err != nil {
		return nil, err
	}
	return &journal.TailCut{Segment: ce.Segment, Offset: ce.Offset, Index: ce.Index, Bytes: int64(len(data)) - ce.Offset, Reason: ce.Reason}, nil
}

// loadCheckpoint loads the newest image at or below src.At that loads,
// falling back to older ones past damage, but not past an intact image
// holding a document this build's rules refuse: that refuses the load. When none loads, the journal decides: if it
// still holds every record from index 1 (src.First is 1), replay starts
// from the empty state and the skipped images are reported; otherwise the
// records before src.First live only in the damaged images, and the load
// is refused, saying so and how to get out.
func (src Source) loadCheckpoint(st *State) (*materialize.View, uint64, error) {
	files, err := checkpoint.List(src.Root)
	if err != nil {
		return nil, 0, err
	}
	rep := &st.Checkpoint
	considered := 0
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if src.At != 0 && f.Index > src.At {
			continue
		}
		considered++
		_, v, err := src.Checker.LoadImage(f)
		var de *DocumentError
		if errors.As(err, &de) {
			// The image is intact and says what was stored; this build's
			// rules refuse it. Falling back cannot help: the write that
			// stored the document is in the journal after any older image
			// (and fails there too), or exists only in this image.
			return nil, 0, err
		}
		if err != nil {
			rep.Skipped = append(rep.Skipped, err)
			st.Unloadable = append(st.Unloadable, f.Path)
			src.Log.Warn("state store: skipping checkpoint", "path", f.Path, "err", err)
			continue
		}
		rep.Path, rep.Index = f.Path, f.Index
		return v, f.Index, nil
	}
	if considered > 0 && src.First > 1 {
		return nil, 0, &NoCheckpointError{JournalFirst: src.First, Skipped: rep.Skipped}
	}
	if considered > 0 {
		src.Log.Warn("state store: no checkpoint loads; the journal holds every record from index 1, replaying it from the empty state",
			"skipped", considered)
	}
	return materialize.New(), 0, nil
}
