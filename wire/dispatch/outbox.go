package dispatch

import (
	"errors"
	"sync"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// errOutboxFull refuses a watch update: the peer is not reading fast
// enough. The registry closes the watch with BUFFER_OVERFLOW.
var errOutboxFull = errors.New("outbound queue full: the peer is not reading")

// errOutboxClosed refuses anything once the session is ending.
var errOutboxClosed = errors.New("session ended")

// outbox is the session's one ordered outbound channel. Messages are sent
// by one goroutine at a time (the sending token), in the order they were
// accepted: normally the writer goroutine (run) drains the queue, but an
// answer that finds the queue empty and nobody sending is sent by its own
// goroutine, saving a hand-off per request.
//
// limit bounds answers and updates in the queue; snapshots and closures may
// use margin more, because refusing them would leave a WatchState
// unanswered or a closure unreported.
type outbox struct {
	send   func(*pb.ServerMessage) error
	onFail func() // called once when a send fails

	mu            sync.Mutex
	room, ready   sync.Cond
	q             []*pb.ServerMessage
	head          int
	limit, margin int
	sending       bool  // the token: someone is inside send
	closed        bool  // nothing more is accepted
	abandoned     bool  // and what is queued is dropped
	err           error // the failed send's error
}

func newOutbox(limit, margin int, send func(*pb.ServerMessage) error, onFail func()) *outbox {
	o := &outbox{limit: limit, margin: margin, send: send, onFail: onFail}
	o.room.L, o.ready.L = &o.mu, &o.mu
	return o
}

func (o *outbox) lenLocked() int { return len(o.q) - o.head }

func (o *outbox) pushLocked(m *pb.ServerMessage) {
	if o.lenLocked() == 0 && !o.sending {
		// The writer waits for this; a sender holding the token wakes it
		// when done (sent).
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

// reply queues an answer, waiting for room, or sends it on the calling
// goroutine when nothing is queued or being sent. queued, if not nil, runs
// once the answer is accepted and before it can be sent, so that the
// request leaves flight before the client can see its answer.
func (o *outbox) reply(m *pb.ServerMessage, queued func()) error {
	return o.accept(m, queued, true)
}

// queue is reply for a goroutine that must not block on the connection:
// the answer always goes through the queue to the writer goroutine.
func (o *outbox) queue(m *pb.ServerMessage, queued func()) error {
	return o.accept(m, queued, false)
}

func (o *outbox) accept(m *pb.ServerMessage, queued func(), direct bool) error {
	o.mu.Lock()
	for !o.closed && o.lenLocked() >= o.limit {
		o.room.Wait()
	}
	if o.closed {
		o.mu.Unlock()
		return errOutboxClosed
	}
	if queued != nil {
		queued()
	}
	if !direct || o.sending || o.lenLocked() > 0 {
		o.pushLocked(m)
		o.mu.Unlock()
		return nil
	}
	// Idle: send it here, holding the token.
	o.sending = true
	o.mu.Unlock()
	o.sent(o.send(m))
	return nil
}

// empty reports whether nothing is queued or being sent.
func (o *outbox) empty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lenLocked() == 0 && !o.sending
}

// sent returns the token after a send.
func (o *outbox) sent(err error) {
	o.mu.Lock()
	o.sending = false
	if err != nil && o.err == nil {
		o.err = err
		o.closed, o.abandoned = true, true
		o.room.Broadcast()
		defer o.onFail()
	}
	if o.closed || o.lenLocked() > 0 {
		// Only then has the writer anything to do: waking it after every
		// direct send would cost a goroutine wake-up per answer.
		o.ready.Broadcast()
	}
	o.mu.Unlock()
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

// run is the writer goroutine: it sends queued messages until the outbox
// is closed and drained, or abandoned, and returns the failed send's
// error, if any.
func (o *outbox) run() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		for o.sending || (!o.closed && o.lenLocked() == 0) {
			o.ready.Wait()
		}
		if o.abandoned || o.lenLocked() == 0 {
			return o.err
		}
		m := o.q[o.head]
		o.q[o.head] = nil
		o.head++
		if o.head == len(o.q) {
			o.q, o.head = o.q[:0], 0
		}
		o.room.Signal()
		o.sending = true
		o.mu.Unlock()
		o.sent(o.send(m))
		o.mu.Lock()
	}
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
