package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Names of the serial baselines that write into space prepared ahead of
// time, beside NameRawAppend. They answer one question for the journal:
// does an fdatasync that carries no file-size or allocation change cost
// less than an appending one on this disk?
const (
	// NameRawOverwrite writes into a file pre-written with zeros (and
	// synced) before the timed loop: every fdatasync flushes data only.
	NameRawOverwrite = "raw_overwrite_fdatasync"
	// NameRawFallocate writes into a file whose blocks fallocate(2)
	// reserved before the timed loop: the size is already set, but the
	// blocks are unwritten extents that each write converts.
	NameRawFallocate = "raw_fallocate_fdatasync"
)

// RawOverwriteFdatasync measures the serial overwrite floor
// ("raw_overwrite_fdatasync"): a fresh file in dir is pre-written with
// n*payloadSize zero bytes and fsynced, then n times one pwrite(2) of
// payloadSize bytes at the next offset and one fdatasync(2), each timed. It
// checks that the payload landed, then removes the file.
func RawOverwriteFdatasync(dir string, payloadSize, n int) (Result, error) {
	return rawPrepared(NameRawOverwrite, dir, payloadSize, n, func(fd int, size int64) error {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size; {
			k := min(int64(len(zeros)), size-off)
			if _, err := unix.Pwrite(fd, zeros[:k], off); err != nil {
				return err
			}
			off += k
		}
		return nil
	})
}

// RawFallocateFdatasync measures the serial fallocate floor
// ("raw_fallocate_fdatasync"): as RawOverwriteFdatasync, but the space is
// reserved with fallocate(2) instead of written.
func RawFallocateFdatasync(dir string, payloadSize, n int) (Result, error) {
	return rawPrepared(NameRawFallocate, dir, payloadSize, n, func(fd int, size int64) error {
		return unix.Fallocate(fd, 0, 0, size)
	})
}

// rawPrepared creates a file, prepares n*payloadSize bytes of it with
// prepare, makes that durable (file and directory), and times n
// pwrite+fdatasync pairs over the prepared space.
func rawPrepared(name, dir string, payloadSize, n int, prepare func(fd int, size int64) error) (Result, error) {
	if payloadSize <= 0 || n <= 0 {
		return Result{}, fmt.Errorf("harness: %s: payload size %d and count %d must be positive", name, payloadSize, n)
	}
	path := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	fd := int(f.Fd())
	size := int64(n) * int64(payloadSize)
	if err := prepare(fd, size); err != nil {
		return Result{}, fmt.Errorf("harness: %s: prepare %d bytes: %w", name, size, err)
	}
	if err := unix.Fsync(fd); err != nil {
		return Result{}, err
	}
	if err := syncDir(dir); err != nil {
		return Result{}, err
	}
	payload := Payload(payloadSize)
	res, err := Serial(name, n, func(i int) error {
		off := int64(i) * int64(payloadSize)
		for w := 0; w < len(payload); {
			k, err := unix.Pwrite(fd, payload[w:], off+int64(w))
			if err != nil {
				return err
			}
			w += k
		}
		return fdatasync(fd)
	})
	if err != nil {
		return Result{}, err
	}
	last := make([]byte, payloadSize)
	if _, err := unix.Pread(fd, last, size-int64(payloadSize)); err != nil {
		return Result{}, err
	}
	if string(last) != string(payload) {
		return Result{}, fmt.Errorf("harness: %s: the last write did not land", name)
	}
	if err := checkSize(path, size); err != nil {
		return Result{}, err
	}
	res.Note = fmt.Sprintf("n=%d payload=%dB", n, payloadSize)
	return res, nil
}
