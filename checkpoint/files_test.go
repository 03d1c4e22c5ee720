package checkpoint

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/materialize"
)

func TestNames(t *testing.T) {
	t.Parallel()
	for _, index := range []uint64{0, 1, 42, 1 << 40, math.MaxUint64} {
		name := Name(index)
		if len(name) != len("checkpoint-")+20+len(".ckpt") {
			t.Fatalf("Name(%d) = %q: not fixed width", index, name)
		}
		if got, ok := ParseName(name); !ok || got != index {
			t.Fatalf("ParseName(%q) = %d, %v", name, got, ok)
		}
	}
	if Name(7) != "checkpoint-00000000000000000007.ckpt" {
		t.Fatalf("Name(7) = %q", Name(7))
	}
	for _, bad := range []string{
		"", "checkpoint-.ckpt", "checkpoint-7.ckpt", "checkpoint-0000000000000000007.ckpt",
		"checkpoint-000000000000000000007.ckpt", "checkpoint-0000000000000000000x.ckpt",
		"checkpoint-+0000000000000000007.ckpt", "checkpoint-99999999999999999999.ckpt", // over MaxUint64
		"checkpoint-00000000000000000007.ckpt.tmp-123", ".checkpoint-00000000000000000007.ckpt.tmp-123",
		"Checkpoint-00000000000000000007.ckpt", "checkpoint-00000000000000000007.CKPT", "00000000000000000007",
	} {
		if i, ok := ParseName(bad); ok {
			t.Fatalf("ParseName(%q) accepted as %d", bad, i)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{
		Name(30), Name(2), Name(1 << 33),
		"." + Name(40) + ".tmp-123", // a temporary a crash left behind
		"checkpoint-5.ckpt", "notes.txt", "00000000000000000001",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, Name(50)), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{filepath.Join(dir, Name(2)), 2},
		{filepath.Join(dir, Name(30)), 30},
		{filepath.Join(dir, Name(1<<33)), 1 << 33},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if files, err := List(t.TempDir()); err != nil || len(files) != 0 {
		t.Fatalf("empty dir: %v, %v", files, err)
	}
	if _, err := List(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v := sampleView(t)
	path := filepath.Join(dir, Name(17))
	h, err := WriteFile(path, v, 17, 99)
	if err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{Name(17)}) {
		t.Fatalf("directory holds %v, want only the checkpoint", names)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, encode(t, v, 17, 99)) {
		t.Fatal("file differs from Encode's output")
	}
	rh, got, err := ReadFile(path, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if rh != h || h.Index != 17 || h.TimeMs != 99 {
		t.Fatalf("ReadFile header %+v, WriteFile header %+v", rh, h)
	}
	sameView(t, got, v)

	// Replacing an image, and a failed write, leave no temporaries; the
	// failed write leaves the old image in place.
	b := newBuilder(t)
	b.put("user/z", "k", schemaMI, "z", 0, []byte(`{}`))
	if _, err := WriteFile(path, b.v, 18, 100); err != nil {
		t.Fatal(err)
	}
	broken, err := materialize.Restore(map[string]materialize.Namespace{"a": {}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFile(path, broken, 19, 101); err == nil {
		t.Fatal("WriteFile of a view Encode refuses succeeded")
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{Name(17)}) {
		t.Fatalf("directory holds %v, want only the checkpoint", names)
	}
	rh, got, err = ReadFile(path, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if rh.Index != 18 {
		t.Fatalf("index %d after a failed replacement, want 18", rh.Index)
	}
	sameView(t, got, b.v)

	if _, _, err := ReadFile(filepath.Join(dir, "missing"), testLimits); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestWriteFileFsyncFailureLeavesNoImage: when an fsync that makes the
// image durable fails, the file's or the directory's after the rename,
// WriteFileFS answers the failure and leaves neither the image nor a
// temporary: an image nobody may trust must not be loaded or counted.
func TestWriteFileFsyncFailureLeavesNoImage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		dir  bool // the directory's fsync fails, not the file's
	}{
		{"fsync of the image file", false},
		{"fsync of the directory after the rename", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, Name(21))
			target := path
			if c.dir {
				target = dir
			}
			faults := &fault.Hooks{}
			var injected int
			faults.SetDiskSync(func(p string) error {
				if p == target && injected == 0 {
					injected++
					return syscall.EIO
				}
				return nil
			})
			_, err := WriteFileFS(disk.FS{Faults: faults}, path, sampleView(t), 21, 5)
			if !errors.Is(err, syscall.EIO) || injected != 1 {
				t.Fatalf("WriteFileFS with a failing fsync: %v (%d failures injected), want EIO", err, injected)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Fatalf("directory holds %v after the failed write, want nothing", names)
			}
			// The same FS, the disk healthy again, writes the image.
			if _, err := WriteFileFS(disk.FS{Faults: faults}, path, sampleView(t), 21, 5); err != nil {
				t.Fatal(err)
			}
			if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{Name(21)}) {
				t.Fatalf("directory holds %v, want the image", names)
			}
		})
	}
}
