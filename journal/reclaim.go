package journal

import (
	"errors"
	"fmt"
	"io/fs"
)

// TruncateFront removes every record before index (which must be at most
// LastIndex()+1), so the journal then starts at index. The store calls it
// only for records a durable checkpoint already covers.
// The directory changes are durable when it returns.
func (j *Journal) TruncateFront(index uint64) error {
	defer j.lockAll()()
	if j.closed {
		return ErrClosed
	}
	if index <= j.first {
		return nil
	}
	if index > j.last+1 {
		return fmt.Errorf("truncate front to index %d: beyond last index %d", index, j.last)
	}
	if j.broken != nil || j.reclaimed {
		// After Reclaim, reopening is how tidwall/wal relearns which
		// segments exist (a recovery cuts back to the last acknowledged
		// record; callers truncate with no write in flight).
		if err := j.recoverLocked(); err != nil {
			return &StorageError{Op: "recover", Err: err}
		}
	}
	// tidwall/wal rewrites the segment holding index from its in-memory
	// copy: the released bytes must be back in it first.
	err := j.restoreTailLocked()
	if err == nil {
		err = j.log.TruncateFront(index)
	}
	if err == nil {
		err = j.fs.SyncDir(j.dir)
	}
	if err != nil {
		j.broken = err
		return &StorageError{Op: "truncate front", Index: index, Err: j.recoverAfter(err)}
	}
	j.first = index
	if index >= j.tailStart {
		// tidwall/wal rewrote the tail from index on (records only, no
		// pre-written zeros) under the name of index.
		j.closeSyncFileLocked()
		if segs, err := ListSegments(j.dir); err == nil && len(segs) > 0 {
			j.tailStart, j.tailBytes = segs[len(segs)-1].Start, segs[len(segs)-1].Size
		}
		j.tailChangedLocked()
		j.kickPrewriterLocked()
	}
	return nil
}

// Reclaim frees the segment files that hold only records before index,
// the first record the caller still needs: every sealed segment whose
// successor starts at or before index is removed, oldest first, so a crash
// part way leaves a journal that merely starts earlier. It works on the
// files alone and never calls tidwall/wal's TruncateFront, which rewrites
// the segment holding the new first record through a new file and an
// fsync while holding the lock every write takes: a reclaim after each
// checkpoint would stall commits for that long. Removing whole files takes
// none of the locks commits take (see Journal). tidwall/wal's own list of
// segments then names files that are gone; it reads that list only for
// Read (never used) and TruncateFront, so TruncateFront reopens the Log
// first. The directory is not fsynced: if a crash undoes a removal, the
// journal starts earlier, which checkpoints make harmless. It does nothing
// when no whole segment can be freed.
func (j *Journal) Reclaim(index uint64) error {
	j.mu.Lock()
	closed, last, tailStart := j.closed, j.last, j.tailStart
	j.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if index > last+1 {
		return fmt.Errorf("reclaim to index %d: beyond last index %d", index, last)
	}
	// The directory is read under no lock: a segment below the tail
	// segment is sealed, and only what holds wmu changes sealed files.
	// Holding mu here stalled every Sync's acknowledgement behind a
	// directory listing (at 127 writers, most of the wait on mu).
	segs, err := ListSegments(j.dir)
	if err != nil {
		return &StorageError{Op: "reclaim", Err: err}
	}
	n := 0
	for n+1 < len(segs) && segs[n+1].Start <= index && segs[n].Start < tailStart {
		n++
	}
	if n == 0 {
		return nil
	}
	// Only rmMu across the unlinks (see Journal): a Write, a Sync and the
	// pre-writer go on meanwhile; what lists the segments to act on them
	// waits. mu is never taken under rmMu, so the new first index is
	// recorded once the files are gone.
	j.rmMu.Lock()
	if j.rmClosed {
		j.rmMu.Unlock()
		return ErrClosed
	}
	removed, err := j.removeSegments(segs[:n])
	j.rmMu.Unlock()
	if removed > 0 {
		j.mu.Lock()
		j.first = max(j.first, segs[removed].Start)
		j.reclaimed = true
		j.mu.Unlock()
	}
	return err
}

// removeSegments unlinks segs, oldest first, so a crash part way leaves a
// journal that merely starts earlier. It returns how many are gone; a
// segment already gone (a TruncateFront since the listing) counts.
func (j *Journal) removeSegments(segs []Segment) (int, error) {
	for i, seg := range segs {
		if err := j.removeSegmentFile(seg.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return i, &StorageError{Op: "reclaim", Index: seg.Start, Err: err}
		}
	}
	return len(segs), nil
}
