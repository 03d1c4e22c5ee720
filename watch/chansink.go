package watch

import (
	"errors"
	"fmt"

	"github.com/keeppeek/statestore/quota"
)

// ErrSinkFull is matched by the error a [ChanSink] returns when it holds
// its bound of unread messages.
var ErrSinkFull = errors.New("watch sink full")

// SinkFullError is a refused delivery: the ChanSink already held Bound
// unread messages (or, for a *Closed, its reserve was used up too).
type SinkFullError struct {
	Bound int
}

// Error names the bound, so a BUFFER_OVERFLOW close says which one broke.
func (e *SinkFullError) Error() string {
	return fmt.Sprintf("%v: %d unread messages, its bound", ErrSinkFull, e.Bound)
}

// Unwrap makes errors.Is(err, ErrSinkFull) match.
func (e *SinkFullError) Unwrap() error { return ErrSinkFull }

// DefaultChanSinkBound is the bound NewChanSink uses for bound <= 0: room
// for the snapshot and every unacknowledged update of a full session under
// the default limits (16 watches × (1 + 32)). With it a ChanSink never
// refuses first: a watch whose reader falls behind reaches the registry's
// own MaxUnacked bound and is closed with BufferOverflow there.
var DefaultChanSinkBound = chanSinkBound(quota.Default())

func chanSinkBound(q quota.Limits) int { return q.MaxWatchesPerSession * (1 + q.MaxUnackedUpdates) }

// closedReserve is the room a ChanSink keeps beyond its bound for *Closed
// messages: one per watch a default session may hold, so the reader learns
// that a watch ended even when the bound is what ended it.
var closedReserve = quota.Default().MaxWatchesPerSession

// ChanSink is a ready-made Sink for embedders who read watch messages in a
// goroutine of their own: Deliver queues each message on a buffered channel
// and never blocks, and the reader receives them, in order, from C.
//
// The bound is the number of messages it holds unread. When that many are
// waiting, Deliver refuses a *Snapshot or *Update with a *SinkFullError
// instead of waiting, so the registry closes that watch (BufferOverflow
// for an update, SnapshotDeliveryFailed for a snapshot) and the session's
// other watches carry on. A *Closed is still accepted past the bound, into
// a reserve of one per watch a session may hold (16), so the reader always
// learns why a watch ended unless more closes than that are left unread.
//
// Use one ChanSink per Session: the registry calls Deliver from that
// session's single delivery goroutine, which is what makes the bound
// exact. The channel is never closed; a reader stops when the session's
// Done channel is closed.
type ChanSink struct {
	ch    chan Message
	bound int
}

// NewChanSink returns a ChanSink that refuses snapshots and updates while
// bound messages are unread; bound <= 0 means DefaultChanSinkBound.
func NewChanSink(bound int) *ChanSink {
	if bound <= 0 {
		bound = DefaultChanSinkBound
	}
	return &ChanSink{ch: make(chan Message, bound+closedReserve), bound: bound}
}

// C is the channel the reader receives messages from.
func (s *ChanSink) C() <-chan Message { return s.ch }

// Bound is the number of unread messages at which the sink refuses
// snapshots and updates.
func (s *ChanSink) Bound() int { return s.bound }

// Deliver queues m without blocking, or refuses it with a *SinkFullError
// (see ChanSink for what the registry then does).
func (s *ChanSink) Deliver(m Message) error {
	if _, isClosed := m.(*Closed); !isClosed && len(s.ch) >= s.bound {
		return &SinkFullError{Bound: s.bound}
	}
	select {
	case s.ch <- m:
		return nil
	default: // only a *Closed gets here, with the reserve used up
		return &SinkFullError{Bound: s.bound}
	}
}
