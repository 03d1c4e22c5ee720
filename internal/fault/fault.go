// Package fault lets tests make the journal's disk fail on demand, for the
// failures a real disk produces too rarely to test otherwise (an fdatasync
// that reports EIO). Production code only reads the hooks: one atomic load
// per sync, nil unless a test set one.
package fault

import "sync/atomic"

// SyncHook is consulted before every journal fdatasync with the path of
// the segment being synced; a non-nil error fails that sync as if the disk
// had returned it.
type SyncHook func(path string) error

var syncHook atomic.Pointer[SyncHook]

// SetSync installs h (nil removes it) and returns a function restoring the
// previous hook.
func SetSync(h SyncHook) (restore func()) {
	var p *SyncHook
	if h != nil {
		p = &h
	}
	old := syncHook.Swap(p)
	return func() { syncHook.Store(old) }
}

// Sync runs the installed hook, if any.
func Sync(path string) error {
	if h := syncHook.Load(); h != nil {
		return (*h)(path)
	}
	return nil
}
