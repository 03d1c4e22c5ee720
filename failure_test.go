package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
)

// TestWriteFailureRLimit makes the disk refuse a write for real: a child
// process lowers its RLIMIT_FSIZE below the next append, so write(2) fails
// with EFBIG part way. Every caller of the failed batch gets STORAGE,
// memory is unchanged, committed entries stay readable, and once the limit
// is lifted the same open store accepts writes and reopens cleanly.
func TestWriteFailureRLimit(t *testing.T) {
	if os.Getenv(envFsizeChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailureRLimit$", "-test.v")
		cmd.Env = append(os.Environ(), envFsizeChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	// A file-size overrun raises SIGXFSZ, which kills by default; ignored,
	// the write returns EFBIG instead, as a full disk returns ENOSPC.
	signalIgnoreXFSZ()
	f := newFixture(t, func(o *statestore.Options) { o.SegmentSize = 1 << 20 })
	const ns = "user/alice"
	for i := 0; i < 10; i++ {
		f.mustPut(alice, ns, fmt.Sprintf("committed-%d", i), docN(i))
	}
	before := f.s.Namespace(ns)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	// The limit sits just past the records, inside the tail's pre-written
	// zeros: RLIMIT_FSIZE refuses writes past an offset, whatever the
	// file's size, so the next batch fails part way as on a full disk.
	segs, _ := journal.ListSegments(f.dir + "/state-store/journal")
	data, err := os.ReadFile(segs[len(segs)-1].Path)
	if err != nil {
		t.Fatal(err)
	}
	tail := len(bytes.TrimRight(data, "\x00"))
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(tail) + 150, Max: lim.Max}); err != nil {
		t.Skipf("cannot lower RLIMIT_FSIZE: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = f.put(alice, ns, fmt.Sprintf("refused-%d", i), docN(100+i), statestore.Expect{})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		se := wantCode(t, err, statestore.Storage, "journal")
		if !errors.Is(se, journal.ErrStorage) {
			t.Fatalf("put %d: STORAGE error does not wrap the journal failure: %v", i, err)
		}
	}
	if got := f.s.Namespace(ns); got != before {
		t.Fatalf("failed batch changed memory: %+v -> %+v", before, got)
	}
	for i := 0; i < 10; i++ {
		if _, err := f.s.Get(ctx, alice, ns, fmt.Sprintf("committed-%d", i)); err != nil {
			t.Fatalf("committed entry unreadable after the failure: %v", err)
		}
	}
	// Still failing while the limit holds, and still changing nothing.
	_, err = f.put(alice, ns, "refused-again", docN(7), statestore.Expect{})
	wantCode(t, err, statestore.Storage, "journal")
	// Space comes back: the same store accepts writes, without a restart.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	e := f.mustPut(alice, ns, "after", docN(8))
	if e.Revision != before.Revision+1 {
		t.Fatalf("first write after recovery got revision %d, want %d", e.Revision, before.Revision+1)
	}
	f.reopen()
	if f.s.OpenReport().TailCut != nil {
		t.Fatalf("reopen found a torn tail the recovery should have cut: %v", f.s.OpenReport().TailCut)
	}
	if got := f.s.Namespace(ns); got.Revision != before.Revision+1 || got.Entries != 11 {
		t.Fatalf("after reopen: %+v, want revision %d with 11 entries", got, before.Revision+1)
	}
	for i := range errs {
		if _, err := f.s.Get(ctx, alice, ns, fmt.Sprintf("refused-%d", i)); !errors.Is(err, statestore.ErrNotFound) {
			t.Fatalf("refused write %d visible after reopen: %v", i, err)
		}
	}
}
