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

// GroupCommitter is a faithful, minimal group committer over a [Sink].
// Submitters call [GroupCommitter.Commit]; a single goroutine waits for the
// first queued request, then takes, without blocking, everything else
// already queued, hands the whole batch to the sink once, and then answers
// every submitter of the batch exactly once with the batch's outcome. A
// sink error is sticky: that batch and every later one fail with it, since
// the files' state is then unknown.
type GroupCommitter struct {
	sink   Sink
	reqs   chan *groupReq
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once
	pool   sync.Pool

	// Owned by the commit goroutine.
	datas [][]byte
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

// Sink makes batches durable for a [GroupCommitter].
type Sink interface {
	// Commit makes the payloads of one batch durable, in order, before it
	// returns. The slices are only valid during the call.
	Commit(batch [][]byte) error
	// Close releases the sink's files.
	Close() error
}

// fileSink is the plain-file sink: one write(2) of the concatenated batch
// and one fdatasync(2).
type fileSink struct {
	file *os.File
	fd   int
	buf  []byte
}

func (s *fileSink) Commit(batch [][]byte) error {
	buf := s.buf[:0]
	for _, p := range batch {
		buf = append(buf, p...)
	}
	s.buf = buf
	if err := writeFull(s.fd, buf); err != nil {
		return err
	}
	return fdatasync(s.fd)
}

func (s *fileSink) Close() error { return s.file.Close() }

// NewGroupCommitter creates path (which must not exist yet), makes its
// directory entry durable, and starts a commit goroutine appending to it.
// queue is the request channel's capacity; zero means [DefaultQueue].
func NewGroupCommitter(path string, queue int) (*GroupCommitter, error) {
	f, fd, err := createDurable(path)
	if err != nil {
		return nil, err
	}
	return NewSinkCommitter(&fileSink{file: f, fd: fd}, queue), nil
}

// NewSinkCommitter starts a commit goroutine handing batches to sink, which
// the committer closes on Close. queue is as for [NewGroupCommitter].
func NewSinkCommitter(sink Sink, queue int) *GroupCommitter {
	if queue <= 0 {
		queue = DefaultQueue
	}
	g := &GroupCommitter{
		sink:   sink,
		reqs:   make(chan *groupReq, queue),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	g.pool.New = func() any { return &groupReq{done: make(chan error, 1)} }
	go g.loop()
	return g
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
	if err := g.sink.Close(); err != nil && g.err == nil {
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

// commit hands g.batch to the sink and answers each of its requests once.
func (g *GroupCommitter) commit() {
	datas := g.datas[:0]
	n := 0
	for _, r := range g.batch {
		datas = append(datas, r.data)
		n += len(r.data)
	}
	g.datas = datas
	err := g.err
	if err == nil {
		if err = g.sink.Commit(datas); err == nil {
			g.stats.Bytes += int64(n)
		} else {
			g.err = err
		}
	}
	clear(datas)
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
