package journal

import (
	"errors"
	"fmt"
)

// Append writes recs as one batch and syncs it: Write then Sync, for
// callers that do not pipeline.
func (j *Journal) Append(recs []*Record) (uint64, error) {
	j.mu.Lock()
	next := j.written + 1
	j.mu.Unlock()
	first, err := j.Write(recs, next)
	if err != nil {
		return 0, err
	}
	if len(recs) > 0 {
		if err := j.Sync(first + uint64(len(recs)) - 1); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// ErrStale is wrapped by Write when the caller's expected first index is
// not the journal's next one: a failure cut back records the caller built
// on, so its batch would skip or repeat indexes.
var ErrStale = errors.New("journal: batch built on records that were cut back")

// Write hands recs to the segment files as one batch with consecutive
// indexes starting at first, which must be the index after the last record
// written (else the error wraps ErrStale and nothing is written). The
// records are not acknowledged until a Sync covers them; when the batch
// opened a new segment file, the Sync that covers the first records in it
// also fsyncs the directory, so the new file's entry is durable before any
// record in it is acknowledged. tidwall/wal fsyncs the finished segment
// itself as it cycles: when the batch's last record sealed the segment and
// that segment's directory entry is already durable, Write itself
// acknowledges everything written (LastIndex moves) and a Sync up to it
// does no I/O; so a batch that ends at the seal costs one fsync, not three
// (the sealed file, the new empty file, the directory). On
// failure nothing of the batch is kept: the handle is discarded and the
// files are cut back to the last synced record (so records written earlier
// but not yet synced are gone too, and their Sync fails).
func (j *Journal) Write(recs []*Record, first uint64) (uint64, error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return 0, ErrClosed
	}
	if j.broken != nil {
		release := j.claimFilesLocked()
		err := j.recoverLocked()
		release()
		if err != nil {
			j.mu.Unlock()
			return 0, &StorageError{Op: "recover", Index: first, Err: err}
		}
	}
	if first != j.written+1 {
		j.mu.Unlock()
		return 0, &StorageError{Op: "append", Index: first, Err: fmt.Errorf("%w: next index is %d", ErrStale, j.written+1)}
	}
	if len(recs) == 0 {
		j.mu.Unlock()
		return first, nil
	}
	tail := tailCycle{bytes: j.tailBytes, start: j.tailStart, size: int64(j.opts.SegmentSize)}
	log := j.log
	j.mu.Unlock()

	// Under wmu alone: the handle, the batch, the buffer and the tail
	// offset are the writer's until it returns (see Journal).
	j.batch.Clear()
	j.rest.Clear()
	j.batchBytes = 0
	tail.begin(first)
	// tidwall/wal cycles a tail already over the size before the batch:
	// then the batch goes to a new file and the old tail needs no room.
	cycledFirst := tail.cycled
	// The segment the batch starts in, and how many segments it seals.
	sealing, seals := tail.start, 0
	part, split := &j.batch, false
	var partBytes [2]int // the entries' bytes in tidwall/wal's buffer, per part
	for i, r := range recs {
		var err error
		j.buf, err = r.AppendFrame(j.buf[:0])
		if err != nil {
			return 0, err
		}
		part.Write(first+uint64(i), j.buf)
		j.batchBytes += len(j.buf)
		if split {
			partBytes[1] += uvarintLen(uint64(len(j.buf))) + len(j.buf)
		} else {
			partBytes[0] += uvarintLen(uint64(len(j.buf))) + len(j.buf)
		}
		if tail.append(len(j.buf), first+uint64(i)) {
			seals++
			if i+1 < len(recs) {
				part, split = &j.rest, true
			}
		}
	}
	j.waitPrewriteBelow(tail.bytes, tail.cycled)
	if !cycledFirst {
		j.growTailLocked(log, partBytes[0])
	}
	err := j.writeBatch(log, &j.batch)
	if err == nil && split {
		// The first part sealed the tail and tidwall/wal opened an empty
		// segment: its buffer gets the room before the rest of the batch
		// goes in, instead of being regrown from nothing by it (about
		// 230 KB of garbage at every segment change).
		j.growTailLocked(log, partBytes[1])
		err = j.writeBatch(log, &j.rest)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.failLocked(err)
		defer j.claimFilesLocked()()
		return 0, &StorageError{Op: "append", Index: first, Err: j.recoverAfter(err)}
	}
	j.written += uint64(len(recs))
	j.stats.Appends++
	j.stats.Records += uint64(len(recs))
	j.stats.Bytes += uint64(j.batchBytes)
	j.tailBytes, j.tailStart = tail.bytes, tail.start
	// A batch is acknowledged whole or not at all, and a recovery cuts the
	// files back to j.last: so j.last stays put when cycling fsynced a
	// finished segment in the middle of the batch. When the batch's last
	// record sealed the segment it started in, and a directory fsync has
	// covered that segment's entry (and so every older one's), every
	// record written so far is durable: tidwall/wal fsynced the segment
	// before opening the next, and no fdatasync of the new, empty file or
	// of the directory adds anything to them. The directory is left to the
	// Sync that covers the first records in the new segment (dirDirty).
	// (The new tail is empty exactly when the last record sealed.)
	if seals == 1 && tail.bytes == 0 && sealing == j.dirSynced {
		j.last = j.written
	}
	if tail.cycled {
		// The entry that sealed the old segment reached SegmentSize, past
		// every pre-written byte; the new tail is a fresh, empty file.
		j.tailChangedLocked()
	}
	// The new segment's directory entry is made durable by the Sync that
	// acknowledges its first records, off the writer's path; that Sync
	// wakes the pre-writer.
	j.dirDirty = j.dirDirty || tail.cycled
	j.pre.held = j.pre.held || tail.cycled
	j.kickPrewriterLocked()
	return first, nil
}
