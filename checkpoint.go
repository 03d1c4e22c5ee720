package statestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// Checkpoints bound replay and disk use. The store writes one, from a
// published (immutable) view, whenever the journal after the newest image
// holds Options.CheckpointBytes (or half the live value bytes, if larger);
// writers never wait for it. That measure is of the journal on disk, not of
// this process's writes: Open counts the frame bytes it replays after the
// image and checkpoints at once when they are already over, so a process
// that restarts before writing CheckpointBytes cannot grow the journal (or
// the next Open's replay) without bound. It keeps the newest two images
// and truncates the journal only up to the older one, so a damaged newest
// image falls back to the older image plus the journal.
//
// Under a heavy write load the threshold also follows what an image
// costs: it is at least ckptLagFactor times the journal bytes committed
// while the previous background checkpoint ran. An image costs CPU and
// disk in proportion to the live state, commits journal bytes in
// proportion to the write rate, so a fixed byte threshold lets a fast
// writer over a mid-sized state spend a large share of the machine
// re-encoding the same documents (127 writers over 127 documents
// measured 10% of the CPU in back-to-back checkpoints). With the lag
// term, writing images takes at most about 1/(1+ckptLagFactor) of the
// time while writes keep coming, and the journal after the newest image
// stays within ckptLagFactor checkpoint-durations of writes, and within
// ckptLagCap bytes whatever the durations: what
// replaying it costs at the next Open is bounded in time, as a fixed
// byte threshold bounds it for slower writers. (Replay runs about six
// times as fast as the fastest commits, so that journal replays in about
// three checkpoint-durations. At 127 writers on the two-core machine the
// issue measured, a checkpoint of 127 documents ran ~8 ms while ~500 KB
// were committed: the journal after the image then reaches ~8 MB, and
// the journal on disk twice that plus a segment.)

// DefaultCheckpointBytes is the journal growth that triggers a checkpoint.
const DefaultCheckpointBytes = 1 << 20

// ckptLagFactor spaces background checkpoints under load: the next one
// waits for this many times the journal bytes committed while the last
// one ran, so images take at most about a seventeenth of the time.
const ckptLagFactor = 16

// ckptLagCap bounds that spacing, so the journal after the newest image
// (what the next Open replays, and what the disk holds beyond the images)
// keeps a hard bound however slow one image was. A configured threshold,
// or half the live state, larger than it still wins.
const ckptLagCap = 8 << 20

// keepCheckpoints is how many images stay on disk.
const keepCheckpoints = 2

// checkpointer writes the store's checkpoint images and retires the
// journal they cover.
type checkpointer struct {
	root    string  // Dir/state-store, where the images live
	fs      disk.FS // the store's disk, with its fault seams
	jnl     *journal.Journal
	home    *journalBackend
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	every   int64 // Options.CheckpointBytes

	mu         sync.Mutex      // one image writer at a time
	unloadable map[string]bool // images Open skipped as damaged; set by Open, read-only after
	running    atomic.Bool     // a background checkpoint is in flight
	stopping   atomic.Bool     // Close has begun: no background one starts again
	// mark is the value journal Stats().Bytes had (or would have had)
	// when no journal byte followed the newest checkpoint: Stats().Bytes -
	// mark is the journal after the newest image. Stats() counts from
	// this Open, so Open sets it negative by the frame bytes it replayed.
	mark atomic.Int64
	// lag is how many journal bytes were committed while the last
	// background checkpoint ran: the write rate scaled by what one image
	// costs, which spaces the next one.
	lag atomic.Int64
	wg  sync.WaitGroup
}

// maybe starts a background checkpoint when the journal after the newest
// image has grown enough and none is running. It is called only while the
// store is open (at Open, after a published round, and from a finishing
// background checkpoint), so quiesce's wait covers it.
func (c *checkpointer) maybe() {
	if c.every < 0 {
		return
	}
	threshold := c.every
	if threshold == 0 {
		threshold = DefaultCheckpointBytes
	}
	_, live, _ := c.home.published().Totals()
	threshold = max(threshold, live/2, min(ckptLagFactor*c.lag.Load(), ckptLagCap))
	if c.journalAfterImage() < threshold {
		return
	}
	if !c.running.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		before := c.jnl.Stats().Bytes
		c.mu.Lock()
		err := c.writeLocked()
		c.mu.Unlock()
		c.lag.Store(int64(c.jnl.Stats().Bytes - before))
		c.running.Store(false)
		if err != nil {
			c.log.Error("state store: checkpoint failed", "err", err)
			return
		}
		// Commits published while this one ran found it running and
		// started none: look again, or a burst that ends during a
		// checkpoint would leave its growth in the journal until the next
		// write. (This goroutine's Done is still pending, so quiesce's
		// wait covers a checkpoint started here.)
		if !c.stopping.Load() {
			c.maybe()
		}
	}()
}

// journalAfterImage is the journal bytes after the newest image, which the
// trigger compares with its threshold.
func (c *checkpointer) journalAfterImage() int64 { return int64(c.jnl.Stats().Bytes) - c.mark.Load() }

// now writes a checkpoint at once, unless closed reports that the store
// has begun closing (checked under mu, which Close takes before it
// releases the LOCK).
func (c *checkpointer) now(closed func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := closed(); err != nil {
		return err
	}
	return c.writeLocked()
}

// writeLocked writes an image of the published state, then prunes. c.mu is held.
func (c *checkpointer) writeLocked() (err error) {
	start := time.Now()
	mark := int64(c.jnl.Stats().Bytes)
	v, idx := c.home.snapshot()
	defer func() { c.metrics.checkpointed(idx, start, c.clock.Now(), err) }()
	name := checkpoint.Name(idx)
	if _, err := checkpoint.WriteFileFS(c.fs, filepath.Join(c.root, name), v, idx, c.clock.Now().UnixMilli()); err != nil {
		// The journal keeps every record (nothing is pruned), so the
		// store goes on serving; the next checkpoint tries again.
		return &Error{Code: Storage, Field: "checkpoint",
			Message: fmt.Sprintf("checkpoint %s at journal index %d not written: %v", name, idx, err), Err: err}
	}
	c.mark.Store(mark)
	return c.pruneLocked()
}

// pruneLocked keeps the newest two images and truncates the journal up to
// the older of them: the journal must still be able to carry the older
// image forward if the newer one turns out unreadable.
func (c *checkpointer) pruneLocked() error {
	all, err := checkpoint.List(c.root)
	if err != nil {
		return err
	}
	// An image Open could not load is no fallback: counting it among the
	// two kept would let the journal be reclaimed up to it, so that the
	// records before it lived only in a damaged file. It stays where it
	// is (kpjournal repair moves it aside) and is not counted.
	var files []checkpoint.File
	for _, f := range all {
		if !c.unloadable[f.Path] {
			files = append(files, f)
		}
	}
	if len(files) > keepCheckpoints {
		// No directory fsync for the removals: an image that reappears
		// after a crash is only an older, unused fallback.
		for _, f := range files[:len(files)-keepCheckpoints] {
			if err := os.Remove(f.Path); err != nil {
				return err
			}
		}
		files = files[len(files)-keepCheckpoints:]
	}
	if len(files) < keepCheckpoints {
		return nil
	}
	return c.jnl.Reclaim(files[0].Index + 1)
}

// restore makes v the store's state, durably: an image of v at the
// journal's current index, every other image removed and the journal
// truncated behind it, then v published in place of the state. The caller
// holds the pipeline's exclusive section.
func (c *checkpointer) restore(v *materialize.View) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx := c.jnl.LastIndex()
	path := filepath.Join(c.root, checkpoint.Name(idx))
	if _, err := checkpoint.WriteFileFS(c.fs, path, v, idx, c.clock.Now().UnixMilli()); err != nil {
		return wrapErr(Storage, "checkpoint", err)
	}
	// From here the restored image is the newest and wins at open;
	// older images and the journal behind it only cost space.
	files, err := checkpoint.List(c.root)
	if err == nil {
		for _, f := range files {
			if f.Path != path {
				err = errors.Join(err, os.Remove(f.Path))
			}
		}
	}
	if err == nil {
		err = c.fs.SyncDir(c.root)
	}
	if err == nil {
		err = c.jnl.TruncateFront(idx + 1)
	}
	c.mark.Store(int64(c.jnl.Stats().Bytes))
	c.home.replace(v, idx)
	if err != nil {
		return &Error{Code: Storage, Field: "restore", Message: fmt.Sprintf("restored state is durable, cleanup failed: %v", err), Err: err}
	}
	return nil
}

// quiesce stops background checkpoints: it waits for those running (and
// any they start), then holds mu until the returned release, so an
// explicit checkpoint either finished before or refuses after.
func (c *checkpointer) quiesce() (release func()) {
	c.stopping.Store(true)
	c.wg.Wait()
	c.mu.Lock()
	return c.mu.Unlock
}
