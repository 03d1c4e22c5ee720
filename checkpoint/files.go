package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/materialize"
)

const (
	namePrefix = "checkpoint-"
	nameSuffix = ".ckpt"
	nameDigits = 20 // enough for any uint64, so names sort as their indexes do
)

// Name returns the file name of the checkpoint at journal index index:
// "checkpoint-%020d.ckpt". The fixed width makes lexical order index order.
func Name(index uint64) string {
	return fmt.Sprintf("%s%0*d%s", namePrefix, nameDigits, index, nameSuffix)
}

// ParseName is the inverse of Name. It accepts only exactly what Name
// produces, so temporaries ("."-prefixed, with a suffix) and stray files are
// never mistaken for checkpoints.
func ParseName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, nameSuffix)
	if !ok || len(digits) != nameDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	index, err := strconv.ParseUint(digits, 10, 64)
	if err != nil { // more than MaxUint64
		return 0, false
	}
	return index, true
}

// File is one checkpoint file found by List.
type File struct {
	Path  string
	Index uint64
}

// List returns the checkpoint files in dir, by index ascending. Only
// regular files named as Name names them count: a crash during WriteFile
// can leave a temporary behind, and it must never be taken for an image.
func List(dir string) ([]File, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", dir, err)
	}
	var files []File
	for _, de := range des {
		index, ok := ParseName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		files = append(files, File{Path: filepath.Join(dir, de.Name()), Index: index})
	}
	// ReadDir sorts by name, and the fixed width makes that index order;
	// sort anyway so the contract does not rest on that.
	slices.SortFunc(files, func(a, b File) int {
		switch {
		case a.Index < b.Index:
			return -1
		case a.Index > b.Index:
			return 1
		}
		return 0
	})
	return files, nil
}

// WriteFile writes the image of v at index atomically to path (temporary
// file, fsync, rename, fsync of the directory; see disk.WriteAtomic). When
// it returns nil the image is durable and complete, which is what allows
// the journal to drop the records it covers. On error no temporary remains
// and no image is at path: when only the directory fsync failed, the image
// that was renamed into place is removed again, since nothing proves its
// entry durable (a later, successful fsync of the directory does not vouch
// for what a failed one dropped), and an image nobody may trust must not
// be loaded by the next Open or counted by the store's pruning.
func WriteFile(path string, v *materialize.View, index uint64, timeMs int64) (Header, error) {
	return WriteFileFS(disk.FS{}, path, v, index, timeMs)
}

// WriteFileFS is WriteFile through fsys, so the fsyncs of a store's
// checkpoints consult that store's fault seams (disk.FS.Faults).
func WriteFileFS(fsys disk.FS, path string, v *materialize.View, index uint64, timeMs int64) (Header, error) {
	var h Header
	err := fsys.WriteAtomic(path, func(w io.Writer) error {
		var err error
		h, err = Encode(w, v, index, timeMs)
		return err
	})
	var nd *disk.NotDurableError
	if errors.As(err, &nd) {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove the image that is not durable: %w", rerr))
		} else {
			// Best effort: if this fsync fails too, a crash may bring
			// the image back, complete (its data was fsynced), which is
			// no worse than a checkpoint that succeeded.
			_ = fsys.SyncDir(filepath.Dir(path))
		}
	}
	if err != nil {
		return Header{}, err
	}
	return h, nil
}

// ReadFile decodes the image at path, as Decode does. Knowing the file's
// size, it refuses a truncated or overlong file before reading the body.
// Errors from the image are *Error with Path set.
func ReadFile(path string, lim Limits) (Header, *materialize.View, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Header{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	size := int64(-1)
	if fi.Mode().IsRegular() {
		size = fi.Size()
	}
	h, v, err := decode(f, size, lim)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return h, nil, err
	}
	return h, v, nil
}
