// Package disk holds the few file-system primitives the store's durability
// rests on: an exclusive flock'd LOCK file, fsync of a directory, and atomic
// replacement of a file, each an FS method so a store under test carries
// fault seams of its own (the package functions are the real disk).
//
// # Invariants
//
//  1. A Lock is held by at most one process at a time; the kernel releases
//     it when the holder dies, so a SIGKILLed store never leaves a stale
//     lock.
//     Code: LockFile, Lock.Release, Held.
//     Tests: TestLockIsExclusive, TestLockReleasedWhenHolderDies.
//  2. After SyncDir(dir) returns nil, every create, rename and remove in dir
//     that happened before the call survives a power loss: the directory
//     itself is fsynced, and a failed fsync is returned, never dropped.
//     Code: FS.SyncDir.
//     Tests: TestFSConsultsItsOwnFaults, TestWriteAtomicSyncFailure.
//  3. WriteAtomic leaves either the old file or the complete new one, never
//     a mix, and returns nil only after the new file and its directory entry
//     are durable. When only the final directory fsync fails, the new file
//     is in place but may not survive a crash: that error is a
//     *NotDurableError, so a caller that must not rely on the file can
//     remove it.
//     Code: FS.WriteAtomicPerm, NotDurableError.
//     Tests: TestWriteAtomic, TestWriteAtomicSyncFailure.
//  4. Every fsync an FS issues runs its Faults' DiskSync hook first, with the
//     path being made durable, and fails with the hook's error; the zero FS,
//     and any other FS, never run that hook.
//     Code: FS.SyncDir, FS.SyncFile, FS.Truncate, FS.WriteAtomicPerm.
//     Tests: TestFSConsultsItsOwnFaults.
package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore/internal/fault"
)

// ErrLocked reports that another process (or another Open in this process)
// holds the store's LOCK file.
var ErrLocked = errors.New("store is locked by another process")

// Lock is an exclusive advisory lock on a LOCK file, held until Release.
type Lock struct {
	f *os.File
}

// LockFile takes an exclusive, non-blocking flock on path, creating it if
// needed. It fails with an error wrapping ErrLocked when someone else holds
// it, so a second opener fails fast instead of waiting behind a live store.
func LockFile(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Held reports whether some process currently holds the lock at path,
// without taking it for longer than the probe. A missing file is not held.
func Held(path string) (bool, error) {
	l, err := LockFile(path)
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return true, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return false, l.Release()
}

// Release drops the lock. The LOCK file itself stays: removing it would race
// with a concurrent opener that already holds a descriptor to it.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// FS is the file system as the store's durability sees it: the real disk,
// whose every fsync first consults Faults. The zero value is the real disk
// with no seams, what the package-level functions use; a store or journal
// under test carries its own Faults, so its failures stay its own.
type FS struct {
	// Faults is a test seam of this module (its DiskSync hook runs before
	// every fsync); nil in real use.
	Faults *fault.Hooks
}

// SyncDir is FS.SyncDir on the real disk with no seams, for callers that
// carry none (tools, the configuration files).
func SyncDir(dir string) error { return FS{}.SyncDir(dir) }

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func (fsys FS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := fsys.Faults.DiskSync(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// SyncFile fsyncs f, a file the caller wrote through its own descriptor.
func (fsys FS) SyncFile(f *os.File) error {
	if err := fsys.Faults.DiskSync(f.Name()); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.Sync()
}

// WriteAtomic is FS.WriteAtomic on the real disk with no seams.
func WriteAtomic(path string, write func(w io.Writer) error) error {
	return FS{}.WriteAtomic(path, write)
}

// WriteAtomic writes path through a temporary file in the same directory:
// write, fsync, rename over path, fsync the directory. write receives the
// temporary file; on any error the temporary file is removed and path is
// untouched. The new file's mode is 0600.
func (fsys FS) WriteAtomic(path string, write func(w io.Writer) error) error {
	return fsys.WriteAtomicPerm(path, 0o600, write)
}

// tempPattern names the temporary files of WriteAtomic for path.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

// WriteAtomicPerm is FS.WriteAtomicPerm on the real disk with no seams.
func WriteAtomicPerm(path string, perm os.FileMode, write func(w io.Writer) error) error {
	return FS{}.WriteAtomicPerm(path, perm, write)
}

// WriteAtomicPerm is WriteAtomic giving the new file the permission bits
// perm, so a replaced file (a configuration file others read) keeps its
// mode.
func (fsys FS) WriteAtomicPerm(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err = write(tmp); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	// The hook sees the destination: a test names the file it fails by
	// what it is, not by a random temporary name.
	if err = fsys.Faults.DiskSync(path); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp.Name(), path, err)
	}
	if derr := fsys.SyncDir(dir); derr != nil {
		// The temporary is renamed already (the deferred cleanup finds
		// nothing to remove); path holds the complete new file.
		return &NotDurableError{Path: path, Err: derr}
	}
	return nil
}

// NotDurableError is WriteAtomic's failure after the rename: Path holds the
// complete new file, but the fsync of its directory failed, so a crash may
// bring back the old file (or none). A failed fsync proves nothing about a
// later one, so the caller must treat the file as never written.
type NotDurableError struct {
	Path string
	Err  error // the directory fsync's failure
}

func (e *NotDurableError) Error() string {
	return fmt.Sprintf("%s replaced but not durable: %v", e.Path, e.Err)
}

// Unwrap returns the directory fsync's failure.
func (e *NotDurableError) Unwrap() error { return e.Err }

// Truncate is FS.Truncate on the real disk with no seams.
func Truncate(path string, size int64) error { return FS{}.Truncate(path, size) }

// Truncate cuts path to size and fsyncs it. Truncation needs no free
// space, so it works on a full disk: the journal relies on that to cut a
// failed batch back off.
func (fsys FS) Truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return fsys.SyncFile(f)
}

// RemoveTemps removes the temporary files WriteAtomic left beside path
// when its process died mid-write. Only the holder of the lock guarding
// path may call it: a live writer's temporary file matches too.
func RemoveTemps(path string) error {
	names, err := filepath.Glob(filepath.Join(filepath.Dir(path), tempPattern(path)))
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale temporary file: %w", err)
		}
	}
	return nil
}
