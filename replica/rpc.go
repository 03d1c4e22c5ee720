package replica

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/keeppeek/statestore/replica/consensus"
)

// The store's own peer calls (a forwarded write, a read index) travel on a
// listener of their own beside raft's: one length-prefixed request, one
// length-prefixed answer per call. What they carry is the caller's
// business; this layer only moves bytes and bounds them.

// MaxMessage bounds one request or answer on the wire, so a corrupt length
// never makes a peer allocate without bound.
const MaxMessage = 64 << 20

// Handler answers one request from a peer (consensus.Handler).
type Handler = consensus.Handler

// Caller sends a request to the peer at addr and returns its answer
// (consensus.Caller).
type Caller = consensus.Caller

// ErrNoPeer is a Call to an address nobody serves (a Loopback with no
// handler registered there): consensus.ErrNoPeer.
var ErrNoPeer = consensus.ErrNoPeer

// Loopback is an in-process Caller: the test hook for a cluster in one
// process, each node registering its handler under its address.
type Loopback struct {
	mu       sync.Mutex
	handlers map[string]Handler
}

// NewLoopback returns a Loopback with no handler.
func NewLoopback() *Loopback { return &Loopback{handlers: map[string]Handler{}} }

// Register serves addr with h; nil removes it (a node that stopped).
func (l *Loopback) Register(addr string, h Handler) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h == nil {
		delete(l.handlers, addr)
		return
	}
	l.handlers[addr] = h
}

// Call runs the handler registered at addr in the calling goroutine.
func (l *Loopback) Call(ctx context.Context, addr string, req []byte) ([]byte, error) {
	l.mu.Lock()
	h := l.handlers[addr]
	l.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoPeer, addr)
	}
	return h(ctx, append([]byte(nil), req...))
}

// RPCServer serves a Handler on a listener.
type RPCServer struct {
	ln   net.Listener
	h    Handler
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn map[net.Conn]struct{}
	done chan struct{}
}

// ServeRPC serves h on addr (over mutual TLS when tc is set) until Close.
func ServeRPC(addr string, tc *tls.Config, h Handler) (*RPCServer, error) {
	var ln net.Listener
	var err error
	if tc != nil {
		ln, err = tls.Listen("tcp", addr, tc)
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("replica rpc listen on %s: %w", addr, err)
	}
	return serveOn(ln, h), nil
}

// serveOn serves h on ln, which the server owns from then on: the seam a
// test wraps the listener at to count the connections callers open.
func serveOn(ln net.Listener, h Handler) *RPCServer {
	s := &RPCServer{ln: ln, h: h, conn: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the address the server listens on.
func (s *RPCServer) Addr() string { return s.ln.Addr().String() }

func (s *RPCServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conn[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers the requests of one connection in order.
func (s *RPCServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conn, c)
		s.mu.Unlock()
		c.Close()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		req, err := readMsg(c)
		if err != nil {
			return
		}
		resp, herr := s.h(ctx, req)
		if herr != nil {
			resp = append([]byte{1}, herr.Error()...)
		} else {
			resp = append([]byte{0}, resp...)
		}
		if err := writeMsg(c, resp); err != nil {
			return
		}
	}
}

// Close stops accepting, ends every connection and waits for the handlers.
func (s *RPCServer) Close() error {
	close(s.done)
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// TCPCaller calls RPCServers over TCP (mutual TLS when TLS is set). It
// keeps up to MaxIdle connections per address between calls, because the
// leader polls every follower's progress four times a second and a
// follower forwards every write: a dial per call would be a TLS handshake
// each time. A kept connection that its peer closed (the peer restarted)
// is noticed by its reader and dialed anew by the next call; one a call
// failed on is never kept. The zero value is ready; Close ends the kept
// connections.
type TCPCaller struct {
	TLS         *tls.Config
	DialTimeout time.Duration // 0 means 2 s
	MaxIdle     int           // connections kept per address between calls; 0 means DefaultMaxIdle

	mu     sync.Mutex
	idle   map[string][]*rpcConn
	closed bool
}

// rpcConn is one connection of a TCPCaller. Its reader goroutine reads
// every answer, so a peer's close is seen while the connection sits idle,
// not on the next call's write.
type rpcConn struct {
	c       net.Conn
	answers chan []byte   // the one answer a call waits for
	dead    chan struct{} // closed once the connection ended; err says why
	err     error
}

func newRPCConn(c net.Conn) *rpcConn {
	rc := &rpcConn{c: c, answers: make(chan []byte, 1), dead: make(chan struct{})}
	go rc.read()
	return rc
}

// read hands each answer to the waiting call until the connection ends.
// An answer no call waits for (the previous one not taken) breaks the
// one-request-one-answer order, so it ends the connection too.
func (rc *rpcConn) read() {
	for {
		m, err := readMsg(rc.c)
		if err == nil {
			select {
			case rc.answers <- m:
				continue
			default:
				err = errors.New("an answer no call waited for")
			}
		}
		rc.err = err
		rc.c.Close()
		close(rc.dead)
		return
	}
}

func (rc *rpcConn) alive() bool {
	select {
	case <-rc.dead:
		return false
	default:
		return true
	}
}

// DefaultMaxIdle is TCPCaller's default MaxIdle: about as many
// connections as a follower has writes in flight at once. A follower
// forwards each write on a connection of its own, so a bound below its
// concurrency closed the surplus after every burst and dialed it again
// for the next: at 127 writers over three nodes, 16 left a tenth of the
// leader's processor time in accepting and closing connections.
const DefaultMaxIdle = 128

func (t *TCPCaller) maxIdle() int {
	if t.MaxIdle > 0 {
		return t.MaxIdle
	}
	return DefaultMaxIdle
}

// get returns a kept live connection to addr, or dials one.
func (t *TCPCaller) get(ctx context.Context, addr string) (*rpcConn, error) {
	t.mu.Lock()
	for l := t.idle[addr]; len(l) > 0; l = t.idle[addr] {
		rc := l[len(l)-1]
		t.idle[addr] = l[:len(l)-1]
		if rc.alive() {
			t.mu.Unlock()
			return rc, nil
		}
	}
	t.mu.Unlock()
	timeout := t.DialTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	d := &net.Dialer{Timeout: timeout}
	var c net.Conn
	var err error
	if t.TLS != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: t.TLS}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, &NotSentError{Addr: addr, Err: err}
	}
	return newRPCConn(c), nil
}

// put keeps rc for the next call to addr, or closes it when the caller is
// closed or already keeps enough.
func (t *TCPCaller) put(addr string, rc *rpcConn) {
	t.mu.Lock()
	if !t.closed && rc.alive() && len(t.idle[addr]) < t.maxIdle() {
		if t.idle == nil {
			t.idle = map[string][]*rpcConn{}
		}
		t.idle[addr] = append(t.idle[addr], rc)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	rc.c.Close()
}

// Close ends the kept connections. Calls after it still work, each on a
// connection of its own that is not kept.
func (t *TCPCaller) Close() error {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	t.mu.Unlock()
	for _, l := range idle {
		for _, rc := range l {
			rc.c.Close()
		}
	}
	return nil
}

// NotSentError is a Call that failed before its request could reach the
// peer (the dial failed): safe to retry, unlike a failure after sending
// (consensus.NotSentError).
type NotSentError = consensus.NotSentError

// RemoteError is a handler's error, relayed.
type RemoteError struct {
	Addr, Msg string
}

// Error names the peer and its message.
func (e *RemoteError) Error() string { return fmt.Sprintf("replica rpc %s: %s", e.Addr, e.Msg) }

// Call sends req to addr and returns the answer; ctx bounds the whole call.
// A failure after the dial leaves the outcome unknown, on a kept connection
// as on a new one: the peer may have read the request before it closed.
func (t *TCPCaller) Call(ctx context.Context, addr string, req []byte) ([]byte, error) {
	rc, err := t.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	// A canceled call ends the write it may be blocked in; the connection
	// is then not kept, its write deadline being in the past.
	stop := context.AfterFunc(ctx, func() { rc.c.SetWriteDeadline(time.Unix(1, 0)) })
	err = writeMsg(rc.c, req)
	if !stop() || err != nil {
		rc.c.Close()
		if err == nil {
			err = ctx.Err()
		} else if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("replica rpc send to %s: %w", addr, err)
	}
	var resp []byte
	select {
	case resp = <-rc.answers:
	case <-rc.dead:
		// The reader hands the answer over before it marks the
		// connection dead: an answer followed by a close still counts.
		select {
		case resp = <-rc.answers:
		default:
			return nil, fmt.Errorf("replica rpc answer from %s: %w", addr, rc.err)
		}
	case <-ctx.Done():
		rc.c.Close()
		return nil, fmt.Errorf("replica rpc answer from %s: %w", addr, ctx.Err())
	}
	t.put(addr, rc)
	if len(resp) == 0 {
		return nil, fmt.Errorf("replica rpc answer from %s: empty", addr)
	}
	if resp[0] != 0 {
		return nil, &RemoteError{Addr: addr, Msg: string(resp[1:])}
	}
	return resp[1:], nil
}

func writeMsg(w io.Writer, b []byte) error {
	if len(b) > MaxMessage {
		return fmt.Errorf("message of %d bytes over the bound %d", len(b), MaxMessage)
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(buf, b...))
	return err
}

func readMsg(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxMessage {
		return nil, fmt.Errorf("message length %d over the bound %d", n, MaxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
