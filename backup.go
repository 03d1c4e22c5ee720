package statestore

import (
	"io"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// Backups are checkpoint images: Store.Backup writes one at a commit
// point while the store serves, Store.Restore brings one back into the
// open store, and RestoreDir builds a stopped store from one.

// decodeBackup reads and fully validates a backup before anything changes:
// the image's bounds, identifiers and documents, and no namespace that
// settings hold here (settings travel in config.toml, never in a runtime
// backup).
func decodeBackup(chk *recovery.Checker, r io.Reader, settings *settingsBackend) (*materialize.View, error) {
	_, v, err := chk.DecodeBackup(r)
	if err == nil {
		err = settings.refuseBackup(v)
	}
	if err != nil {
		return nil, wrapErr(InvalidArgument, "backup", err)
	}
	return v, nil
}

// checkEmptyForRestore refuses a store directory (Dir/state-store) that
// already holds a journal or checkpoints.
func checkEmptyForRestore(root string) error {
	if segs, _ := journal.ListSegments(filepath.Join(root, "journal")); len(segs) > 0 {
		return newErr(InvalidArgument, "dir", "%s already holds a journal; restore into an empty directory or into the open store", root)
	}
	if files, _ := checkpoint.List(root); len(files) > 0 {
		return newErr(InvalidArgument, "dir", "%s already holds checkpoints; restore into an empty directory", root)
	}
	return nil
}

// RestoreDir builds a store in dir (the same Dir that Options takes) from a
// backup, for a store that is not open: how a replacement machine is
// brought up from the last backup before its first Open. It refuses a
// directory that already holds a store's data, and a backup that is
// damaged, from a newer format, over limits or holding a document the
// built-in schemas or the content guard refuse (a *DocumentError),
// changing nothing.
func RestoreDir(dir string, r io.Reader, limits quota.Limits) error {
	root := filepath.Join(dir, StoreDirName)
	chk, err := recovery.NewChecker(limits, nil)
	if err != nil {
		return wrapErr(InvalidArgument, "Limits", err)
	}
	hdr, v, err := chk.DecodeBackup(r)
	if err != nil {
		return wrapErr(InvalidArgument, "backup", err)
	}
	// A refusal changes nothing on disk: look before creating anything,
	// then again under the LOCK (a store may have started meanwhile), and
	// take back what this call created if the second look refuses.
	if err := checkEmptyForRestore(root); err != nil {
		return err
	}
	_, rootErr := os.Stat(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return wrapErr(Storage, "dir", err)
	}
	lockPath := filepath.Join(root, "LOCK")
	_, lockErr := os.Stat(lockPath)
	lock, err := disk.LockFile(lockPath)
	if err != nil {
		return wrapErr(Unavailable, "dir", err)
	}
	defer lock.Release()
	if err := checkEmptyForRestore(root); err != nil {
		if os.IsNotExist(lockErr) {
			os.Remove(lockPath)
		}
		if os.IsNotExist(rootErr) {
			os.Remove(root)
		}
		return err
	}
	if _, err := checkpoint.WriteFile(filepath.Join(root, checkpoint.Name(hdr.Index)), v, hdr.Index, hdr.TimeMs); err != nil {
		return wrapErr(Storage, "checkpoint", err)
	}
	if err := journal.CreateEmpty(filepath.Join(root, "journal"), hdr.Index+1); err != nil {
		return wrapErr(Storage, "journal", err)
	}
	return nil
}
