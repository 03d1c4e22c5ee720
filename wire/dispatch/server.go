package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wirestore"
)

// Options bound one session. Zero fields take the defaults.
type Options struct {
	// MaxInFlight is how many requests of one session run at once (default
	// 16). The next request is not read until one finishes.
	MaxInFlight int
	// MaxQueued bounds the outbound queue (default 256 messages): an answer
	// waits for room, a watch update finding none closes its watch with
	// BUFFER_OVERFLOW.
	MaxQueued int
	// IdleTimeout ends a session that stays idle that long: no frame
	// received, no request running, nothing queued to send, no watch open
	// (default DefaultIdleTimeout; negative: never). It ends after at least
	// IdleTimeout and at most twice it. A session that only watches is not
	// idle: its watches' own bounds (ACK_TIMEOUT, BUFFER_OVERFLOW) end a
	// watcher that stopped listening, and then its session idles.
	IdleTimeout time.Duration
	// MaxQueuedBytes bounds the bytes queued to clients over all the
	// Server's sessions (default DefaultMaxQueuedBytes), the message being
	// written included. Each session draws on it up to its share (the
	// bound divided by the sessions served, at least 64 KiB): over it, its
	// answers wait, its reading pauses until its queue drains, and a watch
	// update is refused, closing its watch with BUFFER_OVERFLOW. So
	// memory stays bounded however many sessions stall.
	MaxQueuedBytes int64
}

// DefaultMaxQueuedBytes is Options.MaxQueuedBytes's default: the store's
// own default MaxTotalBytes, so clients' queues cannot hold more than the
// store itself.
const DefaultMaxQueuedBytes = 64 << 20

const (
	defaultMaxInFlight = 16
	defaultMaxQueued   = 256
)

// DefaultIdleTimeout is Options.IdleTimeout's default: a client that
// keeps its session for later requests reconnects cheaply, and a
// forgotten one holds its connection for no longer.
const DefaultIdleTimeout = 5 * time.Minute

func (o Options) withDefaults() Options {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = defaultMaxInFlight
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = defaultMaxQueued
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxQueuedBytes <= 0 {
		o.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	return o
}

// ErrIdle is matched by the error Serve returns for a session ended by
// Options.IdleTimeout.
var ErrIdle = errors.New("dispatch: the session was idle")

// IdleError is Serve's error for a session ended by Options.IdleTimeout.
type IdleError struct{ Timeout time.Duration }

// Error names the bound.
func (e *IdleError) Error() string {
	return fmt.Sprintf("dispatch: session idle for %v (no frame, no request, nothing queued, no watch; Options.IdleTimeout)", e.Timeout)
}

// Unwrap returns ErrIdle.
func (e *IdleError) Unwrap() error { return ErrIdle }

// CauseCloser is a Conn that can tell its peer why the server ended the
// session: Serve calls CloseCause instead of Close when it ends the
// session for a reason of its own (an *IdleError), and the peer reads the
// reason instead of an unexplained close.
type CauseCloser interface {
	CloseCause(cause error) error
}

// Server dispatches sessions to one store, or answers them UNAVAILABLE when
// the store could not be opened. It is safe for concurrent use: serve each
// connection in its own goroutine.
type Server struct {
	store  *statestore.Store
	cause  error // set in unavailable mode
	opts   Options
	budget *byteBudget // Options.MaxQueuedBytes, over every session
}

// New returns a Server for an open store.
func New(store *statestore.Store, opts Options) *Server {
	if store == nil {
		panic("dispatch.New: nil store; use NewUnavailable with the Open error")
	}
	opts = opts.withDefaults()
	return &Server{store: store, opts: opts, budget: newByteBudget(opts.MaxQueuedBytes)}
}

// NewUnavailable returns a Server for a store that failed to open with
// cause: every request is answered UNAVAILABLE naming the cause, and
// Capabilities lists nothing. It touches no file.
func NewUnavailable(cause error, opts Options) *Server {
	if cause == nil {
		cause = errors.New("no store was opened")
	}
	opts = opts.withDefaults()
	return &Server{cause: cause, opts: opts, budget: newByteBudget(opts.MaxQueuedBytes)}
}

// QueuedBytes returns the bytes queued to clients now, over every session
// (Options.MaxQueuedBytes bounds it), and the sessions sharing them.
func (s *Server) QueuedBytes() (bytes int64, sessions int) { return s.budget.usage() }

// Capabilities returns the capabilities to advertise:
// statestore.Capability while the store is open, nothing otherwise.
func (s *Server) Capabilities() []string {
	if s.store == nil {
		return nil
	}
	return s.store.Capabilities()
}

func (s *Server) unavailable() error {
	return &statestore.Error{Code: statestore.Unavailable, Field: "store",
		Message: "the state store is unavailable: " + s.cause.Error(), Err: s.cause}
}

// ProtocolError ends a session whose input broke the framing: an oversized
// frame, a malformed length prefix, or a stream cut inside a frame.
type ProtocolError struct{ Err error }

// Error names the violation.
func (e *ProtocolError) Error() string { return "dispatch: session ended: " + e.Err.Error() }

// Unwrap returns the framing error.
func (e *ProtocolError) Unwrap() error { return e.Err }

// ErrEnded, as the cause of the cancellation of Serve's context
// (context.WithCancelCause, the cause wrapping it), ends the session after
// the messages already queued for it are sent, where any other
// cancellation drops them: a server that ends a session on purpose (its
// principal was removed) lets the peer read why, such as the
// AUTHORIZATION_LOST closures statestore.Store.SetPrincipal queued just
// before.
var ErrEnded = errors.New("dispatch: the server ended the session")

// endDrainTimeout bounds the sending of what is queued when a session is
// ended with ErrEnded: a peer that does not read it by then is cut off
// anyway, so a stalled peer cannot hold its session open.
const endDrainTimeout = 5 * time.Second

// Serve runs one session for principal p on conn until the input ends
// (io.EOF: requests still running are answered first, then Serve returns
// nil), the input breaks the framing (a *ProtocolError, after answering as
// the package documents), sending fails, or ctx is done. It closes conn and
// removes the session's watches before returning. A ctx cancelled for
// ErrEnded sends what is queued before closing conn.
func (s *Server) Serve(ctx context.Context, p statestore.Principal, conn Conn) error {
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	ss := &session{srv: s, p: p, ctx: ctx, inflight: make(map[uint64]struct{}),
		slots: make(chan struct{}, s.opts.MaxInFlight), readDone: make(chan error, 1), readTurn: make(chan struct{})}
	ss.idle.L = &ss.mu
	margin := s.opts.MaxInFlight
	// What an answer may take, reserved before its request runs: an
	// error's message, or an entry (its document and names, and their
	// envelope).
	ss.reserve = 4 << 10
	if s.store != nil {
		l := s.store.Limits()
		margin += 2 * l.MaxWatchesPerSession
		ss.reserve += int64(l.MaxDocumentBytes + l.MaxNamespaceBytes + l.MaxKeyBytes + quota.SchemaNameBytes + quota.OwnerBytes)
	}
	ss.out = newOutbox(s.opts.MaxQueued, margin, s.budget, conn.Send, cancel)
	if es, ok := conn.(EncodedSender); ok {
		ss.out.sendEncoded = es.SendEncoded
	}
	if bs, ok := conn.(BatchSender); ok {
		ss.out.sendBatch = bs.SendBatch
	}
	s.budget.join()

	writerDone := make(chan error, 1)
	drained := make(chan struct{}) // the writer is done: nothing queued is left to send
	go func() {
		err := ss.out.run()
		close(drained)
		writerDone <- err
	}()
	// Cancellation closes conn (unblocking Recv and Send) and wakes the
	// wait for in-flight requests below; a cancellation for ErrEnded
	// sends what is queued first (sendQueued).
	opened := make(chan struct{}) // ss.st and ss.refuse are set
	stopWatch := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrEnded) {
			ss.sendQueued(opened, drained)
		}
		if cc, ok := conn.(CauseCloser); ok && errors.Is(cause, ErrIdle) {
			cc.CloseCause(cause)
		} else {
			conn.Close()
		}
		ss.mu.Lock()
		ss.idle.Broadcast()
		ss.mu.Unlock()
		s.budget.wake() // a reader paused for the budget sees the end
	})
	defer stopWatch()

	switch {
	case s.store == nil:
		ss.refuse = s.unavailable()
	default:
		st, err := s.store.OpenSession(p, sink{ss})
		if err != nil {
			ss.refuse = err
		} else {
			ss.st = st
		}
	}
	close(opened)
	if s.opts.IdleTimeout > 0 {
		stopIdle := ss.watchIdle(s.opts.IdleTimeout, cancelCause)
		defer stopIdle()
	}

	// The reading moves from goroutine to goroutine (see read), and its
	// result comes back from whichever reads last. Serve's own goroutine
	// stays free to end the session when the input fails while a request
	// is still running.
	ss.threads.Add(1)
	go ss.read(conn)
	readErr := <-ss.readDone
	graceful := readErr == nil || isProtocolError(readErr)
	if graceful {
		// Answer what is running, and deliver the snapshots of watches
		// already accepted, before the session's watches go away.
		ss.wg.Wait()
		ss.mu.Lock()
		for len(ss.inflight) > 0 && ctx.Err() == nil {
			ss.idle.Wait()
		}
		ss.mu.Unlock()
	} else {
		cancel()
	}
	if ss.st != nil {
		ss.st.Close()
	}
	ss.out.close(!graceful)
	werr := <-writerDone
	cancel() // unblocks a request waiting in the store, dismisses the spare goroutines, and closes conn
	ss.threads.Wait()
	s.budget.leave(ss.out) // what was dropped, and the share
	conn.Close()
	var idle *IdleError
	switch {
	case errors.As(context.Cause(ctx), &idle):
		return idle
	case readErr != nil:
		return readErr
	case werr != nil:
		return fmt.Errorf("dispatch: send: %w", werr)
	}
	return nil
}

// sendQueued sends what is queued for a session being ended with
// ErrEnded: the store session's messages are handed to the outbox (the
// closures of a SetPrincipal just made among them), the outbox stops
// taking more, and the writer sends the rest, for at most endDrainTimeout.
// The sink never blocks (it queues or refuses), so Drain returns promptly.
func (ss *session) sendQueued(opened, drained <-chan struct{}) {
	<-opened
	if ss.st != nil {
		ss.st.Drain()
	}
	ss.out.close(false)
	select {
	case <-drained:
	case <-time.After(endDrainTimeout):
	}
}

// watchIdle checks the session every timeout and ends it, with an
// *IdleError as end's cause, at the first check that finds it idle (no
// request running, nothing queued, no watch) with no frame received since
// the previous check, which found it idle too. Nothing can make an idle
// session busy but a frame, so it was idle for the whole interval: a
// session ends after at least timeout and at most twice it. It returns
// the timer's stop.
func (ss *session) watchIdle(timeout time.Duration, end context.CancelCauseFunc) func() {
	var (
		mu      sync.Mutex // guards the rest against Stop and the next run
		t       *time.Timer
		stopped bool
		frames  = ss.frames.Load()
		wasIdle = true // the session starts idle
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(timeout, func() {
		mu.Lock()
		defer mu.Unlock()
		now := ss.frames.Load()
		idle := ss.idleNow()
		if now == frames && idle && wasIdle {
			end(&IdleError{Timeout: timeout})
			return
		}
		frames, wasIdle = now, idle
		if !stopped {
			t.Reset(timeout)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// idleNow reports whether the session has no request running, nothing
// queued or being sent, and no watch open.
func (ss *session) idleNow() bool {
	ss.mu.Lock()
	busy := len(ss.inflight) > 0
	ss.mu.Unlock()
	return !busy && ss.out.empty() && (ss.st == nil || ss.st.Watches() == 0)
}

func isProtocolError(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}

// session is one Serve call's state.
type session struct {
	srv    *Server
	p      statestore.Principal
	ctx    context.Context
	st     *statestore.Session // nil when refuse is set
	refuse error               // answers every request when set
	out    *outbox
	// reserve is what a request holds of the byte budget while it runs:
	// its answer's worst case.
	reserve int64
	slots   chan struct{}  // one per running request
	wg      sync.WaitGroup // running requests
	// threads counts the session's goroutines but Serve's and the writer:
	// the reader, the requests' and the spares.
	threads sync.WaitGroup
	// readDone receives the reading's result (see read) once.
	readDone chan error
	// readTurn hands the reading to a spare goroutine (see park).
	readTurn chan struct{}
	// frames counts the frames received, for watchIdle.
	frames atomic.Uint64

	mu       sync.Mutex
	idle     sync.Cond // signalled when inflight loses an id
	inflight map[uint64]struct{}
	spares   int // goroutines parked in park
}

// maxSpares bounds the goroutines a session keeps parked for the next
// hand-off of the reading. A serial client needs two: its next request
// arrives as soon as the answer is sent, often before the goroutine that
// sent it has parked, and then the one parked before is there to take the
// reading (with one, about one request in ten started a goroutine). More
// would only hold stacks for bursts.
const maxSpares = 2

// read is the body of the session's goroutines other than Serve's and
// the writer. It receives requests until the input ends, then sends the
// result to readDone: nil at a clean end of input, a *ProtocolError when
// the input broke the framing, or the receive error otherwise (the
// connection failed or was closed). One goroutine reads at a time.
//
// A request that has to run (it passed the envelope checks and got a slot)
// runs on the goroutine that read it, after handing the reading to another
// goroutine: the request starts without waiting for a goroutine to be
// scheduled, and the session still reads its next frame at once, so a
// request never waits behind another one of its session (an ack is
// answered while a put of the same session waits for its fdatasync). The
// goroutine then parks as a spare to take the reading over at the next
// hand-off: a goroutine started per request would grow a fresh stack to
// the store's depth every time.
func (ss *session) read(conn Conn) {
	defer ss.threads.Done()
	for {
		// A session over its share of the byte budget is not read from
		// until its queue drains: a peer that does not read stops being
		// read.
		ss.srv.budget.waitUnder(ss.ctx, ss.out)
		m, err := conn.Recv()
		ss.frames.Add(1)
		if err == nil {
			id, ok := ss.admit(m)
			if !ok {
				ss.done(conn, m).run()
				continue
			}
			ss.passReading(conn)
			ss.execute(id, m, ss.done(conn, m))
			if !ss.park() {
				return
			}
			continue
		}
		// errors.As's targets escape: declared past the success path, a
		// request does not allocate them.
		var de *framing.DecodeError
		var fe *framing.FrameSizeError
		switch {
		case errors.As(err, &de):
			ss.answer(invalidArgument(0, "frame", "%v", err))
			continue
		case errors.Is(err, io.EOF):
			err = nil
		case ss.ctx.Err() != nil:
			err = ss.ctx.Err()
		case errors.As(err, &fe), errors.Is(err, framing.ErrBadPrefix):
			ss.answer(invalidArgument(0, "frame", "%v; the stream cannot be resynchronised, so the session ends", err))
			err = &ProtocolError{Err: err}
		case errors.Is(err, io.ErrUnexpectedEOF):
			err = &ProtocolError{Err: err}
		default:
			err = fmt.Errorf("dispatch: receive: %w", err)
		}
		ss.readDone <- err
		return
	}
}

// done returns what tells a Releaser conn that nothing refers to m any
// more, to run when m was answered without running, or its request ran
// and its answer was sent (a Put's answer carries the caller's document,
// which is m's), or the answer was not accepted. For another Conn it does
// nothing.
func (ss *session) done(conn Conn, m *pb.ClientMessage) releasable {
	r, ok := conn.(Releaser)
	if !ok {
		return releasable{}
	}
	return releasable{r: r, m: m}
}

// passReading makes another goroutine the reader: a spare if one is
// parked, else a new one.
func (ss *session) passReading(conn Conn) {
	select {
	case ss.readTurn <- struct{}{}:
		// The spare is the reader now. Counting it out here, not when it
		// wakes, leaves room for this goroutine to park once its request
		// is answered.
		ss.mu.Lock()
		ss.spares--
		ss.mu.Unlock()
	default:
		ss.threads.Add(1)
		go ss.read(conn)
	}
}

// park waits, as one of at most maxSpares spares, for the reading to be
// handed over, and reports whether it was; false when there are spares
// enough or the session is ending, and the goroutine should end.
func (ss *session) park() bool {
	ss.mu.Lock()
	if ss.spares >= maxSpares {
		ss.mu.Unlock()
		return false
	}
	ss.spares++
	ss.mu.Unlock()
	select {
	case <-ss.readTurn:
		return true // passReading counted it out
	case <-ss.ctx.Done():
		ss.mu.Lock()
		ss.spares--
		ss.mu.Unlock()
		return false
	}
}

// answer queues an answer of the reading goroutine for the writer: the
// reader never writes to the connection itself, so a peer that writes
// without reading cannot hold up the reading behind its own unread answer.
// It fails only when the session is ending, and then nobody is left to read
// it.
func (ss *session) answer(m *pb.ServerMessage) { _ = ss.out.queue(m, nil) }

// requestID returns the request_id of m, and false when no request is set.
func requestID(m *pb.ClientMessage) (uint64, bool) {
	switch r := m.GetMessage().(type) {
	case *pb.ClientMessage_GetState:
		return r.GetState.GetRequestId(), true
	case *pb.ClientMessage_PutState:
		return r.PutState.GetRequestId(), true
	case *pb.ClientMessage_DeleteState:
		return r.DeleteState.GetRequestId(), true
	case *pb.ClientMessage_WatchState:
		return r.WatchState.GetRequestId(), true
	case *pb.ClientMessage_UnwatchState:
		return r.UnwatchState.GetRequestId(), true
	case *pb.ClientMessage_WatchStateAck:
		return r.WatchStateAck.GetRequestId(), true
	}
	return 0, false
}

// admit checks the envelope of m and answers what cannot run. It reports
// true when m is a request to run: its id is then in flight, it holds a
// slot, and execute must run it. Waiting for a slot stops the reading.
func (ss *session) admit(m *pb.ClientMessage) (uint64, bool) {
	id, ok := requestID(m)
	switch {
	case !ok:
		ss.answer(invalidArgument(0, "message", "the ClientMessage carries no request this server knows"))
		return 0, false
	case id == 0:
		ss.answer(invalidArgument(0, "request_id", "request_id must be nonzero"))
		return 0, false
	}
	ss.mu.Lock()
	_, busy := ss.inflight[id]
	if !busy {
		ss.inflight[id] = struct{}{}
	}
	ss.mu.Unlock()
	if busy {
		ss.answer(invalidArgument(0, "request_id", "request_id %d is already in flight on this session", id))
		return 0, false
	}
	if ss.refuse != nil {
		if ss.out.queue(errorMessage(id, ss.refuse), func() { ss.release(id) }) != nil {
			ss.release(id)
		}
		return 0, false
	}
	select {
	case ss.slots <- struct{}{}:
	case <-ss.ctx.Done():
		ss.release(id)
		return 0, false
	}
	// Room for the answer before the request runs: a session over its
	// share of the byte budget waits here, and is not read meanwhile.
	if !ss.srv.budget.acquire(ss.ctx, ss.out, ss.reserve) {
		<-ss.slots
		ss.release(id)
		return 0, false
	}
	ss.wg.Add(1)
	return id, true
}

// execute runs an admitted request, answers it and frees its slot. done
// runs once nothing refers to m any more (see session.done).
func (ss *session) execute(id uint64, m *pb.ClientMessage, done releasable) {
	defer func() {
		<-ss.slots
		ss.wg.Done()
	}()
	if m := ss.run(id, m); m != nil {
		ss.reply(id, m, done)
	} else {
		// The snapshot answers it, counted as it is queued; it was built
		// from the store's own entries.
		ss.srv.budget.release(ss.out, ss.reserve)
		done.run()
	}
}

// reply queues the answer to request id and ends its flight; done is
// released once the answer was sent, or at once if it was not accepted.
func (ss *session) reply(id uint64, m *pb.ServerMessage, done releasable) {
	if ss.out.reply(m, func() { ss.release(id) }, ss.reserve, done) != nil {
		ss.release(id) // the session is ending; nobody will see an answer
		done.run()
	}
}

func (ss *session) release(id uint64) {
	ss.mu.Lock()
	delete(ss.inflight, id)
	ss.idle.Broadcast()
	ss.mu.Unlock()
}

// run executes one request and returns its answer, or nil when the answer
// is delivered otherwise (a WatchState's snapshot, through the sink).
func (ss *session) run(id uint64, m *pb.ClientMessage) *pb.ServerMessage {
	ctx, store := ss.ctx, ss.srv.store
	// The store session follows the embedder's SetPrincipal (revocation).
	p := ss.st.Principal()
	switch r := m.GetMessage().(type) {
	case *pb.ClientMessage_GetState:
		e, err := store.Get(ctx, p, r.GetState.GetNamespace(), r.GetState.GetKey())
		if err != nil {
			return errorMessage(id, err)
		}
		return entryMessage(id, &e)
	case *pb.ClientMessage_PutState:
		e, err := store.Put(ctx, p, wirestore.StorePutRequest(r.PutState))
		if err != nil {
			return errorMessage(id, err)
		}
		return entryMessage(id, &e)
	case *pb.ClientMessage_DeleteState:
		rev, err := store.Delete(ctx, p, wirestore.StoreDeleteRequest(r.DeleteState))
		if err != nil {
			return errorMessage(id, err)
		}
		return resultMessage(&pb.StateStoreResult{RequestId: id, Result: &pb.StateStoreResult_DeletedRevision{DeletedRevision: rev}})
	case *pb.ClientMessage_WatchState:
		q := r.WatchState
		_, err := store.Watch(ctx, ss.st, statestore.WatchRequest{RequestID: id, WatchID: q.GetWatchId(), Namespace: q.GetNamespace(), KeyPrefix: q.GetKeyPrefix()})
		if err != nil {
			return errorMessage(id, err)
		}
		return nil
	case *pb.ClientMessage_UnwatchState:
		if err := store.Unwatch(ss.st, r.UnwatchState.GetWatchId()); err != nil {
			return errorMessage(id, err)
		}
		return resultMessage(&pb.StateStoreResult{RequestId: id, Result: &pb.StateStoreResult_Ok{Ok: &pb.StateStoreOk{}}})
	case *pb.ClientMessage_WatchStateAck:
		q := r.WatchStateAck
		if err := store.Ack(ss.st, q.GetWatchId(), q.GetAppliedSequence()); err != nil {
			return errorMessage(id, err)
		}
		return &pb.ServerMessage{Message: &pb.ServerMessage_AckResult{AckResult: &pb.StateWatchAckResult{
			RequestId: id, WatchId: q.GetWatchId(), AppliedSequence: q.GetAppliedSequence()}}}
	}
	panic("dispatch: run called without a request") // start checked requestID
}

// sink turns the registry's messages for this session into ServerMessages
// on the outbound queue, in the order the registry delivers them.
type sink struct{ ss *session }

// Deliver queues m. A snapshot answers its WatchState, which leaves flight.
func (k sink) Deliver(m watch.Message) error {
	switch m := m.(type) {
	case *watch.Snapshot:
		release := func() { k.ss.release(m.RequestID) }
		err := k.ss.out.force(SnapshotMessage(m), release)
		if err != nil {
			release()
		}
		return err
	case *watch.Update:
		return k.ss.out.offerUpdate(m)
	case *watch.Closed:
		return k.ss.out.force(ClosedMessage(m), nil)
	}
	return fmt.Errorf("dispatch: unknown watch message %T", m)
}

// OfferUpdates queues a commit's updates for the session from the
// publishing goroutine (watch.DirectSink): the outbox's writer is the
// session's one hand-off, and offerUpdates neither blocks nor calls the
// registry or the store.
func (k sink) OfferUpdates(us []*watch.Update) (int, error) { return k.ss.out.offerUpdates(us) }
