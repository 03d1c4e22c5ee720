// Package framing carries protobuf messages over any byte stream (a TCP or
// WebSocket connection, a pipe) as length-delimited frames: an unsigned
// LEB128 varint length, then that many bytes of one encoded message, the
// same layout as protobuf's "delimited" encoding.
//
// # Invariants
//
//  1. A reader never allocates or reads more than its maximum frame size for
//     one frame: a longer length prefix is a *FrameSizeError before any of
//     the payload is read. Since the stream cannot be resynchronised without
//     reading the oversized payload, that error (and a truncated or
//     malformed prefix) is fatal for the stream.
//     Code: Reader.ReadFrame, Reader.readPrefix, FrameSizeError.
//     Tests: TestOversizedFrameIsRejectedBeforeItsPayloadIsRead, TestReadFrameErrors.
//  2. A frame whose payload is not a valid message is a *DecodeError. The
//     frame was consumed whole, so the stream stays in step and the next
//     Recv reads the next frame.
//     Code: Conn.Recv, Reader.ReadFrame, DecodeError.
//     Tests: TestUndecodableFrameKeepsTheStreamInStep, TestFramesAroundTheReadBufferSize.
//  3. Each Send writes one whole frame with one Write call, so concurrent
//     Sends never interleave bytes.
//     Code: Conn.Send, Conn.SendEncoded, AppendFrame, AppendEncodedFrame.
//     Tests: TestConcurrentSendsDoNotInterleave, TestSendEncodedIsSend.
package framing

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxFrameBytes bounds a frame when no maximum is given: room for
// the largest answer the store sends (a 65,536-byte snapshot) and the
// largest request (a 16,384-byte document plus its names) with margin,
// while one frame per session stays cheap to hold.
const DefaultMaxFrameBytes = 256 << 10

// FrameSizeError is a length prefix over the maximum frame size.
type FrameSizeError struct {
	Size uint64 // the announced payload length
	Max  int
}

// Error names the announced size and the bound.
func (e *FrameSizeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the maximum frame size %d", e.Size, e.Max)
}

// ErrBadPrefix is a length prefix that is not a varint of at most ten
// bytes.
var ErrBadPrefix = errors.New("malformed frame length prefix")

// DecodeError is a whole frame whose payload is not a valid message.
type DecodeError struct {
	Size int // payload length
	Err  error
}

// Error names the payload length and the decoding failure.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("frame of %d bytes is not a valid message: %v", e.Size, e.Err)
}

// Unwrap returns the decoding failure.
func (e *DecodeError) Unwrap() error { return e.Err }

// Reader reads frames from a byte stream. It is not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	max int
	buf []byte
	// held is the length of the last frame returned in place from r's
	// buffer, skipped at the next call.
	held int
}

// NewReader returns a Reader of r that rejects frames over maxBytes
// (DefaultMaxFrameBytes when maxBytes <= 0).
func NewReader(r io.Reader, maxBytes int) *Reader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	return &Reader{r: bufio.NewReader(r), max: maxBytes}
}

// ReadFrame returns the next frame's payload, valid until the next call.
// It returns io.EOF at a clean end of stream (between frames),
// io.ErrUnexpectedEOF inside a frame, ErrBadPrefix or a *FrameSizeError.
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.held > 0 {
		_, _ = r.r.Discard(r.held) // buffered already: cannot fail
		r.held = 0
	}
	n, err := r.readPrefix()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.max) {
		return nil, &FrameSizeError{Size: n, Max: r.max}
	}
	if int(n) <= r.r.Size() {
		// A frame that fits in the read buffer is returned where it lies:
		// copying it out would touch another frame-sized buffer of this
		// stream per frame, cold by the time a mostly idle session reads
		// again.
		b, err := r.r.Peek(int(n))
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		r.held = int(n)
		return b, nil
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// readPrefix reads the varint length prefix: io.EOF before its first byte,
// io.ErrUnexpectedEOF after it, ErrBadPrefix past ten bytes or 64 bits.
func (r *Reader) readPrefix() (uint64, error) {
	var n uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c, err := r.r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, ErrBadPrefix
		}
		n |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return n, nil
		}
	}
	return 0, ErrBadPrefix
}

// AppendFrame appends m as one frame to b.
func AppendFrame(b []byte, m proto.Message) ([]byte, error) {
	opts := proto.MarshalOptions{UseCachedSize: true}
	size := opts.Size(m)
	b = protowire.AppendVarint(b, uint64(size))
	return opts.MarshalAppend(b, m)
}

// Encoded is a message already in its wire form, or one that writes it
// without building the message: Size is its encoding's length and AppendTo
// appends exactly that many bytes (the message's, as proto.Marshal would
// make them) to b. It lets a sender whose messages share most of their
// bytes (a watch update going to many watches) encode the shared part once.
type Encoded interface {
	Size() int
	AppendTo(b []byte) ([]byte, error)
}

// AppendEncodedFrame appends m as one frame to b.
func AppendEncodedFrame(b []byte, m Encoded) ([]byte, error) {
	size := m.Size()
	b = protowire.AppendVarint(b, uint64(size))
	start := len(b)
	b, err := m.AppendTo(b)
	if err == nil && len(b)-start != size {
		err = &EncodedSizeError{Size: size, Wrote: len(b) - start}
	}
	return b, err
}

// EncodedSizeError is an Encoded that appended another number of bytes
// than its Size said: the frame's length prefix would be wrong, so it is
// not written.
type EncodedSizeError struct {
	Size, Wrote int
}

// Error names both lengths.
func (e *EncodedSizeError) Error() string {
	return fmt.Sprintf("encoded message of announced size %d wrote %d bytes", e.Size, e.Wrote)
}

// Conn sends Out messages and receives In messages as frames over one
// stream: the server side is Conn[*ClientMessage, *ServerMessage], a client
// the reverse. Recv must be called from one goroutine at a time; Send is
// safe for concurrent use.
type Conn[In, Out proto.Message] struct {
	rd    *Reader
	newIn func() In

	wmu sync.Mutex // one Write at a time
	w   io.Writer
}

// sendBuffers holds encoding buffers shared by every Conn: a buffer used
// by the last Send on this processor is still in its cache, where one kept
// per connection would be cold whenever the connection is mostly idle.
var sendBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuffer keeps a rare huge frame's buffer out of the pool.
const maxPooledBuffer = 4 * DefaultMaxFrameBytes

// NewConn returns a Conn over rw whose Recv rejects frames over maxBytes
// (DefaultMaxFrameBytes when maxBytes <= 0) and decodes each into a fresh
// message from newIn.
func NewConn[In, Out proto.Message](rw io.ReadWriter, maxBytes int, newIn func() In) *Conn[In, Out] {
	return &Conn[In, Out]{rd: NewReader(rw, maxBytes), newIn: newIn, w: rw}
}

// Recv reads and decodes the next message. Errors are those of
// Reader.ReadFrame, and a *DecodeError (after which the stream is still in
// step).
func (c *Conn[In, Out]) Recv() (In, error) {
	b, err := c.rd.ReadFrame()
	if err != nil {
		var zero In
		return zero, err
	}
	m := c.newIn()
	if err := proto.Unmarshal(b, m); err != nil {
		var zero In
		return zero, &DecodeError{Size: len(b), Err: err}
	}
	return m, nil
}

// RecvFrame reads the next frame and returns its payload undecoded, valid
// until the next Recv or RecvFrame: for a reader that routes or counts
// messages by their first field before (or instead of) decoding them.
// Errors are those of Reader.ReadFrame.
func (c *Conn[In, Out]) RecvFrame() ([]byte, error) { return c.rd.ReadFrame() }

// Send encodes m and writes it as one frame with one Write call.
func (c *Conn[In, Out]) Send(m Out) error {
	bp := sendBuffers.Get().(*[]byte)
	b, err := AppendFrame((*bp)[:0], m)
	return c.write(bp, b, err)
}

// SendEncoded writes m, which must be an Out message in its wire form, as
// one frame with one Write call, like Send.
func (c *Conn[In, Out]) SendEncoded(m Encoded) error {
	bp := sendBuffers.Get().(*[]byte)
	b, err := AppendEncodedFrame((*bp)[:0], m)
	return c.write(bp, b, err)
}

// SendBatch writes ms, each an Out message in its wire form, as
// consecutive frames with one Write call: a sender with several messages
// waiting pays one write (one system call, one hand-off to the peer's
// reader) for all of them. Should m[i] fail to encode, the frames before
// it are still written, in one Write, and its error is returned, so the
// peer sees what SendEncoded one at a time would have let through.
func (c *Conn[In, Out]) SendBatch(ms []Encoded) error {
	if len(ms) == 0 {
		return nil
	}
	bp := sendBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	var err error
	for _, m := range ms {
		var next []byte
		if next, err = AppendEncodedFrame(b, m); err != nil {
			break
		}
		b = next
	}
	if len(b) == 0 {
		return c.write(bp, b, err)
	}
	if werr := c.write(bp, b, nil); werr != nil {
		return werr
	}
	return err
}

// Message is m as an Encoded, marshalled when appended, so that a batch
// (SendBatch) can hold built messages beside encoded ones.
func Message(m proto.Message) Encoded { return protoMessage{m} }

type protoMessage struct{ m proto.Message }

func (p protoMessage) Size() int { return proto.Size(p.m) }

func (p protoMessage) AppendTo(b []byte) ([]byte, error) {
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, p.m)
}

// write writes the frame b (unless encoding it failed with err) and gives
// its buffer back to the pool.
func (c *Conn[In, Out]) write(bp *[]byte, b []byte, err error) error {
	if err == nil {
		c.wmu.Lock()
		_, err = c.w.Write(b)
		c.wmu.Unlock()
	}
	if cap(b) <= maxPooledBuffer {
		*bp = b[:0]
		sendBuffers.Put(bp)
	}
	return err
}
