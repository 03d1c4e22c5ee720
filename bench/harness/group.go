package harness

import (
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by [GroupCommitter.Commit] after Close was called.
var ErrClosed = errors.New("harness: group committer closed")

// DefaultQueue is the request queue capacity [NewGroupCommitter] uses when
// given zero: large enough that submitters never block on enqueueing at the
// writer counts qualify runs.
const DefaultQueue = 4096

// GroupCommitter is a faithful, minimal group committer over one append-only
// plain file. Submitters call [GroupCommitter.Commit]; a single goroutine
// waits for the first queued request, then takes, without blocking,
// everything else already queued, appends the whole batch with one write(2)
// and syncs it with one fdatasync(2), and then answers every submitter of the
// batch exactly once with the batch's outcome. A write or sync error is
// sticky: that batch and every later one fail with it, since the file's state
// is then unknown.
type GroupCommitter struct {
	file   *os.File
	fd     int
	reqs   chan *groupReq
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once
	pool   sync.Pool

	// Owned by the commit goroutine.
	buf   []byte
	batch []*groupReq
	err   error
	stats GroupStats
}

// GroupStats counts what a [GroupCommitter] did. Read it with
// [GroupCommitter.Stats] after Close.
type GroupStats struct {
	// Ops is the number of requests answered.
	Ops int64
	// Batches is the number of write+fdatasync rounds.
	Batches int64
	// Bytes is the number of bytes written successfully.
	Bytes int64
	// MaxBatch is the largest number of requests in one batch.
	MaxBatch int
}

// MeanBatch returns Ops/Batches, or 0 before the first batch.
func (s GroupStats) MeanBatch() float64 {
	if s.Batches == 0 {
		return 0
	}
	return float64(s.Ops) / float64(s.Batches)
}

type groupReq struct {
	data []byte
	done chan error // capacity 1: the commit goroutine never blocks on a reply
}

// NewGroupCommitter creates path (which must not exist yet), makes its
// directory entry durable, and starts the commit goroutine. queue is the
// request channel's capacity; zero means [DefaultQueue].
func NewGroupCommitter(path string, queue int) (*GroupCommitter, error) {
	f, fd, err := createDurable(path)
	if err != nil {
		return nil, err
	}
	if queue <= 0 {
		queue = DefaultQueue
	}
	g := &GroupCommitter{
		file:   f,
		fd:     fd,
		reqs:   make(chan *groupReq, queue),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	g.pool.New = func() any { return &groupReq{done: make(chan error, 1)} }
	go g.loop()
	return g, nil
}

// Commit appends p to the file as part of the next batch and returns once
// that batch has been written and fdatasync'ed, with the batch's error.
// p must not be modified until Commit returns. Commit is safe for concurrent
// use; it must not be called concurrently with or after Close (it then
// returns ErrClosed on a best-effort basis).
func (g *GroupCommitter) Commit(p []byte) error {
	select {
	case <-g.stop:
		return ErrClosed
	default:
	}
	r := g.pool.Get().(*groupReq)
	r.data = p
	select {
	case g.reqs <- r:
	case <-g.stop:
		r.data = nil
		g.pool.Put(r)
		return ErrClosed
	}
	err := <-r.done
	r.data = nil
	g.pool.Put(r)
	return err
}

// Close commits whatever is still queued, stops the commit goroutine and
// closes the file. Call it after every Commit has returned.
func (g *GroupCommitter) Close() error {
	g.once.Do(func() { close(g.stop) })
	<-g.exited
	if err := g.file.Close(); err != nil && g.err == nil {
		return err
	}
	return g.err
}

// Stats returns the committer's counters. Call it after Close.
func (g *GroupCommitter) Stats() GroupStats {
	<-g.exited
	return g.stats
}

func (g *GroupCommitter) loop() {
	defer close(g.exited)
	for {
		var first *groupReq
		select {
		case first = <-g.reqs:
		case <-g.stop:
			g.batch = g.drain(g.batch[:0])
			if len(g.batch) > 0 {
				g.commit()
			}
			return
		}
		g.batch = g.drain(append(g.batch[:0], first))
		g.commit()
	}
}

// drain appends every request already queued, without blocking.
func (g *GroupCommitter) drain(batch []*groupReq) []*groupReq {
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
}

// commit writes and syncs g.batch and answers each of its requests once.
func (g *GroupCommitter) commit() {
	buf := g.buf[:0]
	for _, r := range g.batch {
		buf = append(buf, r.data...)
	}
	g.buf = buf
	err := g.err
	if err == nil {
		if err = writeFull(g.fd, buf); err == nil {
			err = fdatasync(g.fd)
		}
		if err == nil {
			g.stats.Bytes += int64(len(buf))
		} else {
			g.err = err
		}
	}
	g.stats.Batches++
	g.stats.Ops += int64(len(g.batch))
	g.stats.MaxBatch = max(g.stats.MaxBatch, len(g.batch))
	for i, r := range g.batch {
		r.done <- err
		g.batch[i] = nil
	}
}

// writeFull issues write(2) until all of b is written, retrying on EINTR and
// continuing after a short write.
func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: "fd", Err: err}
		}
		if n == 0 {
			return &os.PathError{Op: "write", Path: "fd", Err: unix.EIO}
		}
		b = b[n:]
	}
	return nil
}

// fdatasync calls fdatasync(2) once, retrying only on EINTR.
func fdatasync(fd int) error {
	for {
		err := unix.Fdatasync(fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: "fd", Err: err}
		}
		return nil
	}
}
