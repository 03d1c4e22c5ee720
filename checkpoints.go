package statestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// Checkpoints bound replay and disk use. The store writes one, from a
// published (immutable) view, whenever the journal after the newest image
// holds Options.CheckpointBytes (or half the live value bytes, if larger);
// writers never wait for it. That measure is of the journal on disk, not of
// this process's writes: Open counts the frame bytes it replays after the
// image and checkpoints at once when they are already over, so a process
// that restarts before writing CheckpointBytes cannot grow the journal (or
// the next Open's replay) without bound. It keeps the newest two images
// and truncates the journal only up to the older one, so a damaged newest
// image falls back to the older image plus the journal.
//
// Under a heavy write load the threshold also follows what an image
// costs: it is at least ckptLagFactor times the journal bytes committed
// while the previous background checkpoint ran. An image costs CPU and
// disk in proportion to the live state, commits journal bytes in
// proportion to the write rate, so a fixed byte threshold lets a fast
// writer over a mid-sized state spend a large share of the machine
// re-encoding the same documents (127 writers over 127 documents
// measured 10% of the CPU in back-to-back checkpoints). With the lag
// term, writing images takes at most about 1/(1+ckptLagFactor) of the
// time while writes keep coming, and the journal after the newest image
// stays within ckptLagFactor checkpoint-durations of writes, and within
// ckptLagCap bytes whatever the durations: what
// replaying it costs at the next Open is bounded in time, as a fixed
// byte threshold bounds it for slower writers. (Replay runs about six
// times as fast as the fastest commits, so that journal replays in about
// three checkpoint-durations. At 127 writers on the two-core machine the
// issue measured, a checkpoint of 127 documents ran ~8 ms while ~500 KB
// were committed: the journal after the image then reaches ~8 MB, and
// the journal on disk twice that plus a segment.)

// DefaultCheckpointBytes is the journal growth that triggers a checkpoint.
const DefaultCheckpointBytes = 1 << 20

// ckptLagFactor spaces background checkpoints under load: the next one
// waits for this many times the journal bytes committed while the last
// one ran, so images take at most about a seventeenth of the time.
const ckptLagFactor = 16

// ckptLagCap bounds that spacing, so the journal after the newest image
// (what the next Open replays, and what the disk holds beyond the images)
// keeps a hard bound however slow one image was. A configured threshold,
// or half the live state, larger than it still wins.
const ckptLagCap = 8 << 20

// keepCheckpoints is how many images stay on disk.
const keepCheckpoints = 2

// maxNamespaceRecords bounds the namespace counter records an image may
// hold: emptied namespaces keep their counters, so this is larger than the
// live-namespace quota.
const maxNamespaceRecords = 1 << 20

func (s *Store) checkpointLimits() checkpoint.Limits { return s.checker().CheckpointLimits() }

// CheckpointLimits are the checkpoint decoder bounds matching these limits.
func (c *ReplayChecker) CheckpointLimits() checkpoint.Limits {
	jl := c.JournalLimits()
	return checkpoint.Limits{
		MaxNamespaces: maxNamespaceRecords,
		MaxEntries:    c.limits.MaxNamespaces * c.limits.MaxEntriesPerNamespace,
		MaxTotalBytes: c.limits.MaxTotalBytes,
		MaxNamespace:  jl.MaxNamespace, MaxKey: jl.MaxKey, MaxSchema: jl.MaxSchema,
		MaxOwner: jl.MaxOwner, MaxDocument: jl.MaxDocument,
	}
}

// CheckpointReport says which image Open started from.
type CheckpointReport struct {
	Path  string // "" when no image was used
	Index uint64
	// Skipped lists newer images that failed to load, with why.
	Skipped []error
}

// NoCheckpointError is Open's refusal when every checkpoint image is
// damaged and the journal no longer holds the records before JournalFirst:
// those records exist only in the damaged images.
type NoCheckpointError struct {
	JournalFirst uint64
	Skipped      []error // why each image failed, newest first
}

func (e *NoCheckpointError) Error() string {
	return fmt.Sprintf("no checkpoint loads (%v) and the journal starts at index %d, so records 1..%d exist only in those images: "+
		"restore a backup (kpjournal restore) into an empty directory; kpjournal verify shows each damaged image",
		errors.Join(e.Skipped...), e.JournalFirst, e.JournalFirst-1)
}

// Unwrap returns the failures of the skipped images.
func (e *NoCheckpointError) Unwrap() []error { return e.Skipped }

// CheckpointFloor is the acknowledged floor that the checkpoint images in
// root prove: the newest image's index, read from its name (a damaged
// image still says that its records existed). Open and kpjournal judge a
// damaged journal tail against it.
func CheckpointFloor(root string) (journal.Floor, error) {
	files, err := checkpoint.List(root)
	if err != nil || len(files) == 0 {
		return journal.Floor{}, err
	}
	newest := files[len(files)-1]
	return journal.Floor{Index: newest.Index, Source: "checkpoint " + filepath.Base(newest.Path)}, nil
}

// checkJournalCovers refuses a checkpoint the journal cannot continue: the
// journal (records first..last) must hold every record after the image's
// index and must not end before it.
func checkJournalCovers(first, last, ckptIndex uint64, ckptPath string) error {
	if first > ckptIndex+1 {
		return &journal.CorruptError{Index: ckptIndex + 1, Reason: fmt.Sprintf("checkpoint %s ends at index %d but the journal starts at %d: records %d..%d are missing", filepath.Base(ckptPath), ckptIndex, first, ckptIndex+1, first-1)}
	}
	if last < ckptIndex {
		return &journal.CorruptError{Index: last + 1, Reason: fmt.Sprintf("checkpoint %s is at index %d but the journal ends at %d", filepath.Base(ckptPath), ckptIndex, last)}
	}
	return nil
}

// snapshot returns the published view with the journal index it reflects.
func (s *Store) snapshot() (*materialize.View, uint64) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.view.Load(), s.index
}

// maybeCheckpoint starts a background checkpoint when the journal after the
// newest image has grown enough and none is running. It is called only
// while the store is open (at Open, after a published round, and from a
// finishing background checkpoint), so Close's ckptWG.Wait covers it.
func (s *Store) maybeCheckpoint() {
	if s.opts.CheckpointBytes < 0 {
		return
	}
	threshold := s.opts.CheckpointBytes
	if threshold == 0 {
		threshold = DefaultCheckpointBytes
	}
	_, live, _ := s.view.Load().Totals()
	threshold = max(threshold, live/2, min(ckptLagFactor*s.ckptLag.Load(), ckptLagCap))
	if int64(s.jnl.Stats().Bytes)-s.ckptMark.Load() < threshold {
		return
	}
	if !s.ckptRunning.CompareAndSwap(false, true) {
		return
	}
	s.ckptWG.Add(1)
	go func() {
		defer s.ckptWG.Done()
		before := s.jnl.Stats().Bytes
		err := s.writeCheckpoint()
		s.ckptLag.Store(int64(s.jnl.Stats().Bytes - before))
		s.ckptRunning.Store(false)
		if err != nil {
			s.log.Error("state store: checkpoint failed", "err", err)
			return
		}
		// Commits published while this one ran found it running and
		// started none: look again, or a burst that ends during a
		// checkpoint would leave its growth in the journal until the next
		// write. (This goroutine's Done is still pending, so Close's Wait
		// covers a checkpoint started here.)
		select {
		case <-s.pipe.quit:
		default:
			s.maybeCheckpoint()
		}
	}()
}

// Checkpoint writes a checkpoint of the current state now, removes images
// beyond the newest two and truncates the journal up to the older one. Once
// Close has begun it answers UNAVAILABLE and touches no file: another
// handle may own the directory by then. Close waits for a Checkpoint
// already under way before it releases the LOCK.
func (s *Store) Checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	if err := s.checkOpen(); err != nil {
		return err
	}
	return s.writeCheckpointLocked()
}

func (s *Store) writeCheckpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.writeCheckpointLocked()
}

func (s *Store) writeCheckpointLocked() (err error) {
	start := time.Now()
	mark := int64(s.jnl.Stats().Bytes)
	v, idx := s.snapshot()
	defer func() { s.metrics.checkpointed(idx, start, s.clock.Now(), err) }()
	name := checkpoint.Name(idx)
	if _, err := checkpoint.WriteFileFS(disk.FS{Faults: s.opts.Faults}, filepath.Join(s.root, name), v, idx, s.clock.Now().UnixMilli()); err != nil {
		// The journal keeps every record (nothing is pruned), so the
		// store goes on serving; the next checkpoint tries again.
		return &Error{Code: Storage, Field: "checkpoint",
			Message: fmt.Sprintf("checkpoint %s at journal index %d not written: %v", name, idx, err), Err: err}
	}
	s.ckptMark.Store(mark)
	return s.pruneCheckpoints()
}

// pruneCheckpoints keeps the newest two images and truncates the journal up
// to the older of them: the journal must still be able to carry the older
// image forward if the newer one turns out unreadable.
func (s *Store) pruneCheckpoints() error {
	all, err := checkpoint.List(s.root)
	if err != nil {
		return err
	}
	// An image Open could not load is no fallback: counting it among the
	// two kept would let the journal be reclaimed up to it, so that the
	// records before it lived only in a damaged file. It stays where it
	// is (kpjournal repair moves it aside) and is not counted.
	var files []checkpoint.File
	for _, f := range all {
		if !s.unloadable[f.Path] {
			files = append(files, f)
		}
	}
	if len(files) > keepCheckpoints {
		// No directory fsync for the removals: an image that reappears
		// after a crash is only an older, unused fallback.
		for _, f := range files[:len(files)-keepCheckpoints] {
			if err := os.Remove(f.Path); err != nil {
				return err
			}
		}
		files = files[len(files)-keepCheckpoints:]
	}
	if len(files) < keepCheckpoints {
		return nil
	}
	return s.jnl.Reclaim(files[0].Index + 1)
}

// Backup writes one file to w: a checkpoint image of the store at one
// commit point, taken while the store keeps serving reads, writes and
// watches. Restore or RestoreDir bring it back. A closed store answers
// UNAVAILABLE.
func (s *Store) Backup(w io.Writer) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	v, idx := s.snapshot()
	if _, err := checkpoint.Encode(w, v, idx, s.clock.Now().UnixMilli()); err != nil {
		return wrapErr(Storage, "backup", err)
	}
	return nil
}
