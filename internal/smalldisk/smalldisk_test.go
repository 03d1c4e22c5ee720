package smalldisk

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mounted reports whether dir is a mount point, from the kernel's table.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces escaped as \040.
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.ReplaceAll(fs[4], `\040`, " ") == dir {
			return true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}

// TestMountLivesAsLongAsItsTest mounts in a subtest: the tmpfs is there
// while the subtest runs, and once it has ended the directory is neither
// mounted nor left behind.
func TestMountLivesAsLongAsItsTest(t *testing.T) {
	// Serial: it mounts a tmpfs, which is seen by the whole system.
	var dir string
	t.Run("mount", func(t *testing.T) {
		dir = Mount(t, 64<<10)
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != 0x01021994 { // TMPFS_MAGIC
			t.Fatalf("%s is a file system of type %#x, want tmpfs", dir, st.Type)
		}
		if !mounted(t, dir) {
			t.Fatalf("%s is not a mount point", dir)
		}
	})
	if dir == "" {
		return // skipped: not root
	}
	if mounted(t, dir) {
		t.Fatalf("%s is still mounted after its test ended", dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind after its test ended: %v", dir, err)
	}
}

// TestFillLeavesNoRoom: once Fill returns, not one more byte fits, and
// removing the filler gives the space back.
func TestFillLeavesNoRoom(t *testing.T) {
	// Serial: it mounts a tmpfs, which is seen by the whole system.
	dir := Mount(t, 64<<10)
	f := Fill(t, dir, "filler")
	if f.Bytes == 0 {
		t.Fatal("the filler holds nothing")
	}
	if n := Free(t, dir); n != 0 {
		t.Fatalf("%d bytes free after Fill", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "one-more"), []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a one-byte write after Fill: %v, want ENOSPC", err)
	}
	f.Remove(t)
	if n := Free(t, dir); n == 0 {
		t.Fatal("no space back after removing the filler")
	}
}
