package wstransport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/internal/wsconn"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// msgConn carries one protobuf message per binary WebSocket message: In is
// what it receives, Out what it sends. The server side is
// msgConn[*pb.ClientMessage, *pb.ServerMessage], a dispatch.Conn; the client
// side is the reverse.
type msgConn[In, Out proto.Message] struct {
	c *websocket.Conn
	// ctx bounds reads and writes: the WebSocket library closes the
	// connection at once when it is done (the Handler closed, the client
	// closed). session, on the server side, is the session's own context,
	// whose cause says why it ended: an EndSessions does not cut the
	// connection through ctx, so the dispatcher can send what is queued
	// before it closes conn.
	ctx          context.Context
	session      context.Context
	writeTimeout time.Duration
	readTimeout  time.Duration // the rest of a message, once begun; 0: none
	maxBytes     int64
	newIn        func() In
	// beforeFirst, when set, runs before the first Recv reads; an error
	// closes the connection with 1008 and is Recv's error. Recv runs on one
	// goroutine at a time (the dispatcher hands the reading over), so a
	// plain field does.
	beforeFirst func() error

	// writeMu keeps one write at a time, the one writeDeadline times.
	writeMu sync.Mutex
	// writeDeadline bounds each write by writeTimeout, and msgDeadline the
	// rest of a message by readTimeout: one timer each for the life of the
	// connection, instead of a context per read and write (see
	// internal/wsconn). Reads and writes get a context that is never done,
	// so the library hooks nothing into them; unhook, set by hookCtx,
	// undoes the one hook on ctx that closes the connection when ctx ends.
	writeDeadline, msgDeadline *wsconn.Deadline
	unhook                     func() bool

	sendMu  sync.Mutex
	sendErr error // the first failed Send

	// inPlace, on the server side, decodes a PutState without copying its
	// document (see inPlace); held keeps what it decoded until Release.
	inPlace func(data []byte, bp *[]byte) (In, bool)
	held    heldMessages
}

// hookCtx closes the connection at once when ctx is done, as the library
// would for a read or write bounded by ctx, and makes the deadlines' expiry
// close it too: a read or a write they bound then fails.
func (m *msgConn[In, Out]) hookCtx() {
	closeNow := func() { m.c.CloseNow() }
	m.writeDeadline, m.msgDeadline = wsconn.NewDeadline(m.writeTimeout, closeNow), wsconn.NewDeadline(m.readTimeout, closeNow)
	m.unhook = context.AfterFunc(m.ctx, closeNow)
}

// release undoes hookCtx's hook on ctx once the connection is done with
// (a server's ctx outlives its connections), and stops the deadlines'
// timers.
func (m *msgConn[In, Out]) release() {
	m.unhook()
	m.writeDeadline.Close()
	m.msgDeadline.Close()
}

// failed returns the first Send error: the cause when a session ends
// because its peer stopped reading.
func (m *msgConn[In, Out]) failed() error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	return m.sendErr
}

// newConn returns the server end of c; release it once Serve returned.
func newConn(ctx, session context.Context, c *websocket.Conn, writeTimeout, readTimeout time.Duration, maxBytes int64) *msgConn[*pb.ClientMessage, *pb.ServerMessage] {
	m := &msgConn[*pb.ClientMessage, *pb.ServerMessage]{c: c, ctx: ctx, session: session, writeTimeout: writeTimeout, readTimeout: readTimeout, maxBytes: maxBytes,
		newIn: func() *pb.ClientMessage { return new(pb.ClientMessage) }}
	m.inPlace = m.held.decode
	m.hookCtx()
	return m
}

// errTextMessage is the cause of the DecodeError a text message produces.
var errTextMessage = errors.New("a text WebSocket message; the protocol uses binary messages only")

// Recv reads the next message. A close by the peer (1000 or 1001) is
// io.EOF; a message that is text or does not decode is a
// *framing.DecodeError, after which the connection stays usable.
func (m *msgConn[In, Out]) Recv() (In, error) {
	var zero In
	if f := m.beforeFirst; f != nil {
		m.beforeFirst = nil
		if err := f(); err != nil {
			var ended *EndedError
			reason := ""
			if errors.As(err, &ended) {
				reason = ended.closeReason()
			}
			m.c.Close(websocket.StatusPolicyViolation, reason)
			return zero, err
		}
	}
	bp := wsconn.GetBuffer()
	typ, data, err := m.read((*bp)[:0])
	*bp = data
	if m.inPlace != nil && err == nil && typ == websocket.MessageBinary {
		if in, ok := m.inPlace(data, bp); ok {
			return in, nil // it holds bp until Release
		}
	}
	defer wsconn.PutBuffer(bp) // Unmarshal copies what it keeps
	if err != nil {
		if errors.Is(err, websocket.ErrMessageTooBig) {
			// Our own read limit: the library has already closed the
			// connection with 1009.
			return zero, &framing.FrameSizeError{Size: uint64(m.maxBytes) + 1, Max: int(m.maxBytes)}
		}
		switch websocket.CloseStatus(err) {
		case websocket.StatusNormalClosure, websocket.StatusGoingAway:
			return zero, io.EOF
		}
		return zero, err
	}
	if typ != websocket.MessageBinary {
		return zero, &framing.DecodeError{Size: len(data), Err: errTextMessage}
	}
	in := m.newIn()
	if err := proto.Unmarshal(data, in); err != nil {
		return zero, &framing.DecodeError{Size: len(data), Err: err}
	}
	return in, nil
}

// Release gives back what a message Recv returned refers to, once the
// dispatcher has run and answered it (dispatch.Releaser): a PutState
// decoded in place shares its document with the read buffer, which goes
// back to the pool only now.
func (m *msgConn[In, Out]) Release(msg *pb.ClientMessage) { m.held.release(msg) }

// read reads one message. Waiting for its first frame header is not
// bounded here (an idle session is the dispatcher's to end); once the
// header has come, the rest of the message must arrive within
// readTimeout, or the connection is closed: a peer that announces a
// message and stops cannot hold its session.
// The message is appended to buf.
func (m *msgConn[In, Out]) read(buf []byte) (websocket.MessageType, []byte, error) {
	typ, r, err := m.c.Reader(context.Background()) // ctx is hooked once (hookCtx)
	if err != nil {
		return typ, buf, err
	}
	if m.readTimeout <= 0 {
		b, err := wsconn.ReadAll(r, buf)
		return typ, b, err
	}
	m.msgDeadline.Start()
	b, err := wsconn.ReadAll(r, buf)
	if m.msgDeadline.Stop() && err != nil {
		return typ, b, &MessageTimeoutError{Timeout: m.readTimeout, Read: len(b)}
	}
	return typ, b, err
}

// MessageTimeoutError ends a session whose peer began a message and did
// not finish it within Options.MessageTimeout. It wraps
// io.ErrUnexpectedEOF: to the dispatcher it is a stream cut inside a
// frame.
type MessageTimeoutError struct {
	Timeout time.Duration
	Read    int // bytes of the message that had come
}

// Error names the bound and what had come.
func (e *MessageTimeoutError) Error() string {
	return fmt.Sprintf("wstransport: a message begun was not finished within %v (Options.MessageTimeout); %d bytes of it had come", e.Timeout, e.Read)
}

// Unwrap returns io.ErrUnexpectedEOF.
func (e *MessageTimeoutError) Unwrap() error { return io.ErrUnexpectedEOF }

// Send writes msg as one binary message within the write timeout. A missed
// deadline closes the connection (the WebSocket library does so), which
// ends the session.
func (m *msgConn[In, Out]) Send(msg Out) error {
	// The buffer is shared by every connection (wsconn): the library is
	// done with a message's bytes when Write returns.
	bp := wsconn.GetBuffer()
	defer wsconn.PutBuffer(bp)
	b, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], msg)
	*bp = b
	if err != nil {
		return err
	}
	return m.write(b)
}

// SendEncoded writes the server message m appends as one binary message,
// as Send does (dispatch.EncodedSender): a watch update goes out without
// being built as a message and marshalled for each watch.
func (m *msgConn[In, Out]) SendEncoded(enc framing.Encoded) error {
	bp := wsconn.GetBuffer()
	defer wsconn.PutBuffer(bp)
	b, err := enc.AppendTo((*bp)[:0])
	*bp = b
	if err != nil {
		return err
	}
	return m.write(b)
}

// write writes b as one binary message within the write timeout.
func (m *msgConn[In, Out]) write(b []byte) error {
	m.writeMu.Lock()
	m.writeDeadline.Start()
	err := m.c.Write(context.Background(), websocket.MessageBinary, b) // ctx is hooked once (hookCtx)
	missed := m.writeDeadline.Stop()
	m.writeMu.Unlock()
	if err != nil {
		if missed {
			// What the library returns for a write its context timed out.
			err = errors.Join(context.DeadlineExceeded, err)
		}
		err = fmt.Errorf("wstransport: write of %d bytes (timeout %v): %w", len(b), m.writeTimeout, err)
		m.sendMu.Lock()
		if m.sendErr == nil {
			m.sendErr = err
		}
		m.sendMu.Unlock()
		return err
	}
	return nil
}

// Close ends the connection with a closing handshake: 1008 (policy
// violation) with the EndedError's reason when the Handler ended the
// session on purpose, 1001 (going away) when the Handler was closed, 1000
// otherwise. The handshake is bounded by
// the WebSocket library's own timeouts, so a stalled peer cannot hold it;
// after a failed write the connection is already gone and Close returns at
// once.
func (m *msgConn[In, Out]) Close() error {
	var ended *EndedError
	switch {
	case m.session != nil && errors.As(context.Cause(m.session), &ended):
		return m.c.Close(websocket.StatusPolicyViolation, ended.closeReason())
	case m.ctx.Err() != nil:
		return m.c.Close(websocket.StatusGoingAway, "the server is shutting down")
	}
	return m.c.Close(websocket.StatusNormalClosure, "")
}

// CloseCause closes the connection for a reason of the dispatcher's own:
// an idle session ends with 1001 (going away) and the reason.
func (m *msgConn[In, Out]) CloseCause(cause error) error {
	var idle *dispatch.IdleError
	if errors.As(cause, &idle) {
		return m.c.Close(websocket.StatusGoingAway, fmt.Sprintf("idle for %v", idle.Timeout))
	}
	return m.Close()
}

// ClientConn is the Go client end of a session: it sends ClientMessages and
// receives ServerMessages, one per binary WebSocket message. Send and Recv
// may be called from different goroutines.
type ClientConn struct {
	*msgConn[*pb.ServerMessage, *pb.ClientMessage]
	cancel context.CancelFunc
}

// DialOptions configure Dial.
type DialOptions struct {
	// Header is sent with the handshake (for example Authorization).
	Header http.Header
	// MaxMessageBytes bounds one server message (default 1 MiB, room for a
	// 65,536-byte snapshot many times over).
	MaxMessageBytes int64
	// WriteTimeout bounds one Send (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// HTTPClient makes the handshake (for wss://, its Transport's
	// TLSClientConfig says which servers to trust); nil is
	// http.DefaultClient.
	HTTPClient *http.Client
}

// Dial opens a session at url (ws:// or wss://). ctx bounds the handshake
// only; the connection lives until Close.
func Dial(ctx context.Context, url string, opts DialOptions) (*ClientConn, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 1 << 20
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: opts.Header, HTTPClient: opts.HTTPClient})
	if err != nil {
		if resp != nil {
			return nil, &DialError{URL: url, Status: resp.StatusCode, Err: err}
		}
		return nil, &DialError{URL: url, Err: err}
	}
	c.SetReadLimit(opts.MaxMessageBytes)
	life, cancel := context.WithCancel(context.Background())
	m := &msgConn[*pb.ServerMessage, *pb.ClientMessage]{c: c, ctx: life,
		writeTimeout: opts.WriteTimeout, maxBytes: opts.MaxMessageBytes,
		newIn: func() *pb.ServerMessage { return new(pb.ServerMessage) }}
	m.hookCtx() // cancel undoes it
	return &ClientConn{cancel: cancel, msgConn: m}, nil
}

// Close ends the session with a normal closure, which removes its watches
// on the server.
func (c *ClientConn) Close() error {
	err := c.c.Close(websocket.StatusNormalClosure, "")
	c.cancel()
	c.release()
	return err
}

// Abort drops the connection without a closing handshake, as a network
// failure would.
func (c *ClientConn) Abort() error {
	c.cancel()
	err := c.c.CloseNow()
	c.release()
	return err
}

// DialError is a failed handshake; Status is the HTTP status when the
// server answered (401 for refused credentials, 403 for a refused origin).
type DialError struct {
	URL    string
	Status int
	Err    error
}

// Error names the URL and the status.
func (e *DialError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("wstransport: dial %s: HTTP %d: %v", e.URL, e.Status, e.Err)
	}
	return fmt.Sprintf("wstransport: dial %s: %v", e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }
