package journal

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/internal/uring"
)

// Sync makes every record written so far durable with one fdatasync of the
// tail segment, issued without holding the journal's lock so Write can
// proceed meanwhile. It succeeds only if every record up to upTo is then
// acknowledged; if a failure (this sync's or a concurrent write's) cut
// records back, it fails and LastIndex tells which records survived.
//
// The calling goroutine waits in fdatasync(2) itself, holding its
// scheduler processor meanwhile: the fastest for a lone committer (one
// thread wake-up when the disk answers). When other goroutines need the
// CPU, use SyncParked.
func (j *Journal) Sync(upTo uint64) error { return j.sync(upTo, nil) }

// SyncParked is Sync with the fdatasync run through an io_uring (where the
// kernel allows one): the calling goroutine parks while the disk works,
// so its processor runs other goroutines. With GOMAXPROCS=2 and 127
// writers this raised throughput by a sixth; a lone committer pays a
// second thread wake-up (20-40 us here), so Sync suits it better.
func (j *Journal) SyncParked(upTo uint64) error { return j.sync(upTo, j.rings.commit) }

// sync is Sync through ring (nil: directly).
func (j *Journal) sync(upTo uint64, ring *uring.Ring) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	if upTo <= j.last {
		j.mu.Unlock()
		return nil
	}
	if upTo > j.written || j.broken != nil {
		// A failure (or one whose cut-back is still to come) took them.
		last := j.last
		j.mu.Unlock()
		return &StorageError{Op: "sync", Index: last + 1, Err: fmt.Errorf("records %d..%d were cut back after a failure", last+1, upTo)}
	}
	target, epoch, dir, tailStart := j.written, j.epoch, j.dirDirty, j.tailStart
	j.dirDirty = false
	f, err := j.syncFileLocked()
	j.mu.Unlock()
	if err == nil && !j.opts.NoSync {
		err = syncFile(f, ring, j.opts.Faults.Sync)
		// Records in a segment file created since the last sync are
		// durable only once the file's directory entry is.
		if err == nil && dir {
			err = j.syncSegmentDir(j.dir)
		}
	}
	j.mu.Lock()
	if err != nil && j.epoch == epoch {
		j.failLocked(err)
		// From here on no sync in flight acknowledges anything: the
		// pages this one failed on may be marked clean, so a later
		// fdatasync succeeding proves nothing about them.
		j.epoch++
		j.mu.Unlock()
		return j.recoverFailedSync(err)
	}
	defer j.mu.Unlock()
	switch {
	case j.epoch != epoch || j.broken != nil:
		// A write or sync failed while this sync ran: the files are (or
		// are about to be) cut back to j.last, so nothing this sync
		// covered stands.
		return &StorageError{Op: "sync", Index: j.last + 1, Err: fmt.Errorf("records %d..%d were cut back by a failure during the sync", j.last+1, upTo)}
	}
	j.stats.Syncs++
	if ring != nil {
		j.stats.ParkedSyncs++
	}
	j.last = max(j.last, target)
	if dir && !j.opts.NoSync && tailStart == j.tailStart {
		j.dirSynced = tailStart
	}
	if dir && !j.closed {
		// The first records of a new segment (written after MarkServed, since
		// only the store writes): move the floor up, once per
		// segment, so an emptied tail is noticed even after a crash. The
		// records are durable whatever happens to this write: a failure
		// only leaves the evidence lower (Close raises it again and
		// reports the error). So it is written in the background: on the
		// commit path it was a third sync at every segment change (after
		// the new file's and the directory's), queued behind them on the
		// device. It only ever claims records this sync made durable.
		if !j.opts.ExternalFloor {
			j.floorWG.Add(1)
			go func() {
				defer j.floorWG.Done()
				j.raiseFloor(target)
			}()
		}
		// The new segment's first sync is done: the pre-writer may go
		// (see prewriter.held).
		j.pre.held = false
		j.kickPrewriterLocked()
	}
	return nil
}

// recoverFailedSync cuts the files back after the failed fdatasync err,
// unless a Write already did (it recovers a broken journal first). It takes
// wmu, so the cut never overlaps a batch being written.
func (j *Journal) recoverFailedSync(err error) error {
	defer j.lockAll()()
	if j.broken != nil && !j.closed {
		err = j.recoverAfter(err)
	}
	return &StorageError{Op: "sync", Index: j.last + 1, Err: err}
}

// syncFileLocked returns a descriptor on the tail segment for Sync,
// reopening it when the tail moved to a new file.
func (j *Journal) syncFileLocked() (*os.File, error) {
	if j.syncFile != nil && j.syncStart == j.tailStart {
		return j.syncFile, nil
	}
	j.closeSyncFileLocked()
	// Read-only is enough: fdatasync flushes the file's dirty pages
	// whichever descriptor asks.
	f, err := os.Open(filepath.Join(j.dir, segmentName(j.tailStart)))
	if err != nil {
		return nil, err
	}
	j.syncFile, j.syncStart = f, j.tailStart
	return f, nil
}

// closeSyncFileLocked drops the sync descriptor. A Sync still using it is
// safe: os.File defers the close until its call returns.
func (j *Journal) closeSyncFileLocked() {
	if j.syncFile != nil {
		j.syncFile.Close()
		j.syncFile = nil
	}
}

// syncFile fdatasyncs f after consulting the fault hook, through ring (nil:
// directly). uring holds a reference on the descriptor until the operation
// completed, so a concurrent Close of f waits rather than letting the
// number be reused.
func syncFile(f *os.File, ring *uring.Ring, hook func(path string) error) error {
	if err := hook(f.Name()); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return ring.Fdatasync(f)
}

// Poll hands a finished fdatasync to the goroutine waiting for it, if one
// finished. The journal's callers call it on their way in: when every
// processor is busy, the scheduler would otherwise notice the completion
// only once its run queues drain (internal/uring). It never blocks and
// costs an atomic load or two.
func (j *Journal) Poll() {
	j.rings.commit.Poll()
	j.rings.background.Poll()
}

// openRing sets up a ring for fdatasync, or returns nil (direct
// fdatasync) where io_uring is refused.
func openRing() *uring.Ring {
	r, err := uring.New()
	if err != nil {
		return nil
	}
	return r
}
