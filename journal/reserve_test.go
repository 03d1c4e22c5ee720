package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

const testReserve = 64 << 10

// reserveFile returns the reserve's size and allocated bytes, or ok false
// when it does not exist.
func reserveFile(t *testing.T, dir string) (size, allocated int64, ok bool) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, ReserveFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), fi.Sys().(*syscall.Stat_t).Blocks * 512, true
}

// requireWholeReserve fails t unless dir holds a reserve of testReserve
// bytes, every one of them allocated.
func requireWholeReserve(t *testing.T, dir string) {
	t.Helper()
	size, alloc, ok := reserveFile(t, dir)
	if !ok || size != testReserve || alloc < testReserve {
		t.Fatalf("reserve: exists %v, size %d, allocated %d; want %d bytes, all allocated", ok, size, alloc, testReserve)
	}
}

// pretendFree makes the file system look, to the journal with seams s, as
// if it had free bytes left.
func pretendFree(s *seams, free int64) {
	s.availableBytes.set(func(string) (int64, error) { return free, nil })
}

// TestReserveWrittenOnceServed pins where the reserve comes from: Open only
// looks (a refused open writes nothing), MarkServed writes it whole with
// real blocks from any state it was left in, and tidwall/wal and replay
// never mistake it for a segment.
func TestReserveWrittenOnceServed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"missing", func(*testing.T, string) {}},
		{"short, as a crash while writing it leaves it", func(t *testing.T, path string) {
			if err := os.WriteFile(path, make([]byte, 100), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"sparse, holding no space", func(t *testing.T, path string) {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(testReserve); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.prepare(t, filepath.Join(dir, ReserveFile))
			before := fileBytes(t, dir)
			j, _, err := Open(dir, Options{SegmentSize: 4096, ReserveBytes: testReserve})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if got := fileBytes(t, dir)[ReserveFile]; string(got) != string(before[ReserveFile]) {
				t.Fatalf("Open rewrote the reserve (%d bytes, was %d): an open refused later must write nothing", len(got), len(before[ReserveFile]))
			}
			if !j.OnReserve() {
				t.Fatal("a journal without a whole reserve must count it spent until it is written")
			}
			if err := j.MarkServed(); err != nil {
				t.Fatal(err)
			}
			requireWholeReserve(t, dir)
			if j.OnReserve() || j.CheckReserve() != nil {
				t.Fatalf("reserve written but OnReserve %v, CheckReserve %v", j.OnReserve(), j.CheckReserve())
			}
			// Enough records for several segments: tidwall/wal must keep
			// ignoring the file as it cycles and reopens.
			if _, err := j.Append(records(1, 40)); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			segs, err := ListSegments(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range segs {
				if s.Name() == ReserveFile {
					t.Fatal("ListSegments lists the reserve")
				}
			}
			j2, _, err := Open(dir, Options{SegmentSize: 4096, ReserveBytes: testReserve})
			if err != nil {
				t.Fatal(err)
			}
			defer j2.Close()
			if got := replayAll(t, j2); len(got) != 40 || j2.OnReserve() {
				t.Fatalf("reopened: %d records (want 40), on reserve %v", len(got), j2.OnReserve())
			}
		})
	}
}

// TestNoReserve pins ReserveBytes < 0: no file, and a full disk changes
// nothing about what may be written.
func TestNoReserve(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _, err := Open(dir, Options{ReserveBytes: -1, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.MarkServed(); err != nil {
		t.Fatal(err)
	}
	faults.SetSync(func(string) error { return syscall.ENOSPC })
	if _, err := j.Append(records(1, 1)); !IsNoSpace(err) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if _, _, ok := reserveFile(t, dir); ok || j.OnReserve() || j.CheckReserve() != nil || j.Reserve() != (ReserveState{}) {
		t.Fatalf("no reserve configured, yet file %v, OnReserve %v, CheckReserve %v, state %+v", ok, j.OnReserve(), j.CheckReserve(), j.Reserve())
	}
}

// TestFullDiskSpendsReserve pins the reserve's life on a running journal:
// only a failure saying the disk is full gives it up (never an I/O error);
// the failed batch is cut back as after any failure; records still append
// afterwards, into the freed space; CheckReserve refuses, naming the
// reserve, until the file system has room for it twice over, and then
// writes it again.
func TestFullDiskSpendsReserve(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cause error
		spent bool
	}{
		{syscall.ENOSPC, true},
		{syscall.EDQUOT, true},
		{syscall.EIO, false},
	}
	for _, c := range cases {
		t.Run(c.cause.Error(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			faults, s := &fault.Hooks{}, &seams{}
			j, _, err := Open(dir, Options{ReserveBytes: testReserve, Faults: faults, seams: s})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if err := j.MarkServed(); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(records(1, 3)); err != nil {
				t.Fatal(err)
			}
			restore := faults.SetSync(func(string) error { return c.cause })
			_, err = j.Append(records(4, 2))
			restore()
			if !errors.Is(err, ErrStorage) || !errors.Is(err, c.cause) || j.LastIndex() != 3 {
				t.Fatalf("failed append: %v, last index %d; want a storage error wrapping %v at last index 3", err, j.LastIndex(), c.cause)
			}
			_, _, exists := reserveFile(t, dir)
			st := j.Reserve()
			if j.OnReserve() != c.spent || exists == c.spent || st.Spent != c.spent || (st.Releases == 1) != c.spent {
				t.Fatalf("after %v: OnReserve %v, file exists %v, state %+v; want spent %v", c.cause, j.OnReserve(), exists, st, c.spent)
			}
			if !c.spent {
				requireWholeReserve(t, dir)
				return
			}
			// The journal itself still appends: the store decides what
			// may spend the freed space.
			if first, err := j.Append(records(4, 1)); err != nil || first != 4 {
				t.Fatalf("append on reserve: first %d, %v", first, err)
			}

			pretendFree(s, 2*testReserve-1)
			err = j.CheckReserve()
			var re *ReserveError
			if !errors.Is(err, ErrOnReserve) || !errors.As(err, &re) || re.Free != 2*testReserve-1 ||
				!strings.Contains(err.Error(), "reserve") || !strings.Contains(err.Error(), "only deletes are accepted") {
				t.Fatalf("CheckReserve on a full disk: %v; want a *ReserveError naming the reserve and what is accepted", err)
			}
			if _, _, ok := reserveFile(t, dir); ok {
				t.Fatal("CheckReserve wrote the reserve without room for it")
			}

			pretendFree(s, 2*testReserve)
			if err := j.CheckReserve(); err != nil {
				t.Fatalf("CheckReserve with room: %v", err)
			}
			requireWholeReserve(t, dir)
			if st := j.Reserve(); st.Spent || st.Restores != 1 || j.OnReserve() {
				t.Fatalf("after restoring: %+v, OnReserve %v", st, j.OnReserve())
			}
		})
	}
}
