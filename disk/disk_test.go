package disk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	if held, err := Held(path); err != nil || held {
		t.Fatalf("fresh path held=%v err=%v", held, err)
	}
	l, err := LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockFile(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	if held, _ := Held(path); !held {
		t.Fatal("Held does not see the lock")
	}
	l.Release()
	l2, err := LockFile(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	os.WriteFile(path, []byte("old"), 0o644)
	err := WriteAtomic(path, func(w io.Writer) error { w.Write([]byte("half")); return errors.New("boom") })
	if err == nil {
		t.Fatal("write error not returned")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("failed write replaced the file: %q", b)
	}
	if err := WriteAtomic(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("content %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}
