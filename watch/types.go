package watch

import (
	"errors"
	"fmt"
	"time"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// Kind is the kind of committed mutation an Event or Update reports. The
// zero value is invalid, so an uninitialised Event is never taken for a PUT.
type Kind uint8

// Update kinds, as the wire protocol names them: PUT carries the entry; DELETE and EXPIRE
// carry only the key.
const (
	Put Kind = iota + 1
	Delete
	Expire
)

// String returns the wire name: "PUT", "DELETE" or "EXPIRE".
func (k Kind) String() string {
	switch k {
	case Put:
		return "PUT"
	case Delete:
		return "DELETE"
	case Expire:
		return "EXPIRE"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Reason says why the server closed a watch (StateStoreWatchClosed). The
// zero value is invalid.
type Reason uint8

// Close reasons, as StateStoreWatchClosed names them.
const (
	BufferOverflow Reason = iota + 1
	AckTimeout
	AuthorizationLost
	SnapshotDeliveryFailed
	StoreClosed
	Restored
	// Unavailable: the node serving the watch lost its cluster's leader
	// for longer than its bound, so its state may already be stale; the
	// client re-snapshots, on another node when it can.
	Unavailable
)

// String returns the wire name, e.g. "BUFFER_OVERFLOW".
func (r Reason) String() string {
	switch r {
	case BufferOverflow:
		return "BUFFER_OVERFLOW"
	case AckTimeout:
		return "ACK_TIMEOUT"
	case AuthorizationLost:
		return "AUTHORIZATION_LOST"
	case SnapshotDeliveryFailed:
		return "SNAPSHOT_DELIVERY_FAILED"
	case StoreClosed:
		return "STORE_CLOSED"
	case Restored:
		return "RESTORED"
	case Unavailable:
		return "UNAVAILABLE"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Event is one committed mutation as the store publishes it.
type Event struct {
	Revision  uint64 // the namespace revision the mutation produced
	Kind      Kind
	Namespace string
	Key       string
	// Entry is the committed entry, for Put only. It is shared by every
	// Update the event produces, so it must never be modified.
	Entry *materialize.Entry
}

// Message is what a session's Sink receives: *Snapshot, *Update or *Closed.
// The registry never touches a message after handing it to the Sink.
type Message interface{ isMessage() }

// Snapshot is a watch's first message: the matching entries exactly as they
// were at SnapshotRevision (the StateStoreResult of WatchState).
type Snapshot struct {
	RequestID        uint64
	WatchID          string
	Namespace        string
	KeyPrefix        string
	SnapshotRevision uint64
	// Entries are shared with the store's view and must not be modified.
	Entries []*materialize.Entry
}

// Update is one committed mutation for one watch (StateStoreWatchUpdate).
type Update struct {
	WatchID   string
	Sequence  uint64 // watch_sequence: 1, 2, 3, ... per watch, no holes
	Revision  uint64 // namespace revision; may skip (other keys), never repeats
	Kind      Kind
	Namespace string
	Key       string
	Entry     *materialize.Entry // Put only; shared, must not be modified
	// Memo is shared by every Update of the same event (nil for an
	// Update built elsewhere), so its common part is encoded once.
	Memo *Memo
}

// Closed is the last message of a watch the server terminated
// (StateStoreWatchClosed).
type Closed struct {
	WatchID string
	Reason  Reason
	Message string // names the bound or cause, for humans
}

func (*Snapshot) isMessage() {}
func (*Update) isMessage()   {}
func (*Closed) isMessage()   {}

// Sink is a session's ordered outbound control channel, supplied by the
// embedder. Deliver is called from one goroutine per session, in order, and
// never while the registry's lock is held, so it may call back into the
// registry (Ack, Remove, Session.Close). It should enqueue and return
// quickly: a slow Sink delays only its own session. An error means the
// message could not be queued: for a *Snapshot the watch is closed with
// SnapshotDeliveryFailed, for an *Update with BufferOverflow, and the
// *Closed that reports it is offered once, best effort (its own error is
// ignored).
type Sink interface {
	Deliver(Message) error
}

// DirectSink is a Sink that can also take updates on the publishing
// goroutine, while the registry's lock is held, so that a session whose
// queue is empty and whose delivery goroutine is idle gets a commit's
// updates without that goroutine's wake-up: for a wire session, whose own
// writer goroutine sends them, that hand-off is pure cost. The registry
// uses OfferUpdates only when nothing of the session's is queued or being
// delivered, so the session's messages still reach the Sink in enqueue
// order; everything else (snapshots, closures, updates behind them) goes
// through Deliver as before.
type DirectSink interface {
	Sink
	// OfferUpdates queues a prefix of us, in order, as Deliver would each
	// of them, and returns its length: all of them, or those before the
	// first it refused, with the refusal's error. It runs under the
	// registry's lock (and the store's commit-order lock), once per
	// session per Publish with every update the call made for the
	// session: it must not block, and must not call the registry or the
	// store. The refused update's watch is closed with BufferOverflow; the
	// updates after it reach Deliver.
	OfferUpdates(us []*Update) (int, error)
}

// Limits bound the registry. A zero or negative field takes its default
// (those of quota.Default): MaxWatches 1024, MaxPerSession 16,
// MaxPerPrincipal a quarter of MaxWatches, MaxUnacked 32, AckDeadline 30 s.
type Limits struct {
	MaxWatches      int           // watches in the whole registry
	MaxPerSession   int           // watches in one session
	MaxPerPrincipal int           // watches of one principal, over its sessions
	MaxUnacked      int           // enqueued but unacknowledged updates per watch
	AckDeadline     time.Duration // for the oldest unacknowledged update
}

// LimitsFrom takes the watch bounds from the store's quota limits, so the
// store configures them in one place.
func LimitsFrom(q quota.Limits) Limits {
	return Limits{MaxWatches: q.MaxWatches, MaxPerSession: q.MaxWatchesPerSession, MaxPerPrincipal: q.MaxWatchesPerPrincipal,
		MaxUnacked: q.MaxUnackedUpdates, AckDeadline: q.AckDeadline}
}

func (l Limits) withDefaults() Limits {
	d := LimitsFrom(quota.Default())
	if l.MaxWatches <= 0 {
		l.MaxWatches = d.MaxWatches
	}
	if l.MaxPerSession <= 0 {
		l.MaxPerSession = d.MaxPerSession
	}
	if l.MaxPerPrincipal <= 0 {
		l.MaxPerPrincipal = quota.DefaultWatchesPerPrincipal(l.MaxWatches)
	}
	if l.MaxUnacked <= 0 {
		l.MaxUnacked = d.MaxUnacked
	}
	if l.AckDeadline <= 0 {
		l.AckDeadline = d.AckDeadline
	}
	return l
}

// Sentinel errors; every error the registry returns matches one with
// errors.Is.
var (
	// ErrWatchLimit: the store-wide or per-session watch bound is reached
	// (WATCH_LIMIT). The error is a *LimitError naming the bound.
	ErrWatchLimit = errors.New("watch limit reached")
	// ErrDuplicateWatch: the session already has an open watch with this
	// watch_id (INVALID_ARGUMENT).
	ErrDuplicateWatch = errors.New("watch_id already in use in this session")
	// ErrUnknownWatch: no open watch with this watch_id in the session; it
	// was never added, was removed, or was closed (NOT_FOUND).
	ErrUnknownWatch = errors.New("unknown watch_id")
	// ErrInvalidSequence: an ack names a sequence never sent
	// (INVALID_ARGUMENT). The error is a *SequenceError.
	ErrInvalidSequence = errors.New("invalid applied_sequence")
	// ErrSessionClosed: the session was closed.
	ErrSessionClosed = errors.New("session closed")
	// ErrStopped: the registry was stopped (UNAVAILABLE).
	ErrStopped = errors.New("watch registry stopped")
)

// Bound names used in LimitError.
const (
	BoundWatches           = "watches"
	BoundWatchesPerSession = "watches per session"
	// BoundWatchesPerPrincipal is Limits.MaxPerPrincipal.
	BoundWatchesPerPrincipal = "watches per principal"
)

// LimitError names the watch bound an Add would break and its value.
type LimitError struct {
	Bound string // BoundWatches, BoundWatchesPerSession or BoundWatchesPerPrincipal
	Limit int
	// Principal is set for BoundWatchesPerPrincipal.
	Principal string
}

// Error names the bound and its value, e.g. "watches per session limit 16
// reached".
func (e *LimitError) Error() string {
	if e.Principal != "" {
		return fmt.Sprintf("%s limit %d reached by principal %q", e.Bound, e.Limit, e.Principal)
	}
	return fmt.Sprintf("%s limit %d reached", e.Bound, e.Limit)
}

// Unwrap makes errors.Is(err, ErrWatchLimit) match.
func (e *LimitError) Unwrap() error { return ErrWatchLimit }

// SequenceError is an ack of a sequence the watch never sent.
type SequenceError struct {
	WatchID string
	Applied uint64 // what the client acknowledged
	Last    uint64 // the last sequence enqueued for the watch
}

// Error names the watch, the acknowledged and the last sent sequence.
func (e *SequenceError) Error() string {
	return fmt.Sprintf("watch %q: applied_sequence %d exceeds the last sent sequence %d", e.WatchID, e.Applied, e.Last)
}

// Unwrap makes errors.Is(err, ErrInvalidSequence) match.
func (e *SequenceError) Unwrap() error { return ErrInvalidSequence }
