package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/wsconn"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wirestore"
)

// errConnEnded is a request that found its connection already ended:
// nothing was sent, so it may go on the next connection.
var errConnEnded = errors.New("client: the connection ended before the request was sent")

// conn is one WebSocket connection: one session on the server. Its reader
// goroutine routes every ServerMessage: answers by request_id to the
// waiting call, watch messages by watch_id to the watch's route.
type conn struct {
	c     *Client
	index int // of ep in the client's endpoints
	ep    *endpoint
	ws    *websocket.Conn
	life  context.Context // cancelled once the connection ended
	stop  context.CancelFunc
	// writeMu keeps one write at a time, the one writeDeadline bounds by
	// RequestTimeout: one timer for the connection's life instead of a
	// context per write, which the WebSocket library would hook a
	// cancellation into (see internal/wsconn).
	writeMu       sync.Mutex
	writeDeadline *wsconn.Deadline

	mu      sync.Mutex
	dead    bool  // ended: nothing more is registered
	cause   error // why the client dropped it, if it did
	retired error // set by retire: cn ends once no call waits on it
	pending map[uint64]*call
	routes  map[string]route // by watch_id, from the WatchState until the watch ends
}

// call is one request waiting for its answer.
type call struct {
	done    chan reply // nil: nobody waits (an acknowledgement, a best-effort unwatch)
	what    string     // names the request in the log when nobody waits
	route   route      // a WatchState's route, else nil
	watchID string
}

// reply is what a call receives: the answer, or why none will come.
type reply struct {
	res *pb.StateStoreResult
	ack *pb.StateWatchAckResult
	err error
}

// result returns the StateStoreResult of a request, or its error.
func (r reply) result() (*pb.StateStoreResult, error) {
	switch {
	case r.err != nil:
		return nil, r.err
	case r.res == nil:
		return nil, &statestore.Error{Code: statestore.Unavailable, Field: "answer",
			Message: "the server answered a request with an acknowledgement result"}
	case r.res.GetError() != nil:
		return nil, wirestore.StoreError(r.res.GetError())
	}
	return r.res, nil
}

// route receives the messages of one watch on one connection, from the
// connection's reader, in arrival order. Its methods must not block: they
// enqueue.
type route interface {
	// snapshot is the WatchState's answer, before the waiting call sees it.
	snapshot(requestID uint64, m *pb.StateStoreWatchSnapshot)
	update(m *pb.StateStoreWatchUpdate)
	closed(m *pb.StateStoreWatchClosed)
	// lost: the connection ended, and the watch with it.
	lost()
}

func newConn(c *Client, index int, ws *websocket.Conn) *conn {
	life, stop := context.WithCancel(context.Background())
	return &conn{c: c, index: index, ep: &c.cfg.endpoints[index], ws: ws, life: life, stop: stop,
		writeDeadline: wsconn.NewDeadline(c.cfg.RequestTimeout, func() { ws.CloseNow() }),
		pending:       map[uint64]*call{}, routes: map[string]route{}}
}

// register records a call (and a WatchState's route) before its request is
// sent, so its answer finds it.
func (cn *conn) register(id uint64, cl *call) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dead {
		return errConnEnded
	}
	if cl.route != nil {
		if _, dup := cn.routes[cl.watchID]; dup {
			return &statestore.Error{Code: statestore.InvalidArgument, Field: "watch_id",
				Message: fmt.Sprintf("watch_id %q is already in use on this connection", cl.watchID)}
		}
		cn.routes[cl.watchID] = cl.route
	}
	cn.pending[id] = cl
	return nil
}

// waitingCalls are the calls that wait for an answer, reused with their
// channel: a call leaves the pool in conn.call and goes back once nothing
// refers to it, which is when its caller has received its reply (whoever
// sent it took the call out of pending first, and sends at most once), or
// when abandon took it out of pending itself (then nobody will send).
var waitingCalls = sync.Pool{New: func() any { return &call{done: make(chan reply, 1)} }}

// newCall returns a waiting call from the pool.
func newCall(r route, watchID string) *call {
	cl := waitingCalls.Get().(*call)
	cl.route, cl.watchID = r, watchID
	return cl
}

// recycle puts a waiting call whose reply was received, or that was
// abandoned, back in the pool; its channel is empty.
func (cl *call) recycle() {
	cl.route, cl.watchID = nil, ""
	waitingCalls.Put(cl)
}

// call sends one request and waits for its answer up to ctx, and up to
// timeout when it is not nil (a request's RequestTimeout: context's
// DeadlineExceeded). r, when set, receives the messages of the watch
// watchID that the request opens.
func (cn *conn) call(ctx context.Context, timeout <-chan time.Time, build func(id uint64) *pb.ClientMessage, r route, watchID string) (reply, error) {
	id := cn.c.requestIDs.Add(1)
	cl := newCall(r, watchID)
	if err := cn.register(id, cl); err != nil {
		cl.recycle() // never registered
		return reply{}, err
	}
	// A failed write drops the connection, whose reader then fails every
	// pending call, this one included.
	_ = cn.write(build(id))
	var cause error
	select {
	case rep := <-cl.done:
		cl.recycle()
		return rep, rep.err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timeout:
		cause = context.DeadlineExceeded
	}
	if !cn.abandon(id) {
		rep := <-cl.done // answered meanwhile: the answer wins
		cl.recycle()
		return rep, rep.err
	}
	cl.recycle() // out of pending: nobody sends to it
	if r != nil {
		// The server may still register the watch: remove it.
		cn.forget(watchID)
	}
	return reply{}, &statestore.Error{Code: statestore.Unavailable, Field: "context",
		Message: fmt.Sprintf("no answer from %s before the deadline (%v); the outcome of a write is unknown: it may have been applied", cn.ep.name, cause),
		Err:     cause}
}

// notify sends a request whose answer nobody waits for (the reader logs a
// refusal): an acknowledgement, a best-effort unwatch.
func (cn *conn) notify(what string, build func(id uint64) *pb.ClientMessage) {
	id := cn.c.requestIDs.Add(1)
	if cn.register(id, &call{what: what}) != nil {
		return
	}
	_ = cn.write(build(id))
}

// forget stops routing the watch and unwatches it, best effort.
func (cn *conn) forget(watchID string) {
	cn.dropRoute(watchID)
	cn.notify("unwatch "+watchID, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_UnwatchState{UnwatchState: &pb.UnwatchState{RequestId: id, WatchId: watchID}}}
	})
}

// abandon forgets a call whose caller stopped waiting, and reports whether
// it was still pending (false: its answer is in its channel).
func (cn *conn) abandon(id uint64) bool {
	cn.mu.Lock()
	if _, ok := cn.pending[id]; !ok {
		cn.mu.Unlock()
		return false
	}
	delete(cn.pending, id)
	cn.mu.Unlock()
	cn.endIfRetired()
	return true
}

// retire moves the client off cn after a request on it was answered
// UNAVAILABLE (a cluster node without a leader, or behind the leader and
// not catching up): no new call picks cn, and cn ends once no call waits
// on it (at once if none does; at most RequestTimeout later), so the
// client reconnects from the next endpoint and every watch re-snapshots
// there. Unlike leave, the calls in flight get their answers: cn's node
// still serves, and a write forwarded from it may commit. With one
// endpoint there is nowhere else to go, and cn stays.
func (cn *conn) retire(cause error) {
	if len(cn.c.cfg.endpoints) < 2 {
		return
	}
	cn.mu.Lock()
	if cn.dead || cn.retired != nil {
		cn.mu.Unlock()
		return
	}
	cn.retired = fmt.Errorf("%s answered UNAVAILABLE (%w): moving to another endpoint", cn.ep.name, cause)
	cn.mu.Unlock()
	cn.c.cfg.Logger.Warn("state store node answered UNAVAILABLE; moving to another endpoint", "endpoint", cn.ep.name, "error", cause)
	cn.c.detach(cn, cause)
	if cn.endIfRetired() {
		return
	}
	cn.c.wg.Add(1)
	go func() {
		defer cn.c.wg.Done()
		t := time.NewTimer(cn.c.cfg.RequestTimeout) // the calls in flight have their answers or their deadlines by then
		defer t.Stop()
		select {
		case <-t.C:
			cn.mu.Lock()
			cause := cn.retired
			cn.mu.Unlock()
			cn.abort(cause)
		case <-cn.life.Done():
		}
	}()
}

// endIfRetired ends a retired cn on which no call waits any more (a
// notification's answer is nobody's), and reports whether it did.
func (cn *conn) endIfRetired() bool {
	cn.mu.Lock()
	cause := cn.retired
	if cause == nil || cn.dead {
		cn.mu.Unlock()
		return false
	}
	for _, cl := range cn.pending {
		if cl.done != nil {
			cn.mu.Unlock()
			return false
		}
	}
	cn.mu.Unlock()
	cn.abort(cause)
	return true
}

// take removes and returns the call answered by res (nil if abandoned). A
// refused WatchState opened no watch, so its route goes too.
func (cn *conn) take(id uint64, res *pb.StateStoreResult) *call {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cl := cn.pending[id]
	if cl == nil {
		return nil
	}
	delete(cn.pending, id)
	if cl.route != nil && res.GetWatch() == nil && cn.routes[cl.watchID] == cl.route {
		delete(cn.routes, cl.watchID)
	}
	return cl
}

func (cn *conn) routeOf(watchID string) route {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.routes[watchID]
}

func (cn *conn) dropRoute(watchID string) route {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	r := cn.routes[watchID]
	delete(cn.routes, watchID)
	return r
}

// write sends one message within RequestTimeout. The write does not take
// the caller's context: the WebSocket library closes a connection whose
// write is cancelled, and one caller's deadline must not end the session
// every other call and watch shares. A write missing RequestTimeout closes
// the connection (writeDeadline), as the library does for a context that
// times out; so does one whose connection ended (the reader's end), which
// then fails at once.
func (cn *conn) write(m *pb.ClientMessage) error {
	bp := wsconn.GetBuffer()
	defer wsconn.PutBuffer(bp) // the library is done with the bytes when Write returns
	b, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], m)
	*bp = b
	if err != nil {
		return err
	}
	cn.writeMu.Lock()
	cn.writeDeadline.Start()
	err = cn.ws.Write(context.Background(), websocket.MessageBinary, b)
	missed := cn.writeDeadline.Stop()
	cn.writeMu.Unlock()
	if err != nil {
		if missed {
			err = errors.Join(context.DeadlineExceeded, err)
		}
		err = fmt.Errorf("write of %d bytes (timeout %v): %w", len(b), cn.c.cfg.RequestTimeout, err)
		cn.abort(err)
		return err
	}
	return nil
}

// abort drops the connection for cause, as a network failure would; its
// reader then ends it.
func (cn *conn) abort(cause error) {
	cn.mu.Lock()
	if cn.cause == nil {
		cn.cause = cause
	}
	cn.mu.Unlock()
	cn.ws.CloseNow()
}

// read is the connection's reader: it routes every message, then ends the
// connection when reading fails.
func (cn *conn) read() {
	defer cn.c.wg.Done()
	var err error
	// One buffer for every message: Unmarshal copies what it keeps.
	bp := wsconn.GetBuffer()
	defer wsconn.PutBuffer(bp)
	for {
		// A context that is never done, so the library hooks nothing into
		// each read (internal/wsconn): the connection is closed (CloseNow)
		// before life is cancelled, which is what ends this read.
		typ, r, rerr := cn.ws.Reader(context.Background())
		var data []byte
		if rerr == nil {
			data, rerr = wsconn.ReadAll(r, (*bp)[:0])
			*bp = data
		}
		if rerr != nil {
			err = rerr
			break
		}
		if typ != websocket.MessageBinary {
			cn.c.cfg.Logger.Warn("state store sent a text message; ignored", "endpoint", cn.ep.name, "bytes", len(data))
			continue
		}
		m := &pb.ServerMessage{}
		if uerr := proto.Unmarshal(data, m); uerr != nil {
			// An answer may be lost in it: only a new session is sure.
			err = fmt.Errorf("a server message of %d bytes does not decode: %w", len(data), uerr)
			cn.abort(err)
			break
		}
		cn.route(m)
	}
	cn.end(err)
}

// route hands one message to whoever waits for it.
func (cn *conn) route(m *pb.ServerMessage) {
	log := cn.c.cfg.Logger
	switch x := m.GetMessage().(type) {
	case *pb.ServerMessage_Result:
		res := x.Result
		if res.GetRequestId() == 0 {
			log.Warn("state store refused a message it could not attribute to a request",
				"endpoint", cn.ep.name, "error", wirestore.StoreError(res.GetError()))
			return
		}
		cl := cn.take(res.GetRequestId(), res)
		if cl == nil {
			return // abandoned by its caller
		}
		if snap := res.GetWatch(); snap != nil && cl.route != nil {
			cl.route.snapshot(res.GetRequestId(), snap)
		}
		if cl.done != nil {
			cl.done <- reply{res: res}
		} else if e := res.GetError(); e != nil {
			log.Debug("state store refused a request nobody waits for", "request", cl.what, "error", wirestore.StoreError(e))
		}
		cn.endIfRetired()
	case *pb.ServerMessage_AckResult:
		cl := cn.take(x.AckResult.GetRequestId(), nil)
		switch {
		case cl == nil:
		case cl.done != nil:
			cl.done <- reply{ack: x.AckResult}
		default:
			log.Debug("state store applied a request nobody waits for", "request", cl.what)
		}
	case *pb.ServerMessage_WatchUpdate:
		if r := cn.routeOf(x.WatchUpdate.GetWatchId()); r != nil {
			r.update(x.WatchUpdate)
		}
	case *pb.ServerMessage_WatchClosed:
		if r := cn.dropRoute(x.WatchClosed.GetWatchId()); r != nil {
			r.closed(x.WatchClosed)
		}
		if x.WatchClosed.GetReason() == pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_UNAVAILABLE {
			cn.leave(x.WatchClosed)
		}
	default:
		log.Warn("state store sent a message this client does not know; ignored", "endpoint", cn.ep.name, "message", fmt.Sprintf("%T", x))
	}
}

// leave drops cn for another endpoint after the server closed a watch
// UNAVAILABLE: that node has lost its cluster's leader and refuses writes,
// linearizable reads and new watches until one is back, so a watch
// re-opened there would be refused and every call would fail. Dropping the
// connection makes the client reconnect round-robin from the next
// endpoint, and every watch re-snapshot there. The node closes all its
// watches UNAVAILABLE at once, but the first closure read ends cn, so the
// closures still in flight would never arrive: every other watch on cn is
// told the same closure here, so each one's cause names UNAVAILABLE
// whichever closure came first, not a bare disconnection. Calls in flight
// on cn fail as for any lost connection: the node could not have committed
// them. With one endpoint there is nowhere else to go, so cn stays and the
// watch re-opens on it (refused UNAVAILABLE while the node has no leader,
// which Watch.Next returns; the next Next tries again).
func (cn *conn) leave(m *pb.StateStoreWatchClosed) {
	if len(cn.c.cfg.endpoints) < 2 {
		return
	}
	cn.c.cfg.Logger.Warn("state store node closed a watch UNAVAILABLE; moving to another endpoint",
		"endpoint", cn.ep.name, "watch", m.GetWatchId(), "message", m.GetMessage())
	cn.mu.Lock()
	routes := cn.routes
	cn.routes = map[string]route{}
	cn.mu.Unlock()
	cn.abort(fmt.Errorf("%s closed watch %q UNAVAILABLE (%s): moving to another endpoint", cn.ep.name, m.GetWatchId(), m.GetMessage()))
	for id, r := range routes {
		r.closed(&pb.StateStoreWatchClosed{WatchId: id, Reason: m.GetReason(), Message: m.GetMessage()})
	}
}

// end is the reader's last act: no call is registered on cn any more,
// every pending call fails (UNAVAILABLE naming the connection, or
// ErrClosed after Close), every watch on it hears lost, and the client
// reconnects.
func (cn *conn) end(readErr error) {
	cn.ws.CloseNow()
	cn.writeDeadline.Close()
	cn.mu.Lock()
	cause := cn.cause
	if cause == nil {
		cause = readErr
	}
	cn.mu.Unlock()
	cn.c.detach(cn, cause)
	cn.mu.Lock()
	cn.dead = true
	pending, routes := cn.pending, cn.routes
	cn.pending, cn.routes = nil, nil
	cn.mu.Unlock()
	cn.stop()
	err := ErrClosed
	if !cn.c.isClosed() {
		err = &statestore.Error{Code: statestore.Unavailable, Field: "connection",
			Message: fmt.Sprintf("the connection to %s ended before the answer came (%v); the outcome of a write is unknown: it may have been applied", cn.ep.name, cause),
			Err:     cause}
	}
	for _, cl := range pending {
		if cl.done != nil {
			cl.done <- reply{err: err}
		}
	}
	for _, r := range routes {
		r.lost()
	}
	cn.c.lost(cn, cause)
}

// ping probes the connection every PingInterval: a ping unanswered within
// RequestTimeout drops it, so a network that silently stopped carrying
// packets is noticed without waiting for TCP to give up.
func (cn *conn) ping() {
	defer cn.c.wg.Done()
	t := time.NewTicker(cn.c.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-cn.life.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(cn.life, cn.c.cfg.RequestTimeout)
		err := cn.ws.Ping(ctx)
		cancel()
		if err != nil {
			if cn.life.Err() == nil && !cn.c.isClosed() {
				cn.abort(fmt.Errorf("no pong within %v: %w", cn.c.cfg.RequestTimeout, err))
			}
			return
		}
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// retireOn retires cn when err is the node's own UNAVAILABLE answer (not
// a lost connection or a deadline, which carry no answer and are the
// reader's or the caller's business).
func (cn *conn) retireOn(err error) {
	if err == nil {
		return // most answers: no error to look into (errors.As's target would escape)
	}
	var se *statestore.Error
	if errors.As(err, &se) && se.Code == statestore.Unavailable {
		cn.retire(se)
	}
}
