package journal

import (
	"os"
	"sync/atomic"

	"github.com/tidwall/wal"
)

// seams are the journal's own test seams: steps the package's internal
// tests hold, fail or count on one journal (Options.seams), where package
// variables would do it to every journal of the test binary at once and
// keep the tests from running in parallel. Each is an atomic slot, so a
// test may install a step after Open while the journal's goroutines run;
// an empty slot, and a nil *seams (every real journal), run the real step.
type seams struct {
	// removeSegmentFile unlinks one segment for Reclaim: a file system
	// slow to free blocks, on demand.
	removeSegmentFile seam[func(path string) error]
	// writeBatch hands a batch to tidwall/wal: a Write held in the middle
	// of its batch, holding wmu and not mu.
	writeBatch seam[func(log *wal.Log, b *wal.Batch) error]
	// syncSegmentDir makes a new segment's directory entry durable:
	// counted (one per new segment, no other), or failed.
	syncSegmentDir seam[func(dir string) error]
	// writeZeros writes pre-written zeros once their range is reserved and
	// the locks are let go: held, or measured.
	writeZeros seam[func(f *os.File, n, off int64) error]
	// prewriteStepped is told, outside the lock, after every pre-write
	// step whether more may follow: how a test waits for the pre-writer
	// to go idle.
	prewriteStepped seam[func(more bool)]
	// availableBytes is the file system's free space as CheckReserve
	// sees it: a full disk, pretended.
	availableBytes seam[func(dir string) (int64, error)]
}

// seam is one replaceable step of a journal.
type seam[F any] struct{ p atomic.Pointer[F] }

// set installs f in place of the step and returns the function that puts
// back what was there.
func (s *seam[F]) set(f F) (restore func()) {
	old := s.p.Swap(&f)
	return func() { s.p.Store(old) }
}

// get returns the installed step; ok is false when the real one runs.
func (s *seam[F]) get() (f F, ok bool) {
	if p := s.p.Load(); p != nil {
		return *p, true
	}
	return f, false
}

// removeSegmentFile unlinks one segment file for removeSegments.
func (j *Journal) removeSegmentFile(path string) error {
	if s := j.opts.seams; s != nil {
		if f, ok := s.removeSegmentFile.get(); ok {
			return f(path)
		}
	}
	return os.Remove(path)
}

// writeBatch hands a batch to tidwall/wal.
func (j *Journal) writeBatch(log *wal.Log, b *wal.Batch) error {
	if s := j.opts.seams; s != nil {
		if f, ok := s.writeBatch.get(); ok {
			return f(log, b)
		}
	}
	return log.WriteBatch(b)
}

// syncSegmentDir makes a segment file that an append just created durable.
func (j *Journal) syncSegmentDir(dir string) error {
	if s := j.opts.seams; s != nil {
		if f, ok := s.syncSegmentDir.get(); ok {
			return f(dir)
		}
	}
	return j.fs.SyncDir(dir)
}

// writeZeros writes n zero bytes at off of the tail file, once the range
// is reserved and the locks let go.
func (j *Journal) writeZeros(f *os.File, n, off int64) error {
	if s := j.opts.seams; s != nil {
		if fn, ok := s.writeZeros.get(); ok {
			return fn(f, n, off)
		}
	}
	return writeZerosAt(f, n, off)
}

// prewriteStepped reports a finished pre-write step to a test waiting for
// one.
func (j *Journal) prewriteStepped(more bool) {
	if s := j.opts.seams; s != nil {
		if f, ok := s.prewriteStepped.get(); ok {
			f(more)
		}
	}
}

// availableBytes returns what the file system holding dir has free for an
// unprivileged writer.
func (j *Journal) availableBytes(dir string) (int64, error) {
	if s := j.opts.seams; s != nil {
		if f, ok := s.availableBytes.get(); ok {
			return f(dir)
		}
	}
	return statfsAvailable(dir)
}
