// Package wsconn is what the two ends of the wire protocol over WebSocket
// (client/ and wire/wstransport, both on github.com/coder/websocket) share
// on their hot path: a message read whole into a reused buffer, and a
// deadline kept by one timer per connection. The WebSocket library hooks a
// context that can be cancelled into every read and write it does (a
// context.AfterFunc per frame header and per chunk of payload), and
// io.ReadAll grows a fresh buffer per message: about 50 allocations per
// request and answer. Given contexts that are never done, the library
// hooks nothing, and the ends bound their reads and writes with a Deadline
// instead.
//
// # Invariants
//
//  1. An operation a Deadline times that is still running when its timeout
//     has passed gets its expire called, and Stop reports it; one that
//     ended (Stop) before its timeout never does, however late the timer
//     fires, and a later operation is timed from its own Start, whether
//     the timer was still set for an earlier one or had fired and found
//     nothing running.
//     Code: Deadline.Start, Deadline.Stop, Deadline.fire.
//     Tests: TestDeadlineExpiresAStuckOperation, TestDeadlineNeverFiresAfterStop, TestDeadlineTimesEachOperationFromItsStart,
//     TestDeadlineExpiresAnOperationAfterAnIdleFire.
//  2. ReadAll returns the whole rest of a message, whatever its size, in a
//     buffer that is the caller's until it gives it back with PutBuffer;
//     a buffer over maxPooled is not kept, so one huge message does not
//     hold its memory for the next.
//     Code: ReadAll, GetBuffer, PutBuffer.
//     Tests: TestReadAllReadsEveryByte, TestPutBufferDropsHugeBuffers.
package wsconn

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// maxPooled bounds the buffers kept for the next message: room for the
// wire's common messages (a 16,384-byte document, a 65,536-byte snapshot),
// not for the rare message near the 1 MiB bounds.
const maxPooled = 128 << 10

// firstRead is the room a fresh buffer starts with: a PutState or an
// answer of the 2 KiB documents the store mostly holds, read at once.
const firstRead = 4 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, firstRead); return &b }}

// GetBuffer returns an empty buffer for ReadAll or an encoding, shared by
// every connection of the process.
func GetBuffer() *[]byte { return buffers.Get().(*[]byte) }

// PutBuffer gives b back once nothing refers to its bytes (the message
// was decoded, which copies, or written). A buffer over maxPooled is left
// to the collector.
func PutBuffer(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}

// ReadAll appends the rest of r to b, as io.ReadAll does into a fresh
// slice, and returns it. The WebSocket library bounds a message's size
// itself (SetReadLimit), so r ends.
func ReadAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// epoch makes a Deadline's instants monotonic nanoseconds that fit an
// atomic.Int64: time.Since reads the monotonic clock.
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) + 1 } // never 0, which means no operation

// Deadline bounds one operation at a time (a write, the rest of a message)
// by the same timeout, with one timer for the life of a connection: Start
// before the operation, Stop after it; an operation still running at its
// deadline has expire called, which closes the connection so that the
// operation fails. It replaces a context.WithTimeout per operation, which
// the WebSocket library would also hook a cancellation into, and it does
// not even set the timer per operation: the timer stays set while
// operations come (firing once per timeout to look at the running one's
// deadline, which is never earlier than the one it was set for, the
// timeout being the same), so Start and Stop cost an atomic store each.
type Deadline struct {
	t       *time.Timer
	timeout time.Duration
	// at is the running operation's deadline: 0 when none runs, expired
	// once fire has claimed it (which Stop then reports).
	at atomic.Int64
	// armed says the timer is set, or that its fire is running and will
	// set it again for a running operation.
	armed  atomic.Bool
	expire func()
}

// expired marks an operation whose deadline passed; now is never below 1.
const expired = -1

// NewDeadline returns a Deadline of timeout (> 0) whose expire ends the
// connection.
func NewDeadline(timeout time.Duration, expire func()) *Deadline {
	d := &Deadline{timeout: timeout, expire: expire}
	d.t = time.AfterFunc(time.Hour, d.fire)
	d.t.Stop()
	return d
}

// Start times an operation that must end within the timeout.
func (d *Deadline) Start() {
	d.at.Store(now() + int64(d.timeout))
	if !d.armed.Load() && d.armed.CompareAndSwap(false, true) {
		d.t.Reset(d.timeout)
	}
}

// Stop ends the operation's timing and reports whether it had expired
// (expire was called: the operation's failure is the deadline's).
func (d *Deadline) Stop() bool { return d.at.Swap(0) == expired }

// Close stops the timer for good, once the connection is done with.
func (d *Deadline) Close() {
	d.armed.Store(true) // nothing sets it again
	d.t.Stop()
}

// fire is the timer's. It expires the running operation when its deadline
// has passed, sets the timer for that deadline when it has not (the
// operation began after the timer was set), and leaves the timer unset
// when no operation runs, unless one began meanwhile: its Start, finding
// the timer set, left the timing to this fire.
func (d *Deadline) fire() {
	for {
		at := d.at.Load()
		switch {
		case at == expired:
			return
		case at > 0:
			if left := at - now(); left > 0 {
				d.t.Reset(time.Duration(left))
				return
			}
			if d.at.CompareAndSwap(at, expired) {
				d.expire()
				return
			}
			// It ended, or another began: look again.
		default:
			d.armed.Store(false)
			if d.at.Load() == 0 || !d.armed.CompareAndSwap(false, true) {
				return // nothing runs, or a Start set the timer itself
			}
		}
	}
}
