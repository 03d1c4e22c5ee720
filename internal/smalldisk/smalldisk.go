// Package smalldisk gives a test a file system it can fill: a tmpfs of a
// few pages mounted on a temporary directory, and a filler file that takes
// every byte the file system has left. It needs root (CI runs as root);
// without it the test is skipped, saying why.
//
// # Invariants
//
//  1. A mount lives exactly as long as its test (it is unmounted in
//     Cleanup, before the temporary directory is removed).
//     Code: Mount.
//     Tests: TestMountLivesAsLongAsItsTest.
//  2. Fill returns only once a write has failed with ENOSPC, so the file
//     system is full at that moment.
//     Code: Fill.
//     Tests: TestFillLeavesNoRoom, statestore.TestFullDiskNeverLocksTheOperatorOut.
package smalldisk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes (rounded up to pages by the kernel) on
// a new temporary directory and returns its path. It skips t when the test
// does not run as root, and fails it when the mount is refused anyway.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("smalldisk: mounting a tmpfs needs root (CI runs as root); skipping the full-disk test")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("smalldisk: mount a %d-byte tmpfs on %s: %v", size, dir, err)
	}
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("smalldisk: unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Filler is a file that took the free space of a file system.
type Filler struct {
	Path  string
	Bytes int64 // how many bytes it holds
}

// Fill writes the file name in dir until the file system refuses with
// ENOSPC, and returns it. Any other failure fails t.
func Fill(t testing.TB, dir, name string) *Filler {
	t.Helper()
	f := &Filler{Path: filepath.Join(dir, name)}
	w, err := os.OpenFile(f.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("smalldisk: create filler: %v", err)
	}
	defer w.Close()
	// Page-sized writes first, then single bytes, so not even the tail of
	// a partly used page is left.
	for _, chunk := range []int{4096, 1} {
		buf := make([]byte, chunk)
		for {
			n, err := w.Write(buf)
			f.Bytes += int64(n)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("smalldisk: fill %s: %v", f.Path, err)
			}
		}
	}
	return f
}

// Remove deletes the filler, giving its space back.
func (f *Filler) Remove(t testing.TB) {
	t.Helper()
	if err := os.Remove(f.Path); err != nil {
		t.Fatalf("smalldisk: remove filler: %v", err)
	}
}

// Free returns the bytes the file system holding dir has available.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("smalldisk: statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
