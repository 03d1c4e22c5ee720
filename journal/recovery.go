package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// repairTail checks the last segment and cuts a torn final record. Damage
// followed by any whole record is corruption and is never cut.
func (j *Journal) repairTail() (*TailCut, error) {
	segs, err := ListSegments(j.dir)
	if err != nil {
		return nil, &StorageError{Op: "open", Err: err}
	}
	if len(segs) == 0 {
		return nil, nil
	}
	tail := segs[len(segs)-1]
	data, err := os.ReadFile(tail.Path)
	if err != nil {
		return nil, &StorageError{Op: "read tail segment", Err: err}
	}
	res, _ := scan(data, j.opts.Limits, nil)
	index := tail.Start + uint64(res.count)
	if res.bad == nil && res.zeros > 0 {
		// Pre-written space, or records whose data never reached the disk
		// (their sync never returned): trimmed, not reported as damage,
		// unless acknowledged records were there.
		if err := JudgeTail(tail.Name(), data, res.end, index, j.floor, j.opts.Limits); err != nil {
			return nil, err
		}
		if err := j.fs.Truncate(tail.Path, res.end); err != nil {
			return nil, &StorageError{Op: "trim pre-written tail", Err: err}
		}
		j.stats.Trimmed = res.zeros
		return nil, nil
	}
	if res.bad == nil {
		return nil, nil
	}
	if err := JudgeTail(tail.Name(), data, res.bad.offset, index, j.floor, j.opts.Limits); err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Reason = res.bad.reason + "; " + ce.Reason
		}
		return nil, err
	}
	cut := &TailCut{Segment: tail.Name(), Offset: res.bad.offset, Index: index, Bytes: int64(len(data)) - res.bad.offset, Reason: res.bad.reason}
	if err := os.MkdirAll(j.opts.QuarantineDir, 0o755); err != nil {
		return nil, &StorageError{Op: "quarantine torn segment", Err: err}
	}
	cut.SavedAs = filepath.Join(j.opts.QuarantineDir, fmt.Sprintf("%s.%d.torn", tail.Name(), time.Now().UnixNano()))
	if err := j.fs.WriteAtomic(cut.SavedAs, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return nil, &StorageError{Op: "quarantine torn segment", Err: err}
	}
	if err := j.fs.Truncate(tail.Path, res.bad.offset); err != nil {
		return nil, &StorageError{Op: "cut torn tail", Err: err}
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return nil, &StorageError{Op: "cut torn tail", Err: err}
	}
	return cut, nil
}

// failLocked records a failed write or sync.
func (j *Journal) failLocked(err error) {
	j.stats.Failures++
	j.broken = err
	j.spendOnLocked(err)
}

// recoverAfter tries to recover right away so the next batch needs no extra
// work; if that fails too, the next Write tries again. wmu, mu and rmMu
// are held.
func (j *Journal) recoverAfter(err error) error {
	if rerr := j.recoverLocked(); rerr != nil {
		return errors.Join(err, fmt.Errorf("recovery: %w", rerr))
	}
	return err
}

// recoverLocked discards the wal handle and cuts the files back to the last
// acknowledged record: whatever a failed batch left on disk (whole records
// included, since their fsync failed or never ran) must not reappear on the
// next open with revisions the memory never applied.
//
// wmu, mu and rmMu are held: a Reclaim unlinking meanwhile would leave the
// listing below, and tidwall/wal's, naming files that are gone.
func (j *Journal) recoverLocked() error {
	j.epoch++
	j.written = j.last
	j.closeSyncFileLocked()
	if j.log != nil {
		j.log.Close()
		j.log = nil
	}
	if err := finishTruncation(j.fs, j.dir); err != nil {
		return err
	}
	segs, err := ListSegments(j.dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		switch {
		case s.Start > j.last+1:
			if err := os.Remove(s.Path); err != nil {
				return err
			}
		case s.Start == j.last+1:
			if err := j.fs.Truncate(s.Path, 0); err != nil {
				return err
			}
		default:
			// Only the segment holding j.last can have bytes after it.
			if next := nextStart(segs, s.Start); next != 0 && next <= j.last+1 {
				continue
			}
			data, err := os.ReadFile(s.Path)
			if err != nil {
				return err
			}
			want := int(j.last - s.Start + 1)
			var end int64
			res, _ := scan(data, j.opts.Limits, func(i int, off int64, r *Record) error {
				if i == want {
					return errStop
				}
				return nil
			})
			end = res.end
			if res.count < want {
				return &CorruptError{Segment: s.Name(), Offset: res.end, Index: s.Start + uint64(res.count),
					Reason: fmt.Sprintf("acknowledged record missing while recovering (segment holds %d of %d)", res.count, want)}
			}
			if end < int64(len(data)) {
				if err := j.fs.Truncate(s.Path, end); err != nil {
					return err
				}
			}
		}
	}
	// openLog fsyncs the directory, making the removals durable.
	if err := j.openLog(); err != nil {
		return err
	}
	if j.log != nil {
		if last, _ := j.log.LastIndex(); last != j.last {
			j.log.Close()
			j.log = nil
			return fmt.Errorf("journal reopened at index %d, expected %d", last, j.last)
		}
	}
	j.broken, j.reclaimed = nil, false
	return nil
}

var errStop = errors.New("stop")

func nextStart(segs []Segment, start uint64) uint64 {
	for _, s := range segs {
		if s.Start > start {
			return s.Start
		}
	}
	return 0
}
