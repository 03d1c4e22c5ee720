package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/internal/disk"
)

// Open opens (creating if needed) the journal in dir. It finishes any
// truncation tidwall/wal left half done, cuts a torn final record off the
// last segment (reporting it in the returned *TailCut, nil if none), and
// refuses to open when damage sits anywhere else. It does not read sealed
// segments: Replay validates them.
func Open(dir string, opts Options) (*Journal, *TailCut, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	if opts.QuarantineDir == "" {
		opts.QuarantineDir = filepath.Join(filepath.Dir(dir), "quarantine")
	}
	// Records were acknowledged but the journal directory is gone: refuse
	// before creating it (openLog refuses a directory with no segment).
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && opts.Floor.Index > 0 {
		return nil, nil, CheckFloor(0, segmentName(1), opts.Floor)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, &StorageError{Op: "create directory", Err: err}
	}
	fsys := disk.FS{Faults: opts.Faults}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, nil, &StorageError{Op: "create directory", Err: err}
	}
	j := &Journal{dir: dir, opts: opts, fs: fsys}
	if err := finishTruncation(fsys, dir); err != nil {
		return nil, nil, err
	}
	if err := finishReset(fsys, dir); err != nil {
		return nil, nil, err
	}
	floor, err := LoadFloor(dir, opts.Floor)
	if err != nil {
		return nil, nil, err
	}
	j.floor = floor
	cut, err := j.repairTail()
	if err != nil {
		return nil, nil, err
	}
	if err := j.openLog(); err != nil {
		return nil, nil, err
	}
	if err := CheckFloor(j.last, j.tailName(), floor); err != nil {
		j.log.Close()
		return nil, nil, err
	}
	j.reserve = openReserve(fsys, dir, opts.ReserveBytes, opts.NoSync)
	if !opts.NoSync && !opts.DirectSync {
		j.rings.commit, j.rings.background = openRing(), openRing()
	}
	j.marker = newFloorMarker(fsys, dir, opts.NoSync, j.rings.background)
	j.startPrewriter()
	return j, cut, nil
}

// MarkServed records that every record now in the journal is served (the
// store calls it once Open has replayed them): from then on they count as
// acknowledged, and an open that no longer finds them refuses. It is
// separate from Open so that an open refused later, during replay, writes
// nothing.
func (j *Journal) MarkServed() error {
	j.floorMu.Lock()
	j.served = true
	j.floorMu.Unlock()
	if err := j.fillReserve(); err != nil {
		return err
	}
	if j.opts.ExternalFloor {
		return nil
	}
	return j.raiseFloor(j.LastIndex())
}

// openLog opens tidwall/wal on a directory whose tail is known good and
// loads the index range.
func (j *Journal) openLog() error {
	if segs, err := ListSegments(j.dir); err != nil {
		return &StorageError{Op: "open", Err: err}
	} else if len(segs) == 0 {
		// Records were acknowledged but no segment is left: refuse
		// before tidwall/wal starts an empty one, so a refused Open
		// changes nothing.
		if err := CheckFloor(0, segmentName(1), j.floor); err != nil {
			return err
		}
	}
	log, err := openTidwall(j.dir, j.opts.SegmentSize)
	if err != nil {
		return &StorageError{Op: "open", Err: err}
	}
	// tidwall/wal may just have created the first segment file, and never
	// fsyncs directories; a tail left by a process that stopped before its
	// directory fsync may not be durable either. Make the entries durable
	// ourselves, so the tail's seal can be acknowledged without another
	// (see Write).
	if err := j.fs.SyncDir(j.dir); err != nil {
		log.Close()
		return &StorageError{Op: "open", Err: err}
	}
	first, err1 := log.FirstIndex()
	last, err2 := log.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		log.Close()
		return &StorageError{Op: "open", Err: err}
	}
	segs, err := ListSegments(j.dir)
	if err != nil || len(segs) == 0 {
		log.Close()
		return &StorageError{Op: "open", Err: fmt.Errorf("no segment after open: %v", err)}
	}
	tail := segs[len(segs)-1]
	j.log, j.first, j.last, j.written = log, first, last, last
	j.tailStart, j.tailBytes = tail.Start, tail.Size
	j.tailChangedLocked()
	j.dirSynced = tail.Start
	j.pre.held = false
	j.kickPrewriterLocked()
	return nil
}

// Close flushes and closes the journal. Later calls return ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.closed = true
	j.mu.Unlock()
	j.stopPrewriter()
	j.floorWG.Wait()
	// A Write that began before closed was set finishes its batch first,
	// and a Reclaim its unlinks.
	defer j.lockAll()()
	// After the Log is closed (below), nothing reads the tail buffers.
	defer j.pages.unmap()
	j.rmClosed = true
	j.closeSyncFileLocked()
	err := j.closeFloor(j.last)
	if j.log == nil {
		return err
	}
	err = errors.Join(err, j.log.Close())
	j.log = nil
	if j.broken == nil {
		// Leave records only: the next open then needs no trim. (After a
		// failure the next open's repair cuts everything after j.last.)
		err = errors.Join(err, j.trimTailLocked())
	}
	j.tailChangedLocked()
	j.rings.commit.Close()
	j.rings.background.Close()
	return err
}

// CreateEmpty makes dir an empty journal whose first record will get index
// next, as a store restored from a checkpoint at index next-1 needs. dir
// must not hold segments already.
func CreateEmpty(dir string, next uint64) error {
	if next == 0 {
		next = 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &StorageError{Op: "create journal", Err: err}
	}
	if segs, err := ListSegments(dir); err != nil {
		return &StorageError{Op: "create journal", Err: err}
	} else if len(segs) > 0 {
		return &StorageError{Op: "create journal", Err: fmt.Errorf("%s already holds %d segments", dir, len(segs))}
	}
	f, err := os.OpenFile(filepath.Join(dir, segmentName(next)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = disk.SyncDir(dir)
	}
	if err == nil {
		err = disk.SyncDir(filepath.Dir(dir))
	}
	if err != nil {
		return &StorageError{Op: "create journal", Err: err}
	}
	// Records up to next-1 live in the image the journal continues.
	return SetFloor(dir, next-1)
}
