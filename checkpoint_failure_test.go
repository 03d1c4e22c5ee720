package statestore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/fault"
)

// TestCheckpointSyncFailure: a checkpoint whose fsync fails (the image's
// own, or its directory's after the rename) answers STORAGE naming the
// checkpoint, leaves no image or temporary behind that a later Open could
// load or the pruning could count, truncates nothing from the journal, and
// the store keeps serving; reopening starts from the previous image and
// loses nothing.
func TestCheckpointSyncFailure(t *testing.T) {
	cases := []struct {
		name string
		// fails says whether the disk fsync of path fails, given the
		// store's directory.
		fails func(root, path string) bool
	}{
		{"fsync of the image file", func(root, path string) bool {
			return strings.HasPrefix(filepath.Base(path), "checkpoint-")
		}},
		{"fsync of the directory after the rename", func(root, path string) bool {
			return path == root
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			faults := &fault.Hooks{}
			f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1; o.SegmentSize = 4096; o.Faults = faults })
			root := filepath.Join(f.dir, statestore.StoreDirName)
			const ns = "group/ckpt"
			for i := range 40 {
				f.mustPut(admin, ns, fmt.Sprintf("k%02d", i%10), docN(i))
			}
			if err := f.s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			good, _ := checkpoint.List(root)
			for i := range 40 {
				f.mustPut(admin, ns, fmt.Sprintf("k%02d", 10+i%10), docN(100+i))
			}
			journalFirst := f.journalFirst()
			var injected atomic.Int64
			restore := faults.SetDiskSync(func(path string) error {
				if c.fails(root, path) {
					injected.Add(1)
					return syscall.EIO
				}
				return nil
			})
			err := f.s.Checkpoint()
			restore()
			if injected.Load() == 0 {
				t.Fatal("no fsync failed: the case tests nothing")
			}
			se := wantCode(t, err, statestore.Storage, "checkpoint")
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("STORAGE error does not wrap the EIO: %v", err)
			}
			rev := f.s.Namespace(ns).Revision
			_, idx := wholeImage(t, f.s)
			if name := checkpoint.Name(idx); !strings.Contains(se.Message, name) {
				t.Fatalf("error %q does not name the checkpoint %s", se.Message, name)
			}
			after, _ := checkpoint.List(root)
			if fmt.Sprint(after) != fmt.Sprint(good) {
				t.Fatalf("images after the failed checkpoint: %v, want only the earlier %v", after, good)
			}
			if temps, _ := filepath.Glob(filepath.Join(root, ".checkpoint-*")); len(temps) != 0 {
				t.Fatalf("temporary files left: %v", temps)
			}
			if got := f.journalFirst(); got != journalFirst {
				t.Fatalf("journal starts at %d after the failed checkpoint, was %d", got, journalFirst)
			}
			// The store keeps serving, reads and writes.
			e := f.mustPut(admin, ns, "after", docN(999))
			if e.Revision != rev+1 {
				t.Fatalf("write after the failed checkpoint got revision %d, want %d", e.Revision, rev+1)
			}
			before, _ := wholeImage(t, f.s)
			f.reopen()
			if got := f.s.OpenReport().Checkpoint; got.Index != good[0].Index || len(got.Skipped) != 0 {
				t.Fatalf("reopen started from %+v, want the earlier image at %d", got, good[0].Index)
			}
			if got, _ := wholeImage(t, f.s); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatal("state after reopen differs from the state before")
			}
			// And a later checkpoint, with the disk healthy, succeeds.
			if err := f.s.Checkpoint(); err != nil {
				t.Fatalf("checkpoint after the disk recovered: %v", err)
			}
		})
	}
}

// TestBackgroundCheckpointFailureKeepsServing: automatic checkpoints that
// keep failing on fsync never fail or delay a write, and leave no image.
func TestBackgroundCheckpointFailureKeepsServing(t *testing.T) {
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = 2048, faults })
	root := filepath.Join(f.dir, statestore.StoreDirName)
	var injected atomic.Int64
	defer faults.SetDiskSync(func(path string) error {
		if strings.HasPrefix(filepath.Base(path), "checkpoint-") {
			injected.Add(1)
			return syscall.EIO
		}
		return nil
	})()
	const ns = "group/bg"
	for i := range 200 {
		f.mustPut(admin, ns, fmt.Sprintf("k%02d", i%30), docN(i))
	}
	// Close waits for a checkpoint still running, so the count is final.
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f.s = nil
	if injected.Load() == 0 {
		t.Fatal("no background checkpoint ran: the test tests nothing")
	}
	if files, _ := checkpoint.List(root); len(files) != 0 {
		t.Fatalf("images written although every fsync failed: %v", files)
	}
	f.open()
	if got := f.s.Namespace(ns).Revision; got != 200 {
		t.Fatalf("revision %d after reopen, want 200", got)
	}
}
