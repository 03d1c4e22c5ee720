package settings

import (
	"fmt"
	"io"
	"os"

	"github.com/keeppeek/statestore/internal/disk"
)

// File is an open config.toml: the configuration lock (a flock on
// path+".lock", held until Close, so two stores never rewrite one file) and
// the atomic rewrite of its state_store section.
//
// A File is not safe for concurrent use: the store serializes every Read
// and Replace under its own configuration lock.
type File struct {
	path string
	lock *disk.Lock
}

// LockSuffix is appended to config.toml's path to name its lock file.
const LockSuffix = ".lock"

// Open takes the configuration lock of the config.toml at path and
// removes temporary files a killed rewrite left behind. The file itself
// must exist.
func Open(path string) (*File, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	lock, err := disk.LockFile(path + LockSuffix)
	if err != nil {
		return nil, err
	}
	if err := disk.RemoveTemps(path); err != nil {
		lock.Release()
		return nil, err
	}
	return &File{path: path, lock: lock}, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Read returns the file's current bytes.
func (f *File) Read() ([]byte, error) { return os.ReadFile(f.path) }

// Replace rewrites the file with its state_store section replaced by
// section (see Render), atomically: it reads the current bytes (so edits
// the media server made to other sections are kept), splices, and
// replaces the file through a temporary file with fsync, rename and a
// directory fsync, keeping the file's permission bits. On error the file
// is as it was.
func (f *File) Replace(section []byte) error {
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	cur, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	next, err := Splice(cur, section)
	if err != nil {
		return err
	}
	return disk.WriteAtomicPerm(f.path, st.Mode().Perm(), func(w io.Writer) error {
		n, err := w.Write(next)
		if err == nil && n != len(next) {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(next))
		}
		return err
	})
}

// Close releases the configuration lock.
func (f *File) Close() error { return f.lock.Release() }
