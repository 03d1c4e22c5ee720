package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/internal/disk"
)

// What a raft log needs of the journal beyond appending (replica/raftlog):
// reading one record by index, cutting a suffix (a follower's conflicting
// entries), starting over at any index (after a snapshot install), and a
// floor the caller owns (Options.ExternalFloor). The store itself uses
// none of them.

// ErrNoRecord is wrapped by Read for an index outside the acknowledged
// records.
var ErrNoRecord = errors.New("journal: no such record")

// ErrBelowFloor is wrapped by a TruncateBack that would drop a record at
// or below the acknowledged floor.
var ErrBelowFloor = errors.New("journal: records at or below the floor cannot be dropped")

// RangeError names an index outside the journal's records.
type RangeError struct {
	Op          string // "read", "truncate back"
	Index       uint64
	First, Last uint64 // the records the journal holds (First > Last: none)
}

func (e *RangeError) Error() string {
	if e.First > e.Last {
		return fmt.Sprintf("journal %s at index %d: the journal holds no record (next index %d)", e.Op, e.Index, e.First)
	}
	return fmt.Sprintf("journal %s at index %d: the journal holds records %d..%d", e.Op, e.Index, e.First, e.Last)
}

// Unwrap returns ErrNoRecord.
func (e *RangeError) Unwrap() error { return ErrNoRecord }

// FloorError is a truncation refused because it would drop acknowledged
// records the floor protects.
type FloorError struct {
	Op    string // "truncate back"
	Index uint64 // the first index the truncation would have dropped
	Floor Floor
}

func (e *FloorError) Error() string {
	return fmt.Sprintf("journal %s from index %d refused: %s, so records up to it may not be dropped", e.Op, e.Index, e.Floor)
}

// Unwrap returns ErrBelowFloor.
func (e *FloorError) Unwrap() error { return ErrBelowFloor }

// Read returns a copy (appended to dst[:0]) of the frame of the
// acknowledged record at index, or a *RangeError. The frame is not parsed:
// Frame.Parse checks its CRC. It holds wmu, which every call into
// tidwall/wal holds (tidwall.go), so it waits for a batch being written;
// it never waits for a sync.
func (j *Journal) Read(index uint64, dst []byte) ([]byte, error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	closed, first, last, log, reclaimed := j.closed, j.first, j.last, j.log, j.reclaimed
	j.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if index < first || index > last {
		return nil, &RangeError{Op: "read", Index: index, First: first, Last: last}
	}
	if log != nil && reclaimed {
		// Reclaim removed files the handle still lists: the next Write
		// or truncation reopens it. Not here: a reopen cuts the files
		// back to the last synced record, so a read would fail the
		// batch whose fdatasync is in flight (a leader stepping down).
		return nil, &StorageError{Op: "read", Index: index, Err: errors.New("the journal is being recovered")}
	}
	if log == nil {
		// A failed write or sync left no handle (and doomed whatever
		// was in flight): reopen it here rather than at the next Write,
		// since a raft follower reads its log (the previous entry's
		// term) before it writes again, and would otherwise refuse
		// every AppendEntries for ever.
		j.mu.Lock()
		release := j.claimFilesLocked()
		err := j.recoverLocked()
		first, last, log = j.first, j.last, j.log
		release()
		j.mu.Unlock()
		switch {
		case err != nil:
			return nil, &StorageError{Op: "read", Index: index, Err: fmt.Errorf("reopening after a failed write: %w", err)}
		case index < first || index > last:
			return nil, &RangeError{Op: "read", Index: index, First: first, Last: last}
		case log == nil:
			return nil, &StorageError{Op: "read", Index: index, Err: errors.New("no segment holds it after recovery")}
		}
	}
	// A record in the tail, or in a sealed segment tidwall/wal still
	// caches, is read from their buffers: the released bytes go back
	// first (tailpages.go).
	if err := j.restoreTailLocked(); err != nil {
		return nil, &StorageError{Op: "read", Index: index, Err: err}
	}
	data, err := log.Read(index)
	if err != nil {
		return nil, &StorageError{Op: "read", Index: index, Err: err}
	}
	return append(dst[:0], data...), nil
}

// TruncateBack drops every record after last, durably, so the next Write
// starts at last+1: a raft follower's conflicting suffix. The segments
// after the cut are removed newest first, each removal durable before the
// next (so a crash leaves a longer journal, never a gap), then the cut-back
// a failed sync does (recoverLocked) cuts the segment holding last, fsynced. It is refused with
// a *FloorError when a dropped record lies at or below the floor, and with
// a *RangeError when last is below FirstIndex()-1 (use Reset).
func (j *Journal) TruncateBack(last uint64) error {
	defer j.lockAll()()
	if j.closed {
		return ErrClosed
	}
	if last >= j.written && j.broken == nil {
		return nil
	}
	if last+1 < j.first {
		return &RangeError{Op: "truncate back", Index: last + 1, First: j.first, Last: j.last}
	}
	if last < j.floor.Index {
		return &FloorError{Op: "truncate back", Index: last + 1, Floor: j.floor}
	}
	j.last = min(j.last, last)
	if err := j.removeSegmentsAfter(last); err != nil {
		j.broken = err
		return &StorageError{Op: "truncate back", Index: last + 1, Err: err}
	}
	if err := j.recoverLocked(); err != nil {
		j.broken = err
		return &StorageError{Op: "truncate back", Index: last + 1, Err: err}
	}
	return nil
}

// removeSegmentsAfter removes every segment starting after last+1, newest
// first, each removal made durable (a directory fsync) before the next: a
// crash part way leaves a journal that ends later than asked, contiguous,
// never one with a gap below its tail. The wal handle is dropped first;
// recoverLocked cuts the segment holding last and reopens it. wmu, mu and
// rmMu are held.
func (j *Journal) removeSegmentsAfter(last uint64) error {
	j.closeSyncFileLocked()
	if j.log != nil {
		j.log.Close()
		j.log = nil
	}
	segs, err := ListSegments(j.dir)
	if err != nil {
		return err
	}
	for i := len(segs) - 1; i >= 0 && segs[i].Start > last+1; i-- {
		if err := os.Remove(segs[i].Path); err != nil {
			return err
		}
		if err := j.fs.SyncDir(j.dir); err != nil {
			return err
		}
	}
	return nil
}

// The reset marker. Reset replaces every segment by one empty segment named
// after the next index, and a crash part way must not leave some of the
// old records behind (a raft log holding entries from before a snapshot
// install with a gap after them). So Reset first writes, atomically, a
// 16-byte file RESET naming the next index:
//
//	+--------+------+-----------------------------+
//	| offset | size | field                       |
//	+--------+------+-----------------------------+
//	|   0    |   4  | magic "KPRS"                |
//	|   4    |   8  | next index, little-endian   |
//	|  12    |   4  | CRC-32C of bytes 0..11      |
//	+--------+------+-----------------------------+
//
// and Open finishes a reset it finds (finishReset) before it reads
// anything else. tidwall/wal ignores the file (its name is not an index).

// ResetFile is the reset marker's file name inside the journal directory.
const ResetFile = "RESET"

const resetMagic = "KPRS"

// Reset drops every record and makes next the index of the next record,
// durably, and sets the floor to next-1 (what CreateEmpty does: the
// records before next live in an image, a raft snapshot). A crash part way
// is finished by the next Open.
func (j *Journal) Reset(next uint64) error {
	if next == 0 {
		return &StorageError{Op: "reset", Err: errors.New("the next index must be at least 1")}
	}
	defer j.lockAll()()
	if j.closed {
		return ErrClosed
	}
	b := make([]byte, 16)
	copy(b, resetMagic)
	binary.LittleEndian.PutUint64(b[4:], next)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	if err := j.fs.WriteAtomic(filepath.Join(j.dir, ResetFile), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return &StorageError{Op: "reset", Index: next, Err: err}
	}
	j.epoch++
	j.closeSyncFileLocked()
	if j.log != nil {
		j.log.Close()
		j.log = nil
	}
	// The marker's descriptor names the file SetFloor replaces.
	j.floorMu.Lock()
	if j.marker != nil {
		j.marker.close()
		j.marker.f, j.marker.index = nil, next-1
	}
	j.floorMu.Unlock()
	err := finishReset(j.fs, j.dir)
	if err == nil {
		err = j.openLog()
	}
	if err != nil {
		j.broken = err
		return &StorageError{Op: "reset", Index: next, Err: err}
	}
	j.broken, j.reclaimed = nil, false
	j.floor = Floor{Index: next - 1, Source: "reset to index " + fmt.Sprint(next)}
	return nil
}

// finishReset carries out the reset the marker in dir names, if any:
// every segment removed, an empty one named after the next index created
// and fsynced, the floor set to next-1, then the marker removed, each step
// durable before the next.
func finishReset(fsys disk.FS, dir string) error {
	path := filepath.Join(dir, ResetFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &StorageError{Op: "read " + ResetFile, Err: err}
	}
	if len(b) != 16 || string(b[:4]) != resetMagic || crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:]) {
		// WriteAtomic renames a synced file: a damaged marker is not a
		// crash's work.
		return &CorruptError{Segment: ResetFile, Offset: 0, Reason: fmt.Sprintf("%d bytes that are not a valid reset marker", len(b))}
	}
	next := binary.LittleEndian.Uint64(b[4:])
	segs, err := ListSegments(dir)
	if err != nil {
		return &StorageError{Op: "reset", Err: err}
	}
	for _, s := range segs {
		if s.Start == next && s.Size == 0 {
			continue
		}
		if err := os.Remove(s.Path); err != nil {
			return &StorageError{Op: "reset", Index: next, Err: err}
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, segmentName(next)), os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		err = fsys.SyncFile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err == nil {
		err = fsys.WriteAtomic(filepath.Join(dir, FloorFile), func(w io.Writer) error {
			_, err := w.Write(encodeFloor(next - 1))
			return err
		})
	}
	if err == nil {
		err = os.Remove(path)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return &StorageError{Op: "reset", Index: next, Err: err}
	}
	return nil
}

// RaiseFloor records in the ACKNOWLEDGED marker (fdatasynced) that the
// records up to index may never be cut or be missing: with
// Options.ExternalFloor, a raft log's commit index. It refuses an index
// beyond the last acknowledged record.
func (j *Journal) RaiseFloor(index uint64) error {
	j.mu.Lock()
	last, closed := j.last, j.closed
	j.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if index > last {
		return &RangeError{Op: "raise floor", Index: index, First: j.FirstIndex(), Last: last}
	}
	if err := j.raiseFloor(index); err != nil {
		return err
	}
	j.mu.Lock()
	j.floor = j.floor.Raise(index, "marker "+FloorFile)
	j.mu.Unlock()
	return nil
}

// Floor is the acknowledged floor: the one Open judged the tail against,
// raised by RaiseFloor, set by Reset.
func (j *Journal) Floor() Floor {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.floor
}
