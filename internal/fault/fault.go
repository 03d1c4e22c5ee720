// Package fault lets tests make the disk fail on demand, for the failures a
// real disk produces too rarely to test otherwise (an fsync that reports
// EIO).
//
// The seams belong to one store or one journal, never to the process: a
// test builds a Hooks, hands it to what it opens (journal.Options.Faults,
// statestore.Options.Faults, disk.FS.Faults), and installs hooks on it, so
// tests failing their own disks run side by side without seeing each
// other's failures. Production code passes a nil *Hooks, and only reads
// it: a nil check per sync, plus one atomic load when a test gave one.
//
// Three seams: Sync, before every journal fdatasync that acknowledges
// records (and of the ACKNOWLEDGED marker); PrewriteSync, before the
// journal's background fdatasync of the zeros it pre-writes ahead of the
// records; and DiskSync, before every fsync a disk.FS issues (the file
// written by WriteAtomic, named by its destination path, a file Truncate
// or SyncFile syncs, and every directory SyncDir syncs, the journal's
// included).
//
// # Invariants
//
//  1. A hook fails only its own seam of its own Hooks: tests that fail
//     their own stores' disks never see each other's failures.
//     Code: Hooks, slot.run.
//     Tests: TestHooksAreIndependent.
//  2. A nil or zero Hooks injects nothing, and a restore function puts back
//     exactly the hook its Set replaced, so nested installs unwind in order.
//     Code: Hooks.Sync, Hooks.PrewriteSync, Hooks.DiskSync, slot.set.
//     Tests: TestHooksInstallAndRestore.
//  3. Installing, replacing and restoring a hook while other goroutines run
//     it is free of data races: each seam is one atomic pointer.
//     Code: slot.set, slot.run.
//     Tests: TestHooksSetWhileRunning.
//  4. StallNextSync holds exactly one sync, the next to run, until its
//     release, so a test keeps a write in flight without a timed wait.
//     Code: Hooks.StallNextSync.
//     Tests: TestStallNextSync.
package fault

import (
	"sync"
	"sync/atomic"
)

// SyncHook is consulted with the path being synced; a non-nil error fails
// that sync as if the disk had returned it.
type SyncHook func(path string) error

// Hooks is one store's or one journal's set of fault seams. The zero value
// injects nothing. Each seam is an atomic slot, so a test may install or
// replace a hook while what it opened runs (its background goroutines
// included) without a data race. A nil *Hooks is valid for every method
// production code calls (Sync, PrewriteSync, DiskSync) and injects
// nothing; the Set methods need a non-nil one.
type Hooks struct {
	sync, prewriteSync, diskSync slot
}

// slot holds one seam's hook; nil when none is installed.
type slot struct{ p atomic.Pointer[SyncHook] }

// set installs h (nil removes it) and returns the restore function.
func (s *slot) set(h SyncHook) (restore func()) {
	var hp *SyncHook
	if h != nil {
		hp = &h
	}
	old := s.p.Swap(hp)
	return func() { s.p.Store(old) }
}

// run runs the installed hook, if any.
func (s *slot) run(path string) error {
	if h := s.p.Load(); h != nil {
		return (*h)(path)
	}
	return nil
}

// SetSync installs the journal fdatasync hook (nil removes it) and returns
// a function restoring the previous hook.
func (h *Hooks) SetSync(fn SyncHook) (restore func()) { return h.sync.set(fn) }

// Sync runs the installed journal fdatasync hook, if any.
func (h *Hooks) Sync(path string) error {
	if h == nil {
		return nil
	}
	return h.sync.run(path)
}

// SetPrewriteSync installs the journal's pre-write fdatasync hook (nil
// removes it) and returns a function restoring the previous hook.
func (h *Hooks) SetPrewriteSync(fn SyncHook) (restore func()) { return h.prewriteSync.set(fn) }

// PrewriteSync runs the installed pre-write fdatasync hook, if any.
func (h *Hooks) PrewriteSync(path string) error {
	if h == nil {
		return nil
	}
	return h.prewriteSync.run(path)
}

// SetDiskSync installs the disk fsync hook (nil removes it) and returns a
// function restoring the previous hook.
func (h *Hooks) SetDiskSync(fn SyncHook) (restore func()) { return h.diskSync.set(fn) }

// DiskSync runs the installed disk fsync hook, if any.
func (h *Hooks) DiskSync(path string) error {
	if h == nil {
		return nil
	}
	return h.diskSync.run(path)
}

// StallNextSync makes the next journal fdatasync block until release is
// called, and returns a channel closed once that sync has begun: a test
// holds a write in flight (its answer not yet due) without a timed wait.
// Only one sync stalls; later ones run the hook installed before. Call
// both release and restore when done (release is idempotent); restore
// puts the previous hook back.
func (h *Hooks) StallNextSync() (entered <-chan struct{}, release, restore func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	restore = h.SetSync(func(string) error {
		once.Do(func() {
			close(in)
			<-out
		})
		return nil
	})
	return in, func() { released.Do(func() { close(out) }) }, restore
}
