package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/keeppeek/statestore/internal/disk"
)

// The reserve. Every mutation needs journal space, a DELETE and a lease's
// EXPIRE included, so a journal that fills its disk would leave the
// operator no way to free space through the store. The journal therefore
// keeps a file RESERVE of Options.ReserveBytes real (written, fsynced, not
// sparse) bytes beside its segments. When a write or sync fails because the
// disk is full, the journal removes it: the space it held is what DELETEs,
// EXPIREs and the restart purge are written into from then on, while the
// store refuses every write that adds bytes (see CheckReserve). The reserve
// is written again, ending that mode, as soon as the disk has room for it
// twice over; the store asks before admitting each PUT, so no timer or loop
// polls the disk. tidwall/wal and ListSegments ignore the file: its name is
// not a 20-digit index.

// ReserveFile is the reserve's file name inside the journal directory.
const ReserveFile = "RESERVE"

// DefaultReserveBytes is the reserve's size when Options.ReserveBytes is 0:
// room for a few thousand DELETE or EXPIRE frames (about a hundred bytes
// each with the longest names) and the first page of a new segment.
const DefaultReserveBytes = 256 << 10

// ErrOnReserve is wrapped by the error CheckReserve returns while the
// reserve is spent.
var ErrOnReserve = errors.New("disk full: the journal is running on its reserve; only deletes are accepted until space is freed")

// ReserveError is CheckReserve's refusal: the reserve is spent and could
// not be written again. It wraps ErrOnReserve and, when a restore was
// attempted and failed, the cause.
type ReserveError struct {
	Bytes int64 // the reserve's size
	Free  int64 // bytes the file system had available at the check; -1 if unknown
	Err   error // why the reserve could not be restored, if it was tried
}

func (e *ReserveError) Error() string {
	msg := fmt.Sprintf("%v (reserve %d bytes, %d bytes available", ErrOnReserve, e.Bytes, e.Free)
	if e.Err != nil {
		return fmt.Sprintf("%s; restoring it failed: %v)", msg, e.Err)
	}
	return msg + ")"
}

// Unwrap returns ErrOnReserve and the cause.
func (e *ReserveError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrOnReserve, e.Err}
	}
	return []error{ErrOnReserve}
}

// ReserveState is the reserve as an operator sees it.
type ReserveState struct {
	Bytes    int64  // configured size; 0 when the journal keeps no reserve
	Spent    bool   // the file is gone: only deletes and expiries are journaled
	Releases uint64 // times a full disk made the journal give the reserve up since Open
	Restores uint64 // times it was written again after that
}

// IsNoSpace reports whether err says the file system is full (ENOSPC) or
// the writer's disk quota is exhausted (EDQUOT): the failures the reserve
// exists for.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// statfsAvailable returns what the file system holding dir has free for an
// unprivileged writer (the real step of Journal.availableBytes).
func statfsAvailable(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// reserve is an open journal's reserve file. spent is read without the
// journal's lock on every PUT's admission; everything else changes under
// it.
type reserve struct {
	fs       disk.FS // the journal's
	dir      string
	size     int64
	noSync   bool
	spent    atomic.Bool
	releases uint64
	restores uint64
}

// openReserve looks at the reserve of size bytes (size < 0: none, and nil
// is returned) without writing anything, since the open may still be
// refused: a reserve that is not whole counts as spent until MarkServed
// writes it.
func openReserve(fsys disk.FS, dir string, size int64, noSync bool) *reserve {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultReserveBytes
	}
	r := &reserve{fs: fsys, dir: dir, size: size, noSync: noSync}
	r.spent.Store(!r.whole())
	return r
}

// fillReserve writes the reserve if Open found it missing or partial. A
// disk too full to hold it is not an error: the journal serves spent, as
// it did when it last ran out of space, and CheckReserve writes the
// reserve once there is room.
func (j *Journal) fillReserve() error {
	defer j.lockAll()()
	r := j.reserve
	if r == nil || !r.spent.Load() {
		return nil
	}
	if err := r.write(); err != nil {
		if IsNoSpace(err) {
			return nil
		}
		return &StorageError{Op: "write " + ReserveFile, Err: err}
	}
	r.spent.Store(false)
	return nil
}

func (r *reserve) path() string { return filepath.Join(r.dir, ReserveFile) }

// whole reports whether the file exists at its full size with every block
// allocated: a short file (a crash while writing it) or a sparse one (a
// tool that truncated it longer) holds back less space than it claims.
func (r *reserve) whole() bool {
	fi, err := os.Stat(r.path())
	if err != nil || fi.Size() != r.size {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Blocks*512 >= r.size
}

// zeros is the source of the reserve's bytes and of the pre-writer's
// (writeZerosAt), never written to.
var zeros [64 << 10]byte

// write (re)creates the reserve file with real bytes and makes it durable.
// On failure it removes what it wrote, so a half-written reserve never
// holds space that nothing can use.
func (r *reserve) write() (err error) {
	f, err := os.OpenFile(r.path(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = errors.Join(err, r.remove())
		}
	}()
	for left := r.size; left > 0; {
		n := min(left, int64(len(zeros)))
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	if r.noSync {
		return nil
	}
	if err := r.fs.SyncFile(f); err != nil {
		return err
	}
	return r.fs.SyncDir(r.dir)
}

// remove deletes the reserve file; a missing one is already removed.
func (r *reserve) remove() error {
	if err := os.Remove(r.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// spendOnLocked gives the reserve up when err says the disk is full: the
// batch that failed answers STORAGE, and the space is what the deletes
// and expiries after it are written into. j.mu is held.
func (j *Journal) spendOnLocked(err error) {
	r := j.reserve
	if r == nil || r.spent.Load() || !IsNoSpace(err) {
		return
	}
	r.spent.Store(true)
	r.releases++
	if r.remove() == nil && !r.noSync {
		// The space is free once the name is gone; syncing the directory
		// commits the removal, which some file systems (ext4) need before
		// they hand the freed blocks out again. If the sync fails, a crash
		// merely brings the reserve back.
		_ = r.fs.SyncDir(r.dir)
	}
}

// CheckReserve reports whether a write that adds bytes may be journaled:
// nil while the reserve is whole. When the reserve is spent it first tries
// to write it again, if the file system now has room for it twice over (so
// the restored reserve does not fill the disk right back); only then is it
// nil again. Otherwise it returns a *ReserveError wrapping ErrOnReserve.
// The store calls it before admitting each PUT: while the reserve is
// whole that is one atomic load.
func (j *Journal) CheckReserve() error {
	r := j.reserve
	if r == nil || !r.spent.Load() {
		return nil
	}
	defer j.lockAll()()
	if j.closed {
		return ErrClosed
	}
	if !r.spent.Load() {
		return nil
	}
	free, err := j.availableBytes(r.dir)
	if err != nil {
		return &ReserveError{Bytes: r.size, Free: -1, Err: err}
	}
	if free < 2*r.size {
		return &ReserveError{Bytes: r.size, Free: free}
	}
	// Under j.wmu no batch is being written, so a restore that fails
	// half-way cannot make a journal write fail meanwhile.
	if err := r.write(); err != nil {
		return &ReserveError{Bytes: r.size, Free: free, Err: err}
	}
	r.spent.Store(false)
	r.restores++
	return nil
}

// OnReserve reports whether the reserve is spent: the store then journals
// only deletions and expiries until CheckReserve restores it.
func (j *Journal) OnReserve() bool {
	return j.reserve != nil && j.reserve.spent.Load()
}

// Reserve returns the reserve's state.
func (j *Journal) Reserve() ReserveState {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.reserve
	if r == nil {
		return ReserveState{}
	}
	return ReserveState{Bytes: r.size, Spent: r.spent.Load(), Releases: r.releases, Restores: r.restores}
}
