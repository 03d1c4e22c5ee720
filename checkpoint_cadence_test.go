package statestore_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/testdoc"
)

// TestCheckpointSpacingFollowsWritesDuringOne: journal bytes committed
// while a background checkpoint runs space the next one by
// CheckpointLagFactor times as many bytes, even past CheckpointBytes, and
// the next one still comes once the journal has grown that far. Without
// the lag term a fast writer starts the next image as soon as one ends.
func TestCheckpointSpacingFollowsWritesDuringOne(t *testing.T) {
	const ckptBytes = 8 << 10
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	faults := &fault.Hooks{}
	defer faults.SetDiskSync(func(path string) error {
		if _, ok := checkpoint.ParseName(filepath.Base(path)); ok {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})()
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = ckptBytes, faults })
	doc := testdoc.MediaIntent(specDocBytes, 1)
	n := 0
	put := func() {
		f.mustPut(admin, "group/cadence", fmt.Sprintf("k%02d", n%16), doc)
		n++
	}
	// Writes until the first checkpoint starts, then more while it is held
	// at its fsync: the lag.
	for started := false; !started; {
		put()
		select {
		case <-entered:
			started = true
		default:
		}
	}
	for range 40 {
		put()
	}
	close(release)
	statestore.WaitCheckpoints(f.s)
	if got := f.s.Stats().Checkpoints.Written; got != 1 {
		t.Fatalf("%d checkpoints after the held one, want 1: the next started before the journal grew %d times the lag", got, statestore.CheckpointLagFactor)
	}
	lag := statestore.CheckpointLag(f.s)
	if lag < 40*specDocBytes {
		t.Fatalf("lag %d bytes, want at least the %d bytes of the 40 puts made during the checkpoint", lag, 40*specDocBytes)
	}
	// Every put publishes a round, which is when the trigger is judged:
	// while one more frame stays under the spaced threshold nothing
	// starts...
	frame := int64(f.s.JournalStats().Bytes) / int64(n)
	for statestore.JournalAfterImage(f.s)+frame < statestore.CheckpointLagFactor*lag {
		put()
		statestore.WaitCheckpoints(f.s)
		if got := f.s.Stats().Checkpoints.Written; got != 1 {
			t.Fatalf("checkpoint %d started with %d journal bytes after the image, under %d times the lag (%d bytes)", got, statestore.JournalAfterImage(f.s), statestore.CheckpointLagFactor, lag)
		}
	}
	// ...and past it the next one comes.
	for i := 0; f.s.Stats().Checkpoints.Written == 1; i++ {
		if i > 2 {
			t.Fatalf("no checkpoint at %d journal bytes, over %d times the lag (%d bytes)", f.s.JournalStats().Bytes, statestore.CheckpointLagFactor, lag)
		}
		put()
		statestore.WaitCheckpoints(f.s)
	}
}
