package dispatch

import (
	"errors"
	"sync"

	pb "github.com/keeppeek/statestore/proto/keeppeek/statestore/v1"
)

// errOutboxFull refuses a watch update: the peer is not reading fast
// enough. The registry closes the watch with BUFFER_OVERFLOW.
var errOutboxFull = errors.New("outbound queue full: the peer is not reading")

// errOutboxClosed refuses anything once the session is ending.
var errOutboxClosed = errors.New("session ended")

// outbox is the session's one ordered outbound queue, drained by the writer
// goroutine. limit bounds answers and updates; snapshots and closures may
// use margin more, because refusing them would leave a WatchState
// unanswered or a closure unreported.
type outbox struct {
	mu            sync.Mutex
	room, ready   sync.Cond
	q             []*pb.ServerMessage
	head          int
	limit, margin int
	closed        bool // nothing more is accepted
	abandoned     bool // and what is queued is dropped
}

func newOutbox(limit, margin int) *outbox {
	o := &outbox{limit: limit, margin: margin}
	o.room.L, o.ready.L = &o.mu, &o.mu
	return o
}

func (o *outbox) lenLocked() int { return len(o.q) - o.head }

func (o *outbox) pushLocked(m *pb.ServerMessage) {
	if o.lenLocked() == 0 {
		o.ready.Signal()
	}
	if o.head > 0 && o.head >= len(o.q)/2 {
		// Reclaim the consumed front, so a queue that never quite empties
		// does not grow its slice without bound.
		n := copy(o.q, o.q[o.head:])
		clear(o.q[n:])
		o.q, o.head = o.q[:n], 0
	}
	o.q = append(o.q, m)
}

// reply queues an answer, waiting for room. queued, if not nil, runs once
// the answer is queued and before the writer can take it, so that the
// request leaves flight before the client can see its answer.
func (o *outbox) reply(m *pb.ServerMessage, queued func()) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !o.closed && o.lenLocked() >= o.limit {
		o.room.Wait()
	}
	if o.closed {
		return errOutboxClosed
	}
	o.pushLocked(m)
	if queued != nil {
		queued()
	}
	return nil
}

// offer queues a watch update if there is room.
func (o *outbox) offer(m *pb.ServerMessage) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed:
		return errOutboxClosed
	case o.lenLocked() >= o.limit:
		return errOutboxFull
	}
	o.pushLocked(m)
	return nil
}

// force queues a snapshot or closure within the margin; queued is as for
// reply.
func (o *outbox) force(m *pb.ServerMessage, queued func()) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed:
		return errOutboxClosed
	case o.lenLocked() >= o.limit+o.margin:
		return errOutboxFull
	}
	o.pushLocked(m)
	if queued != nil {
		queued()
	}
	return nil
}

// next returns the oldest queued message, waiting for one; false once the
// outbox is closed and drained, or abandoned.
func (o *outbox) next() (*pb.ServerMessage, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !o.closed && o.lenLocked() == 0 {
		o.ready.Wait()
	}
	if o.abandoned || o.lenLocked() == 0 {
		return nil, false
	}
	m := o.q[o.head]
	o.q[o.head] = nil
	o.head++
	if o.head == len(o.q) {
		o.q, o.head = o.q[:0], 0
	}
	o.room.Signal()
	return m, true
}

// close stops accepting; with abandon, queued messages are dropped too.
func (o *outbox) close(abandon bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.abandoned = o.abandoned || abandon
	o.room.Broadcast()
	o.ready.Broadcast()
}
