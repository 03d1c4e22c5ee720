package raftlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// TestStableStoreRoundTrip: values and numbers survive a reopen; a key
// never set is empty and 0, as raft's contract says.
func TestStableStoreRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stable")
	s, err := OpenStable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 8 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-b" {
		t.Fatalf("LastVoteCand %q, %v", v, err)
	}
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("missing key: %q, %v", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Fatalf("missing number: %d, %v", v, err)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); err == nil {
		t.Fatal("a 6-byte value read as a uint64")
	}
}

// TestStableStoreCorruption: a file that fails its checks is a typed
// error naming where, never an empty store.
func TestStableStoreCorruption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	s, err := OpenStable(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{"flipped byte", func() []byte { b := bytes.Clone(data); b[12] ^= 1; return b }()},
		{"cut short", data[:len(data)-3]},
		{"empty", nil},
		{"appended byte", append(bytes.Clone(data), 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "stable")
			if err := os.WriteFile(path, c.b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenStable(path, nil)
			var ce *StableCorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrStableCorrupt) || ce.Path != path {
				t.Fatalf("got %v, want a StableCorruptError naming %s", err, path)
			}
		})
	}
}

// TestStableStoreFailedSetKeepsTheOldValue: a Set whose fsync fails
// reports it and leaves the old value, in memory and on disk.
func TestStableStoreFailedSetKeepsTheOldValue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stable")
	h := &fault.Hooks{}
	s, err := OpenStable(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatal(err)
	}
	restore := h.SetDiskSync(func(string) error { return syscall.EIO })
	if err := s.SetUint64([]byte("CurrentTerm"), 5); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Set with a failing fsync: %v", err)
	}
	restore()
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 4 {
		t.Fatalf("in memory %d after the failed Set", v)
	}
	s, err = OpenStable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 4 {
		t.Fatalf("on disk %d after the failed Set", v)
	}
}
