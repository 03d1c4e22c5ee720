package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	"github.com/keeppeek/statestore/wire/framing"
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
// unanswered or a closure unreported. Their bytes are counted in the
// Server's byte budget b from the moment they are accepted until their
// send returns (or the session ends).
type outbox struct {
	send func(*pb.ServerMessage) error
	// sendEncoded, when the Conn is an EncodedSender, sends a watch
	// update in its wire form; without it, updates are built as messages
	// and sent by send.
	sendEncoded func(framing.Encoded) error
	// sendBatch, when the Conn is a BatchSender, lets the writer send
	// every message that queued up while it was busy with one write.
	sendBatch func([]framing.Encoded) error
	onFail    func() // called once when a send fails
	b         *byteBudget
	bytes     int64       // what this outbox holds of b; guarded by b.mu
	shut      atomic.Bool // closed, for b's waiters

	mu            sync.Mutex
	room, ready   sync.Cond
	q             []queued
	head          int
	limit, margin int
	sending       bool  // the token: someone is inside send
	closed        bool  // nothing more is accepted
	abandoned     bool  // and what is queued is dropped
	err           error // the failed send's error

	// The writer's scratch (run alone touches them): the messages taken
	// from the queue for one write, and their wire forms.
	taken []queued
	batch []framing.Encoded
	// offerUpdates' scratch; the registry's lock serialises its calls.
	offers []queued
}

// A batch of the writer's is bounded, so that one write holds neither an
// unbounded buffer nor the peer's reader for long: at most this many
// messages, and it stops after the message that reaches this many bytes.
const (
	maxBatchMessages = 64
	maxBatchBytes    = 64 << 10
)

// queued is a message in the queue and the bytes it holds of the budget:
// m, or a watch update u to send in its wire form (sendEncoded).
type queued struct {
	m *pb.ServerMessage
	u *watch.Update
	n int64
	// done, when set, is released once the message's send returned (an
	// answer that refers to its request's memory: see Releaser); a
	// message the session drops unsent never releases it, and its memory
	// is left to the collector.
	done releasable
}

// releasable is a request message to release (Releaser) once nothing refers
// to it; the zero value releases nothing. Two words, not a closure: no
// allocation per request.
type releasable struct {
	r Releaser
	m *pb.ClientMessage
}

// run releases the message, if there is one.
func (d releasable) run() {
	if d.r != nil {
		d.r.Release(d.m)
	}
}

// deliver sends q on the connection.
func (o *outbox) deliver(q *queued) error {
	if q.u != nil {
		return o.sendEncoded((*encodedUpdate)(q))
	}
	return o.send(q.m)
}

// encoded is q's wire form, for a batch.
func (q *queued) encoded() framing.Encoded {
	if q.u != nil {
		return (*encodedUpdate)(q)
	}
	return framing.Message(q.m)
}

// deliverTaken sends the messages run took from the queue, with one write
// when there are several and the Conn can, and returns the bytes they
// held of the budget.
func (o *outbox) deliverTaken() (int64, error) {
	var n int64
	for _, q := range o.taken {
		n += q.n
	}
	if len(o.taken) == 1 {
		return n, o.deliver(&o.taken[0])
	}
	for i := range o.taken {
		o.batch = append(o.batch, o.taken[i].encoded())
	}
	err := o.sendBatch(o.batch)
	clear(o.batch)
	o.batch = o.batch[:0]
	return n, err
}

// encodedUpdate is a queued watch update as the framing's Encoded: the
// bytes of UpdateMessage(u), spliced from the watch's own fields and the
// encoding its event's updates share (wire.AppendCheckedUpdate). It points
// at the writer's o.taken, which outlives the send: the Conns use an
// Encoded only within the call.
type encodedUpdate queued

// Size is the encoding's length, which updateQueued measured (and checked
// that it encodes) when the update was queued, and the budget counts.
func (e *encodedUpdate) Size() int { return int(e.n) }

// AppendTo appends the encoding to b.
func (e *encodedUpdate) AppendTo(b []byte) ([]byte, error) {
	return wire.AppendCheckedUpdate(b, e.u), nil
}

func newOutbox(limit, margin int, b *byteBudget, send func(*pb.ServerMessage) error, onFail func()) *outbox {
	o := &outbox{limit: limit, margin: margin, b: b, send: send, onFail: onFail}
	o.room.L, o.ready.L = &o.mu, &o.mu
	return o
}

func (o *outbox) lenLocked() int { return len(o.q) - o.head }

func (o *outbox) pushLocked(m queued) {
	if o.lenLocked() == 0 && !o.sending {
		// The writer waits for this; a sender holding the token wakes it
		// when done (sent).
		o.ready.Signal()
	}
	o.compactLocked()
	o.q = append(o.q, m)
}

// compactLocked reclaims the consumed front, so a queue that never quite
// empties does not grow its slice without bound.
func (o *outbox) compactLocked() {
	if o.head > 0 && o.head >= len(o.q)/2 {
		n := copy(o.q, o.q[o.head:])
		clear(o.q[n:])
		o.q, o.head = o.q[:n], 0
	}
}

// reply queues an answer, waiting for room, or sends it on the calling
// goroutine when nothing is queued or being sent. queued, if not nil, runs
// once the answer is accepted and before it can be sent, so that the
// request leaves flight before the client can see its answer. reserved is
// what the request already holds of the byte budget (see
// session.admit): the answer takes its place without waiting.
// done is released once the answer's send returned; not when reply fails
// (the answer was not accepted) or the session drops it unsent.
func (o *outbox) reply(m *pb.ServerMessage, queued func(), reserved int64, done releasable) error {
	return o.accept(m, queued, true, reserved, done)
}

// queue is reply for a goroutine that must not block on the connection:
// the answer always goes through the queue to the writer goroutine. It
// holds nothing of the budget yet, and waits for its room there.
func (o *outbox) queue(m *pb.ServerMessage, queued func()) error {
	return o.accept(m, queued, false, 0, releasable{})
}

func (o *outbox) accept(m *pb.ServerMessage, queued func(), direct bool, reserved int64, done releasable) error {
	// Bytes first, on the budget's lock alone (the lock order forbids
	// waiting for them under o.mu).
	n := int64(proto.Size(m))
	if reserved > 0 {
		o.b.adjust(o, n-reserved)
	} else if !o.b.acquire(context.Background(), o, n) {
		return errOutboxClosed
	}
	o.mu.Lock()
	for !o.closed && o.lenLocked() >= o.limit {
		o.room.Wait()
	}
	if o.closed {
		o.mu.Unlock()
		o.b.release(o, n)
		return errOutboxClosed
	}
	if queued != nil {
		queued()
	}
	if !direct || o.sending || o.lenLocked() > 0 {
		q := queuedMsg(m, n)
		q.done = done
		o.pushLocked(q)
		o.mu.Unlock()
		return nil
	}
	// Idle: send it here, holding the token.
	o.sending = true
	o.mu.Unlock()
	err := o.send(m)
	done.run()
	o.b.release(o, n)
	o.sent(err)
	return nil
}

func queuedMsg(m *pb.ServerMessage, n int64) queued { return queued{m: m, n: n} }

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
		o.shut.Store(true)
		o.room.Broadcast()
		o.b.wake()
		defer o.onFail()
	}
	if o.closed || o.lenLocked() > 0 {
		// Only then has the writer anything to do: waking it after every
		// direct send would cost a goroutine wake-up per answer.
		o.ready.Broadcast()
	}
	o.mu.Unlock()
}

// offerUpdate queues a watch update if there is room, in the queue and in
// the byte budget. On a Conn that sends encoded messages it is queued as
// it is, and sent in its wire form: the event's shared part is encoded
// once for every watch it reaches (the first offer encodes it), and the
// budget counts the same bytes as for the message. Otherwise, or when it
// does not encode (a string not UTF-8, which the message's send then
// reports), it is queued as its message.
func (o *outbox) offerUpdate(u *watch.Update) error { return o.offerQueued(o.updateQueued(u)) }

// updateQueued is u as queued: encoded when the Conn can send it so, and
// it encodes; else its message.
func (o *outbox) updateQueued(u *watch.Update) queued {
	if o.sendEncoded != nil {
		if n, err := wire.UpdateSize(u); err == nil {
			return queued{u: u, n: int64(n)}
		}
	}
	m := UpdateMessage(u)
	return queuedMsg(m, int64(proto.Size(m)))
}

// offer queues the watch update m as a message (offerQueued).
func (o *outbox) offer(m *pb.ServerMessage) error {
	return o.offerQueued(queuedMsg(m, int64(proto.Size(m))))
}

// offerQueued queues q, a watch update, if there is room, in the queue and
// in the byte budget.
func (o *outbox) offerQueued(q queued) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed:
		return errOutboxClosed
	case o.lenLocked() >= o.limit, !o.b.tryAcquire(o, q.n):
		return errOutboxFull
	}
	o.pushLocked(q)
	return nil
}

// offerUpdates queues the longest prefix of us there is room for, in the
// queue and in the byte budget, with one turn of each lock and at most one
// wake-up of the writer, and returns its length; the error says why the
// next was refused.
func (o *outbox) offerUpdates(us []*watch.Update) (int, error) {
	if len(us) == 0 {
		return 0, nil
	}
	// Sized (and the commit's shared part encoded) before the lock, so
	// that the writer is not held up by it.
	qs := o.offers[:0]
	for _, u := range us {
		qs = append(qs, o.updateQueued(u))
	}
	defer func() {
		clear(qs)
		o.offers = qs[:0]
	}()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, errOutboxClosed
	}
	room := min(len(qs), o.limit-o.lenLocked())
	n := o.b.tryAcquireEach(o, qs[:max(room, 0)])
	if n > 0 {
		if o.lenLocked() == 0 && !o.sending {
			o.ready.Signal()
		}
		o.compactLocked()
		o.q = append(o.q, qs[:n]...)
	}
	if n < len(qs) {
		return n, errOutboxFull
	}
	return n, nil
}

// force queues a snapshot or closure within the margin; queued is as for
// reply.
func (o *outbox) force(m *pb.ServerMessage, queued func()) error {
	n := int64(proto.Size(m))
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed:
		return errOutboxClosed
	case o.lenLocked() >= o.limit+o.margin:
		return errOutboxFull
	}
	o.b.force(o, n)
	o.pushLocked(queuedMsg(m, n))
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
		o.takeLocked()
		if len(o.taken) == 1 {
			o.room.Signal()
		} else {
			o.room.Broadcast()
		}
		o.sending = true
		o.mu.Unlock()
		n, err := o.deliverTaken()
		for _, q := range o.taken {
			q.done.run()
		}
		clear(o.taken)
		o.taken = o.taken[:0]
		o.b.release(o, n)
		o.sent(err)
		o.mu.Lock()
	}
}

// takeLocked moves the queue's front into o.taken: one message, or, on a
// BatchSender, as many as one batch holds.
func (o *outbox) takeLocked() {
	var bytes int64
	for o.lenLocked() > 0 && (len(o.taken) == 0 || (o.sendBatch != nil && len(o.taken) < maxBatchMessages && bytes < maxBatchBytes)) {
		m := o.q[o.head]
		o.q[o.head] = queued{}
		o.head++
		o.taken = append(o.taken, m)
		bytes += m.n
	}
	if o.head == len(o.q) {
		o.q, o.head = o.q[:0], 0
	}
}

// close stops accepting; with abandon, queued messages are dropped too.
func (o *outbox) close(abandon bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.shut.Store(true)
	o.abandoned = o.abandoned || abandon
	o.room.Broadcast()
	o.ready.Broadcast()
	o.b.wake()
}
