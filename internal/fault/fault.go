// Package fault lets tests make the disk fail on demand, for the failures a
// real disk produces too rarely to test otherwise (an fsync that reports
// EIO). Production code only reads the hooks: one atomic load per sync,
// nil unless a test set one.
//
// Three seams: Sync, before every journal fdatasync that acknowledges
// records (and of the ACKNOWLEDGED marker); PrewriteSync, before the
// journal's background fdatasync of the zeros it pre-writes ahead of the
// records; and DiskSync, before every fsync the disk package issues (the
// file written by disk.WriteAtomic, named by its destination path, and
// every directory disk.SyncDir syncs, the journal's included).
package fault

import "sync/atomic"

// SyncHook is consulted with the path being synced; a non-nil error fails
// that sync as if the disk had returned it.
type SyncHook func(path string) error

var syncHook, prewriteSyncHook, diskSyncHook atomic.Pointer[SyncHook]

// set installs h (nil removes it) in p and returns the restore function.
func set(p *atomic.Pointer[SyncHook], h SyncHook) (restore func()) {
	var hp *SyncHook
	if h != nil {
		hp = &h
	}
	old := p.Swap(hp)
	return func() { p.Store(old) }
}

// run runs the hook installed in p, if any.
func run(p *atomic.Pointer[SyncHook], path string) error {
	if h := p.Load(); h != nil {
		return (*h)(path)
	}
	return nil
}

// SetSync installs the journal fdatasync hook (nil removes it) and returns
// a function restoring the previous hook.
func SetSync(h SyncHook) (restore func()) { return set(&syncHook, h) }

// Sync runs the installed journal fdatasync hook, if any.
func Sync(path string) error { return run(&syncHook, path) }

// SetPrewriteSync installs the journal's pre-write fdatasync hook (nil
// removes it) and returns a function restoring the previous hook.
func SetPrewriteSync(h SyncHook) (restore func()) { return set(&prewriteSyncHook, h) }

// PrewriteSync runs the installed pre-write fdatasync hook, if any.
func PrewriteSync(path string) error { return run(&prewriteSyncHook, path) }

// SetDiskSync installs the disk package's fsync hook (nil removes it) and
// returns a function restoring the previous hook.
func SetDiskSync(h SyncHook) (restore func()) { return set(&diskSyncHook, h) }

// DiskSync runs the installed disk fsync hook, if any.
func DiskSync(path string) error { return run(&diskSyncHook, path) }
