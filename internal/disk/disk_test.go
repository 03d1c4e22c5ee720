package disk

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

func TestLockIsExclusive(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestWriteAtomicSyncFailure: a failed fsync of the new file leaves the old
// file and no temporary; a failed fsync of the directory after the rename
// is a *NotDurableError naming the path (the new file is in place, and the
// caller decides whether it may stay).
func TestWriteAtomicSyncFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		failDir    bool   // the directory fsync fails, not the file's
		want       string // the content at path afterwards
		notDurable bool
	}{
		{"file fsync fails", false, "old", false},
		{"directory fsync fails", true, "new", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			target := path
			if c.failDir {
				target = dir
			}
			faults := &fault.Hooks{}
			faults.SetDiskSync(func(p string) error {
				if p == target {
					return syscall.EIO
				}
				return nil
			})
			err := FS{Faults: faults}.WriteAtomic(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err })
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("err %v, want EIO", err)
			}
			var nd *NotDurableError
			if got := errors.As(err, &nd); got != c.notDurable || (got && nd.Path != path) {
				t.Fatalf("NotDurableError %v (%v), want %v naming %s", got, err, c.notDurable, path)
			}
			if b, _ := os.ReadFile(path); string(b) != c.want {
				t.Fatalf("path holds %q, want %q", b, c.want)
			}
			if temps, _ := filepath.Glob(filepath.Join(dir, tempPattern(path))); len(temps) != 0 {
				t.Fatalf("temporaries left: %v", temps)
			}
		})
	}
}

// TestFSConsultsItsOwnFaults: every fsync an FS issues runs its DiskSync
// hook first, with the path being made durable, and a failing hook fails
// the call, wrapped; the real disk (a zero FS, which the package functions
// use) and any other FS never see that hook.
func TestFSConsultsItsOwnFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		call func(fsys FS, dir, file string) error
		want func(dir, file string) string // the path the hook must see
	}{
		{"SyncDir", func(fsys FS, dir, _ string) error { return fsys.SyncDir(dir) },
			func(dir, _ string) string { return dir }},
		{"Truncate", func(fsys FS, _, file string) error { return fsys.Truncate(file, 1) },
			func(_, file string) string { return file }},
		{"SyncFile", func(fsys FS, _, file string) error {
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return fsys.SyncFile(f)
		}, func(_, file string) string { return file }},
		{"WriteAtomic", func(fsys FS, _, file string) error {
			return fsys.WriteAtomic(file, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err })
		}, func(_, file string) string { return file }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "f")
			if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			faults := &fault.Hooks{}
			var seen []string
			faults.SetDiskSync(func(p string) error {
				seen = append(seen, p)
				return syscall.EIO
			})
			err := c.call(FS{Faults: faults}, dir, file)
			if !errors.Is(err, syscall.EIO) || len(seen) == 0 || seen[0] != c.want(dir, file) {
				t.Fatalf("with a failing hook: %v, hook saw %q; want EIO, first for %s", err, seen, c.want(dir, file))
			}
			seen = nil
			for _, other := range []FS{{}, {Faults: &fault.Hooks{}}} {
				if err := c.call(other, dir, file); err != nil || len(seen) != 0 {
					t.Fatalf("an FS without that hook: %v, hook ran for %q", err, seen)
				}
			}
		})
	}
}

// lockHolderEnv names the LOCK file a re-executed test binary holds for
// TestLockReleasedWhenHolderDies.
const lockHolderEnv = "KEEPPEEK_DISK_TEST_HOLD_LOCK"

// TestLockReleasedWhenHolderDies: a LOCK held by another process refuses
// this one, and once that process is killed (no Release, no cleanup) the
// kernel has dropped its lock, so the next opener takes it: a SIGKILLed
// store never leaves a stale lock.
func TestLockReleasedWhenHolderDies(t *testing.T) {
	if path := os.Getenv(lockHolderEnv); path != "" {
		// The holder: take the lock, say so, and wait to be killed.
		if _, err := LockFile(path); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	// Serial: it forks a child, and from fork to exec a child holds this
	// process's flocks, which a parallel test retaking its lock would find
	// taken.
	path := filepath.Join(t.TempDir(), "LOCK")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockReleasedWhenHolderDies$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path)
	stdin, err := cmd.StdinPipe() // kept open: the holder waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder process: %q %v", line, err)
	}
	if held, err := Held(path); err != nil || !held {
		t.Fatalf("Held while another process holds the lock: %v %v", held, err)
	}
	if _, err := LockFile(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockFile while another process holds it: %v, want ErrLocked", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := LockFile(path)
	if err != nil {
		t.Fatalf("LockFile after the holder was killed: %v", err)
	}
	l.Release()
}
