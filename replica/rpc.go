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
)

// The store's own peer calls (a forwarded write, a read index) travel on a
// listener of their own beside raft's: one length-prefixed request, one
// length-prefixed answer per call. What they carry is the caller's
// business; this layer only moves bytes and bounds them.

// MaxMessage bounds one request or answer on the wire, so a corrupt length
// never makes a peer allocate without bound.
const MaxMessage = 64 << 20

// Handler answers one request from a peer.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// Caller sends a request to the peer at addr and returns its answer.
type Caller interface {
	Call(ctx context.Context, addr string, req []byte) ([]byte, error)
}

// ErrNoPeer is a Call to an address nobody serves (a Loopback with no
// handler registered there).
var ErrNoPeer = errors.New("replica: no peer at that address")

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
	s := &RPCServer{ln: ln, h: h, conn: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
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

// TCPCaller calls RPCServers over TCP (mutual TLS when TLS is set), one
// connection per call: forwarded writes are rare beside raft's own traffic.
type TCPCaller struct {
	TLS         *tls.Config
	DialTimeout time.Duration // 0 means 2 s
}

// NotSentError is a Call that failed before its request could reach the
// peer (the dial failed): safe to retry, unlike a failure after sending.
type NotSentError struct {
	Addr string
	Err  error
}

// Error names the address and the dial's failure.
func (e *NotSentError) Error() string { return fmt.Sprintf("replica rpc dial %s: %v", e.Addr, e.Err) }

// Unwrap returns the dial's error.
func (e *NotSentError) Unwrap() error { return e.Err }

// RemoteError is a handler's error, relayed.
type RemoteError struct {
	Addr, Msg string
}

// Error names the peer and its message.
func (e *RemoteError) Error() string { return fmt.Sprintf("replica rpc %s: %s", e.Addr, e.Msg) }

// Call sends req to addr and returns the answer; ctx bounds the whole call.
func (t *TCPCaller) Call(ctx context.Context, addr string, req []byte) ([]byte, error) {
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
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeMsg(c, req); err != nil {
		return nil, fmt.Errorf("replica rpc send to %s: %w", addr, err)
	}
	resp, err := readMsg(c)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("replica rpc answer from %s: %w", addr, err)
	}
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
