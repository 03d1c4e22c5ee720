package statestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// decodeBackup reads and fully validates a backup before anything changes.
func (s *Store) decodeBackup(r io.Reader) (*materialize.View, checkpoint.Header, error) {
	hdr, v, err := checkpoint.Decode(r, s.checkpointLimits())
	if err == nil {
		err = s.checker().CheckView(v)
	}
	if err == nil {
		err = s.checkNoSettings(v)
	}
	if err != nil {
		return nil, hdr, wrapErr(InvalidArgument, "backup", err)
	}
	return v, hdr, nil
}

// exclusive runs fn while no batch commits: it holds the write stage off and
// waits for every written batch to be synced and answered, so writes queued
// meanwhile wait and then proceed against the state fn leaves.
func (s *Store) exclusive(fn func() error) error {
	s.pipe.mu.Lock()
	for s.pipe.paused && !s.pipe.closed {
		s.pipe.idle.Wait()
	}
	if s.pipe.closed {
		s.pipe.mu.Unlock()
		return s.errClosed()
	}
	s.pipe.paused = true
	s.quietLocked(false)
	s.pipe.mu.Unlock()
	err := fn()
	s.pipe.mu.Lock()
	s.resetPendingLocked()
	s.pipe.paused = false
	s.pipe.helperWake.Signal()
	s.pipe.idle.Broadcast()
	s.pipe.mu.Unlock()
	return err
}

// Restore replaces the open store's state with a backup. The backup is
// decoded and checked against every bound first; a bad one changes nothing.
// Namespace revisions, entry revisions and counters come back together in
// one step, durably (a checkpoint of the restored state at the journal's
// current index, the journal truncated behind it), before any later call
// sees them; every existing watch is closed with RESTORED. A closed store
// answers UNAVAILABLE without reading r; a Close that begins during a
// Restore waits for it, and the Restore then reports success, since the
// restored state is durable and the next Open purges the leases that
// lapsed since the backup.
func (s *Store) Restore(r io.Reader) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	v, _, err := s.decodeBackup(r)
	if err != nil {
		return err
	}
	err = s.exclusive(func() error {
		s.ckptMu.Lock()
		defer s.ckptMu.Unlock()
		idx := s.jnl.LastIndex()
		path := filepath.Join(s.root, checkpoint.Name(idx))
		if _, err := checkpoint.WriteFileFS(disk.FS{Faults: s.opts.Faults}, path, v, idx, s.clock.Now().UnixMilli()); err != nil {
			return wrapErr(Storage, "checkpoint", err)
		}
		// From here the restored image is the newest and wins at open;
		// older images and the journal behind it only cost space.
		files, err := checkpoint.List(s.root)
		if err == nil {
			for _, f := range files {
				if f.Path != path {
					err = errors.Join(err, os.Remove(f.Path))
				}
			}
		}
		if err == nil {
			err = disk.FS{Faults: s.opts.Faults}.SyncDir(s.root)
		}
		if err == nil {
			err = s.jnl.TruncateFront(idx + 1)
		}
		s.ckptMark.Store(int64(s.jnl.Stats().Bytes))
		s.pubMu.Lock()
		s.view.Store(v)
		s.index = idx
		s.onRestored()
		s.pubMu.Unlock()
		if err != nil {
			return &Error{Code: Storage, Field: "restore", Message: fmt.Sprintf("restored state is durable, cleanup failed: %v", err), Err: err}
		}
		return nil
	})
	if err != nil {
		return err
	}
	select {
	case s.pipe.leasesChanged <- struct{}{}:
	default:
	}
	// Leases that lapsed since the backup was taken expire now, journaled.
	if _, err = s.submit(&op{kind: opExpire}); CodeOf(err) == Unavailable && s.shut.Load() {
		return nil
	}
	return err
}

// checkEmptyForRestore refuses a store directory that already holds a
// journal or checkpoints.
func (s *Store) checkEmptyForRestore() error {
	if segs, _ := journal.ListSegments(filepath.Join(s.root, "journal")); len(segs) > 0 {
		return newErr(InvalidArgument, "dir", "%s already holds a journal; restore into an empty directory or into the open store", s.root)
	}
	if files, _ := checkpoint.List(s.root); len(files) > 0 {
		return newErr(InvalidArgument, "dir", "%s already holds checkpoints; restore into an empty directory", s.root)
	}
	return nil
}

// RestoreDir builds a store in dir (the same Dir that Options takes) from a
// backup, for a store that is not open. It refuses a directory that already
// holds a store's data, and a backup that is damaged, from a newer format
// or over limits, changing nothing.
func RestoreDir(dir string, r io.Reader, limits quota.Limits) error {
	s := &Store{root: filepath.Join(dir, StoreDirName)}
	var err error
	if s.limits, err = limits.WithDefaults(); err != nil {
		return wrapErr(InvalidArgument, "Limits", err)
	}
	s.schemas = defaultRegistry()
	v, hdr, err := s.decodeBackup(r)
	if err != nil {
		return err
	}
	// A refusal changes nothing on disk: look before creating anything,
	// then again under the LOCK (a store may have started meanwhile), and
	// take back what this call created if the second look refuses.
	if err := s.checkEmptyForRestore(); err != nil {
		return err
	}
	_, rootErr := os.Stat(s.root)
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return wrapErr(Storage, "dir", err)
	}
	lockPath := filepath.Join(s.root, "LOCK")
	_, lockErr := os.Stat(lockPath)
	lock, err := disk.LockFile(lockPath)
	if err != nil {
		return wrapErr(Unavailable, "dir", err)
	}
	defer lock.Release()
	if err := s.checkEmptyForRestore(); err != nil {
		if os.IsNotExist(lockErr) {
			os.Remove(lockPath)
		}
		if os.IsNotExist(rootErr) {
			os.Remove(s.root)
		}
		return err
	}
	jdir := filepath.Join(s.root, "journal")
	if _, err := checkpoint.WriteFile(filepath.Join(s.root, checkpoint.Name(hdr.Index)), v, hdr.Index, hdr.TimeMs); err != nil {
		return wrapErr(Storage, "checkpoint", err)
	}
	if err := journal.CreateEmpty(jdir, hdr.Index+1); err != nil {
		return wrapErr(Storage, "journal", err)
	}
	return nil
}
