package attack

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// WebSocket opcodes and close statuses the attacks use (RFC 6455).
const (
	OpText   = 0x1
	OpBinary = 0x2
	OpClose  = 0x8
	OpPing   = 0x9
	OpPong   = 0xa

	StatusGoingAway      = 1001
	StatusPolicy         = 1008
	StatusMessageTooBig  = 1009
	StatusNoStatus       = 1005
	rawHandshakeDeadline = 10 * time.Second
)

// RawConn is a TCP connection to a Server that speaks HTTP and WebSocket
// by hand, so an attack can send what no client library would (a frame
// header and no payload, garbage, a stalled read) and see exactly what
// the server answers.
type RawConn struct {
	net.Conn
	r *bufio.Reader
}

// DialRaw opens a TCP connection to addr (a 127.0.0.1 address). A
// positive rcvbuf sets the socket's receive buffer before connecting, so a
// peer that stops reading is felt by the server after that many bytes and
// not after the kernel's autotuned megabytes.
func DialRaw(ctx context.Context, addr string, rcvbuf int) (*RawConn, error) {
	if !isLoopback(addr) {
		return nil, fmt.Errorf("attack: %s is not a 127.0.0.1 address", addr)
	}
	d := net.Dialer{Timeout: rawHandshakeDeadline}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			return errors.Join(err, serr)
		}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &RawConn{Conn: c, r: bufio.NewReader(c)}, nil
}

// Response is an HTTP answer read off a RawConn, its body whole.
type Response struct {
	Status int
	Body   string
}

// Request writes one HTTP/1.1 GET of path with host and header, and reads
// the answer. Keep-alive: the connection stays open afterwards unless the
// server closes it.
func (c *RawConn) Request(path, host string, header http.Header) (Response, error) {
	c.SetDeadline(time.Now().Add(rawHandshakeDeadline))
	defer c.SetDeadline(time.Time{})
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", path, host)
	header.Write(&b)
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return Response{}, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return Response{}, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return Response{Status: resp.StatusCode, Body: string(body)}, err
}

// UpgradeHeader is the header of a WebSocket handshake as principal
// token's bearer (none when token is "").
func UpgradeHeader(token string) http.Header {
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// Upgrade makes the WebSocket handshake on path /ws with header; an
// answer other than 101 is a *StatusError.
func (c *RawConn) Upgrade(host string, header http.Header) error {
	c.SetDeadline(time.Now().Add(rawHandshakeDeadline))
	defer c.SetDeadline(time.Time{})
	var b strings.Builder
	fmt.Fprintf(&b, "GET /ws HTTP/1.1\r\nHost: %s\r\n", host)
	header.Write(&b)
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return &StatusError{Status: resp.StatusCode, Body: string(body)}
	}
	return nil
}

// StatusError is a handshake answered with another status than 101.
type StatusError struct {
	Status int
	Body   string
}

// Error names the status and the body.
func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %q", e.Status, e.Body) }

// FrameHeader is the header of one client frame (FIN set, masked)
// announcing n payload bytes, with its mask key.
func FrameHeader(op byte, n uint64) (header []byte, mask [4]byte) {
	rand.Read(mask[:])
	h := []byte{0x80 | op}
	switch {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n <= 0xffff:
		h = append(h, 0x80|126, byte(n>>8), byte(n))
	default:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, n)
	}
	return append(h, mask[:]...), mask
}

// WriteFrame writes one whole client frame holding payload.
func (c *RawConn) WriteFrame(op byte, payload []byte) error {
	h, mask := FrameHeader(op, uint64(len(payload)))
	b := append(h, payload...)
	for i := range payload {
		b[len(h)+i] ^= mask[i%4]
	}
	_, err := c.Write(b)
	return err
}

// Send writes m as one binary message.
func (c *RawConn) Send(m *pb.ClientMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return c.WriteFrame(OpBinary, b)
}

// ReadFrame reads one server frame (unmasked; fragments are not joined,
// the server sends none) within timeout. A ping is answered and skipped.
func (c *RawConn) ReadFrame(timeout time.Duration) (op byte, payload []byte, err error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			return 0, nil, err
		}
		op = h[0] & 0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return 0, nil, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return 0, nil, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		if n > 16<<20 {
			return 0, nil, fmt.Errorf("attack: a server frame announcing %d bytes", n)
		}
		payload = make([]byte, n)
		if _, err := io.ReadFull(c.r, payload); err != nil {
			return 0, nil, err
		}
		if op == OpPing {
			if err := c.WriteFrame(OpPong, payload); err != nil {
				return 0, nil, err
			}
			continue
		}
		return op, payload, nil
	}
}

// CloseFrame is a close frame's status and reason.
type CloseFrame struct {
	Status int
	Reason string
}

// Recv reads the next ServerMessage within timeout; a close frame is a
// *CloseFrame error.
func (c *RawConn) Recv(timeout time.Duration) (*pb.ServerMessage, error) {
	op, payload, err := c.ReadFrame(timeout)
	if err != nil {
		return nil, err
	}
	switch op {
	case OpClose:
		cf := &CloseFrame{Status: StatusNoStatus}
		if len(payload) >= 2 {
			cf.Status, cf.Reason = int(binary.BigEndian.Uint16(payload)), string(payload[2:])
		}
		return nil, cf
	case OpBinary:
		m := &pb.ServerMessage{}
		if err := proto.Unmarshal(payload, m); err != nil {
			return nil, fmt.Errorf("attack: a server message that does not decode: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("attack: a server frame of opcode %#x", op)
}

// Error names the status.
func (e *CloseFrame) Error() string { return fmt.Sprintf("closed %d %q", e.Status, e.Reason) }

// AwaitClosed reads until the server closes the session, within
// timeout, and returns its close frame (nil when the connection ended
// without one). A close frame is answered with the same status, as a
// peer completing the closing handshake does, and then the end of the
// stream is awaited too, unless reply is false (for a peer whose close
// frame the server cannot read, being inside an endless message of its).
func (c *RawConn) AwaitClosed(timeout time.Duration, reply bool) (*CloseFrame, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("attack: the connection is still open after %v", timeout)
		}
		_, err := c.Recv(left)
		var cf *CloseFrame
		switch {
		case errors.As(err, &cf):
			if !reply {
				return cf, nil
			}
			c.WriteFrame(OpClose, binary.BigEndian.AppendUint16(nil, uint16(cf.Status)))
			if err := c.AwaitEOF(time.Until(deadline)); err != nil {
				return cf, fmt.Errorf("attack: closed %d but the connection stayed open: %w", cf.Status, err)
			}
			return cf, nil
		case err == nil:
		case errors.Is(err, io.EOF), isReset(err):
			return nil, nil
		default:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, fmt.Errorf("attack: the connection is still open after %v", timeout)
			}
			return nil, nil
		}
	}
}

// AwaitEOF reads a plain connection until the server closes it, within
// timeout; any bytes read are discarded.
func (c *RawConn) AwaitEOF(timeout time.Duration) error {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	_, err := io.Copy(io.Discard, c.r)
	if err == nil || isReset(err) {
		return nil
	}
	return fmt.Errorf("attack: the connection is still open after %v: %w", timeout, err)
}

func isReset(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}
