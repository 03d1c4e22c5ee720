package watch

import "sync/atomic"

// Stats are the registry's counters since NewRegistry, for operators.
// Every update a watch was due is accounted for exactly once: it is
// enqueued and then delivered or dropped, or (the one that found the
// watch's buffer full) dropped without being enqueued. So Enqueued +
// Overflowed - Delivered - Dropped is what sits in session queues.
type Stats struct {
	Open     int    // watches open now
	Sessions int    // sessions open now
	Added    uint64 // watches registered
	// Closed counts watches the server terminated, by reason; every
	// Reason is present, with zero if it never happened.
	Closed map[Reason]uint64
	// Unwatched counts watches the client removed (UnwatchState), and
	// Disconnected those removed because their session closed.
	Unwatched    uint64
	Disconnected uint64
	Enqueued     uint64 // updates queued for a Sink
	Delivered    uint64 // updates a Sink accepted
	// Dropped counts updates that never reached a Sink: queued for a watch
	// closed or removed before delivery, refused by the Sink, or the one
	// that overflowed the watch's buffer (also in Overflowed).
	Dropped    uint64
	Overflowed uint64 // updates refused because the watch's buffer was full
}

// Reasons lists every close reason, in wire order.
var Reasons = []Reason{BufferOverflow, AckTimeout, AuthorizationLost, SnapshotDeliveryFailed, StoreClosed, Restored, Unavailable}

// counters are the registry's event counts. They are atomics although most
// are raised under Registry.mu: the delivery goroutines raise some without
// it, and Stats reads them all without it.
type counters struct {
	added        atomic.Uint64
	closed       [Unavailable + 1]atomic.Uint64 // indexed by Reason
	unwatched    atomic.Uint64
	disconnected atomic.Uint64
	enqueued     atomic.Uint64
	delivered    atomic.Uint64
	dropped      atomic.Uint64
	overflowed   atomic.Uint64
}

// ended counts one watch leaving the registry: reason 0 is a client's
// UnwatchState.
func (c *counters) ended(reason Reason) {
	if reason == 0 {
		c.unwatched.Add(1)
		return
	}
	c.closed[reason].Add(1)
}

// droppedUpdates counts the updates among items as dropped.
func (c *counters) droppedUpdates(items []item) {
	var n uint64
	for _, it := range items {
		if it.kind == itemUpdate {
			n++
		}
	}
	if n > 0 {
		c.dropped.Add(n)
	}
}

// Stats returns the registry's counters and how many watches and sessions
// are open.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	open, sessions := r.count, len(r.sessions)
	r.mu.Unlock()
	c := &r.ctr
	st := Stats{Open: open, Sessions: sessions, Added: c.added.Load(), Closed: make(map[Reason]uint64, len(Reasons)),
		Unwatched: c.unwatched.Load(), Disconnected: c.disconnected.Load(),
		Enqueued: c.enqueued.Load(), Delivered: c.delivered.Load(), Dropped: c.dropped.Load(), Overflowed: c.overflowed.Load()}
	for _, reason := range Reasons {
		st.Closed[reason] = c.closed[reason].Load()
	}
	return st
}
