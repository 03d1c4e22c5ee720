package journal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/tidwall/wal"
	"golang.org/x/sys/unix"
)

// Pre-writing the tail. tidwall/wal appends to its tail segment, so every
// commit's fdatasync would also carry a file-size change (and, on a fresh
// extent, an allocation) through the file system's own journal. Overwriting
// blocks that were already written and synced carries data only, and on the
// disk the issue measured costs about 0.7x as much. So a background goroutine
// keeps the tail segment pre-written with zeros ahead of tidwall/wal's write
// offset, and fdatasyncs them, before any record needs the space.
//
// How that stays inside tidwall/wal's rules (v1.2.1, read in its source):
//
//   - tidwall/wal writes the tail through its own descriptor at the file
//     offset (O_WRONLY, seeked to the end at open, never O_APPEND), so
//     zeros written beyond that offset through a second descriptor do not
//     move its writes: records simply overwrite them. Zeros are only ever
//     written at or after the write offset: the range is chosen under wmu,
//     which every Write holds, and reserved (prewriter.busy) before wmu is
//     let go for the write(2) itself; a Write whose records would reach the
//     reserved range, and whatever else changes the tail file (a recovery,
//     a truncation, Close), waits for the reservation to end. So zeros can
//     never land on a record, and a Write that stays below them (nearly
//     all: the zeros run up to prewriteAhead ahead) never waits for a
//     write(2) of zeros (a 256 KiB one measured 85 us at the median and up
//     to 3 ms at 127 writers).
//   - wal.Open reads the whole tail segment and parses zeros as empty
//     entries that advance LastIndex. So the zero run is trimmed before
//     every wal.Open (Open, and the recovery after a failure) and at Close.
//   - A segment is sealed by the entry that brings it to SegmentSize, and
//     pre-writing never goes past SegmentSize, so that entry has overwritten
//     every pre-written byte: sealed segments hold records only, and a zero
//     byte at the end of a sealed segment stays corruption.
//   - tidwall/wal creates each new segment with O_TRUNC, so the next
//     segment cannot be prepared before it exists: the first commits after
//     a cycle append until the background catches up.
//
// After a crash the tail may end in zeros: pre-written space, or records
// whose data never reached the disk (their fdatasync never returned, so they
// were never acknowledged). Open trims a run of zero bytes that starts at an
// entry boundary and reaches the end of the last segment without a
// quarantine copy or a TailCut, counting it in Stats.Trimmed; the
// acknowledged floor still applies (zeros where acknowledged records were
// are corruption).

const (
	// prewriteChunk is the smallest zero write (with its fdatasync). A
	// commit whose fdatasync runs while a chunk is still dirty also waits
	// for that chunk, so at a low commit rate the chunk bounds what
	// pre-writing can add to one commit's latency.
	prewriteChunk = 256 << 10
	// prewriteRounds sizes the chunk to the commit rate: a chunk holds at
	// least this many batches of the size last written (see
	// prewriteChunkFor).
	prewriteRounds = 16
	// prewriteAhead is how far ahead of the write offset pre-writing
	// reaches (capped at the segment size), and the largest chunk; it
	// refills once less than half of it is left.
	prewriteAhead = 1 << 20
)

// prewriteChunkFor is the size of the next zero write when the last batch
// written took lastBatch bytes.
//
// Every chunk extends the file, and until the pre-writer's fdatasync has
// made that size change durable, a commit's fdatasync of the same file must
// carry it through the file system's journal too (and waits for the zero
// pages being written back): for that window commits are no longer
// overwrite-class. One chunk costs one such window, whatever its size. At a
// low commit rate a small chunk keeps the window short for the few commits
// inside it; at a high one fixed 256 KiB chunks came every two or three
// rounds (127 writers commit ~100 KB per fdatasync), so most commits fell
// inside a window. Sized to prewriteRounds batches, the chunk is still 256
// KiB for a lone writer (2 KB batches), and at 127 writers the rest of a 1
// MiB segment is one chunk. Measured at 127 writers: the journal alone's
// commit fdatasyncs (outside segment changes) took 275 us at the median
// instead of 520, and the store's throughput was 4.5% higher over fourteen
// alternating runs (standard error 1.7%).
func prewriteChunkFor(lastBatch int) int64 {
	return min(max(prewriteChunk, prewriteRounds*int64(lastBatch)), prewriteAhead)
}

// prewriter is the journal's pre-writing state; every field is under the
// journal's mu, and f is changed only under wmu as well.
type prewriter struct {
	kick chan struct{} // buffered 1: there may be space to prepare
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the goroutine returns
	f    *os.File      // write descriptor on the tail segment
	fgen uint64        // tailGen f was opened for
	end  int64         // zeros are written from the write offset up to end
	// synced is the part of end that is durable: space a commit can fill
	// with an overwrite-class fdatasync.
	synced int64
	// failedGen is tailGen+1 of a tail on which writing zeros failed (for
	// example the disk is full): pre-writing rests until the tail changes.
	failedGen uint64
	// busy is set (under wmu and mu) while zeros are being written
	// outside wmu, from busyFrom on, and cleared under mu, when idle (on
	// the journal's mu) is broadcast. It is atomic so a Write, which holds
	// wmu (no reservation can start), skips mu when nothing is under way.
	busy     atomic.Bool
	busyFrom int64
	idle     *sync.Cond
	// held is set from the write that opens a new tail segment until the
	// sync that acknowledges its first records returns: that commit
	// already carries the segment's costliest syncs (tidwall/wal's fsync
	// of the sealed file, the new file's data, size and blocks, the
	// directory entry), and zero chunks issued meanwhile queued on the
	// device ahead of them. Measured serially, with the marker also moved
	// off that commit: 4.0 and 3.1 ms at the median before, 2.4 and 1.8
	// after, where a plain commit took 0.3. The first commits of a segment
	// append either way.
	held bool
}

// writeZerosAt writes n zero bytes at off of the tail file (the real step
// of Journal.writeZeros): one pwritev of the shared 64 KiB block of zeros
// repeated, so a chunk of up to prewriteAhead costs one system call and no
// buffer of its own (each journal held a 1 MiB one: resident once written
// through, and counted by the collector as live heap).
func writeZerosAt(f *os.File, n, off int64) error {
	iov := make([][]byte, 0, (n+int64(len(zeros))-1)/int64(len(zeros)))
	for left := n; left > 0; left -= int64(len(zeros)) {
		iov = append(iov, zeros[:min(left, int64(len(zeros)))])
	}
	for len(iov) > 0 {
		w, err := unix.Pwritev(int(f.Fd()), iov, off)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if w == 0 {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		off += int64(w)
		// Drop what was written; a short write resumes mid-block.
		for w > 0 {
			if w >= len(iov[0]) {
				w -= len(iov[0])
				iov = iov[1:]
				continue
			}
			iov[0] = iov[0][w:]
			w = 0
		}
	}
	return nil
}

// allZero reports whether b is empty or holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// PrewrittenFrom reports whether data, a segment's bytes, holds nothing but
// zero bytes from off, an entry boundary, to its end (and at least one): the
// journal's pre-written space, which Open trims from the last segment
// without calling it damage. Tools use it to judge a segment as Open does.
func PrewrittenFrom(data []byte, off int64) bool {
	return off >= 0 && off < int64(len(data)) && allZero(data[off:])
}

// startPrewriter starts the background goroutine, unless pre-writing is
// off or the journal does not sync at all (then nothing is gained by
// preparing space).
func (j *Journal) startPrewriter() {
	if j.opts.NoSync || j.opts.NoPrewrite {
		return
	}
	j.pre.idle = sync.NewCond(&j.mu)
	j.pre.kick = make(chan struct{}, 1)
	j.pre.stop = make(chan struct{})
	j.pre.done = make(chan struct{})
	go j.prewriteLoop(j.pre.kick, j.pre.stop, j.pre.done)
	j.pre.kick <- struct{}{}
}

// stopPrewriter stops the goroutine and waits for it. The caller must not
// hold mu (the goroutine takes it).
func (j *Journal) stopPrewriter() {
	if j.pre.stop == nil {
		return
	}
	close(j.pre.stop)
	<-j.pre.done
}

// kickPrewriterLocked wakes the goroutine when less than half of
// prewriteAhead is left before the write offset reaches the zeros' end,
// unless a new segment's first sync is pending (held).
func (j *Journal) kickPrewriterLocked() {
	if j.pre.kick == nil || j.pre.held || j.pre.end-j.tailBytes >= prewriteAhead/2 {
		return
	}
	select {
	case j.pre.kick <- struct{}{}:
	default:
	}
}

// tailChangedLocked records that the tail segment is a different file, or
// was rewritten without its zeros (cycle, recovery, a front truncation that
// reached the tail): nothing of it is pre-written. (tidwall/wal's buffer
// for it gets its room from the next Write: growTailLocked.)
func (j *Journal) tailChangedLocked() {
	j.tailGen++
	j.dirSynced = 0 // no directory fsync is known to cover the new tail
	j.pre.end, j.pre.synced = 0, 0
	if j.pre.f != nil {
		// A prewriteStep still syncing it is safe: os.File defers the
		// close until that call returns.
		j.pre.f.Close()
		j.pre.f = nil
	}
}

// growTailLocked makes room in l's tail buffer for add more bytes before
// tidwall/wal appends them, so its append never reallocates the buffer
// (tidwall.go). Room is added in steps, at least doubling the buffer up to
// tailCapacity, instead of a whole segment at once: a journal that never
// fills a segment (a small store, or one just opened) holds no more than
// about twice what its tail holds, where a whole segment per journal was
// the largest part of a small store's heap. A buffer that grows is
// copied, at most about one copy per byte of the tail's first segment:
// later tails reuse the grown buffer (tailSpares), once the sealed
// segment's in-memory copy is dropped (unless Options.CacheSealed keeps
// it). The caller holds wmu.
//
// Unless Options.CacheSealed, the tail's buffer is instead a mapping of a
// whole tailCapacity (tailpages.go): its pages cost nothing until written,
// so it is given at once, and the pages already written are released.
func (j *Journal) growTailLocked(l *wal.Log, add int) {
	p := tailBuffer(l)
	if p == nil {
		return
	}
	if !j.opts.CacheSealed {
		j.pages.release(*p)
	}
	if cap(*p)-len(*p) >= add {
		return
	}
	if j.opts.CacheSealed {
		presizeTail(l, tailGrowth(cap(*p), len(*p)+add, j.tailCapacity()), &j.spares, nil)
		return
	}
	dropSealed(l)
	presizeTail(l, j.tailCapacity(), &j.spares, j.pages.mapBuffer)
	j.pages.adopt(*p)
	j.pages.release(*p)
}

// minTailBuffer is the least capacity growTailLocked gives a tail buffer:
// small beside a segment, large enough that a store's first writes do not
// regrow it at every batch.
const minTailBuffer = 64 << 10

// tailGrowth is the capacity a tail buffer of capacity have grows to when
// it needs need bytes: double or more, at least minTailBuffer, at most
// limit (a whole segment and its largest entry). A part of a batch needing
// more than limit seals its segment before it ends, and what follows the
// seal goes to the next tail's buffer.
func tailGrowth(have, need, limit int) int {
	return min(max(need, 2*have, minTailBuffer), limit)
}

// tailCapacity is the buffer capacity tidwall/wal's tail never outgrows: a
// whole segment plus the largest entry, the one that seals it.
func (j *Journal) tailCapacity() int {
	return j.opts.SegmentSize + uvarintLen(uint64(maxFrameSize(j.opts.Limits))) + maxFrameSize(j.opts.Limits)
}

func (j *Journal) prewriteLoop(kick <-chan struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-kick:
		}
		for {
			more := j.prewriteStep()
			j.prewriteStepped(more)
			if !more {
				break
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
}

// prewriteStep writes and syncs one chunk of zeros ahead of the write
// offset. It reports whether there may be more to do.
func (j *Journal) prewriteStep() bool {
	// wmu: no Write can move the offset past start meanwhile, and the
	// tail file stays the same one.
	j.wmu.Lock()
	j.mu.Lock()
	if j.closed || j.broken != nil || j.log == nil || j.pre.failedGen == j.tailGen+1 || j.pre.held {
		j.mu.Unlock()
		j.wmu.Unlock()
		return false
	}
	start := max(j.pre.end, j.tailBytes)
	goal := min(int64(j.opts.SegmentSize), j.tailBytes+prewriteAhead)
	if start >= goal {
		j.mu.Unlock()
		j.wmu.Unlock()
		return false
	}
	end := min(start+prewriteChunkFor(j.batchBytes), goal)
	f, err := j.prewriteFileLocked()
	if err == nil {
		j.pre.busyFrom = start
		j.pre.busy.Store(true)
	}
	j.mu.Unlock()
	j.wmu.Unlock()
	if err == nil {
		// Outside mu, so a Sync returning meanwhile is not held up, and
		// outside wmu, so a Write below start is not either.
		err = j.writeZeros(f, end-start, start)
	}
	j.mu.Lock()
	if j.pre.busy.Load() {
		j.pre.busy.Store(false)
		j.pre.idle.Broadcast()
	}
	if err != nil {
		// Nothing acknowledged is at stake: commits append as before.
		j.stats.PrewriteFailures++
		j.pre.failedGen = j.tailGen + 1
		j.mu.Unlock()
		return false
	}
	j.pre.end = end
	gen := j.tailGen
	j.mu.Unlock()

	// A fault seam of its own: a test failing commit syncs must not also
	// fail the background's, whose count and timing it does not control.
	err = syncFile(f, j.rings.background, j.opts.Faults.PrewriteSync)

	j.mu.Lock()
	defer j.mu.Unlock()
	if gen != j.tailGen || j.closed {
		return !j.closed
	}
	if err != nil {
		// A failed fdatasync may have dropped dirty pages of records in
		// the same file: treat it as a failed commit, so the next Write
		// cuts back to the last acknowledged record and reopens.
		j.stats.PrewriteFailures++
		j.failLocked(err)
		return false
	}
	j.pre.synced = end
	return true
}

// prewriteFileLocked returns a write descriptor on the tail segment.
func (j *Journal) prewriteFileLocked() (*os.File, error) {
	if j.pre.f != nil && j.pre.fgen == j.tailGen {
		return j.pre.f, nil
	}
	if j.pre.f != nil {
		j.pre.f.Close()
	}
	f, err := os.OpenFile(filepath.Join(j.dir, segmentName(j.tailStart)), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	j.pre.f, j.pre.fgen = f, j.tailGen
	return f, nil
}

// trimTailLocked cuts the pre-written zeros off the tail segment so that a
// closed journal's files hold records only, and makes the cut durable.
func (j *Journal) trimTailLocked() error {
	path := filepath.Join(j.dir, segmentName(j.tailStart))
	st, err := os.Stat(path)
	if err != nil || st.Size() <= j.tailBytes {
		return err
	}
	return j.fs.Truncate(path, j.tailBytes)
}

// waitPrewriteLocked waits until no zeros are being written: what changes
// the tail file or the wal handle calls it, under wmu (so no new write of
// zeros can start) and mu (which it lets go while it waits).
func (j *Journal) waitPrewriteLocked() {
	for j.pre.busy.Load() {
		j.pre.idle.Wait()
	}
}

// waitPrewriteBelow waits, under wmu, until the zeros being written (if any)
// start at or after end, the tail offset a batch about to be written
// reaches; cycled says the batch fills the tail segment to its end.
func (j *Journal) waitPrewriteBelow(end int64, cycled bool) {
	if !j.pre.busy.Load() {
		return
	}
	j.mu.Lock()
	for j.pre.busy.Load() && (cycled || end > j.pre.busyFrom) {
		j.pre.idle.Wait()
	}
	j.mu.Unlock()
}
