package walpeer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/bench/harness"
)

// TestSinkCommitsEveryPayloadInOrder: what the committer hands over lands
// as consecutive entries that a reopened log reads back unchanged.
func TestSinkCommitsEveryPayloadInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for b := 0; b < 20; b++ {
		var batch [][]byte
		for i := 0; i <= b%4; i++ {
			batch = append(batch, []byte(fmt.Sprintf("batch %d payload %d %s", b, i, bytes.Repeat([]byte("x"), 300))))
		}
		if err := s.Commit(batch); err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
	}
	if s.Entries() != uint64(len(want)) {
		t.Fatalf("%d entries, want %d", s.Entries(), len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(dir, &wal.Options{SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, w := range want {
		got, err := l.Read(uint64(i + 1))
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("entry %d: %q (%v), want %q", i+1, got, err, w)
		}
	}
	if _, err := Open(dir, 0); err == nil {
		t.Fatal("Open accepted a directory that already holds a log")
	}
}

// TestGroup runs the workload briefly and checks every answer is an entry.
func TestGroup(t *testing.T) {
	t.Parallel()
	r, err := Group(t.TempDir(), 100, 4, harness.Budget{OpsPerWriter: 25})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != NameGroup || r.Writers != 4 || r.OpsPerS <= 0 {
		t.Fatalf("result %+v", r)
	}
}
