package watch

import "sync/atomic"

// Session is one authenticated control channel and the watches it opened.
// Its messages reach its Sink in enqueue order from one goroutine.
type Session struct {
	r         *Registry
	id        uint64
	principal string
	sink      Sink
	direct    DirectSink // sink, when it is one

	// Guarded by r.mu.
	watches  map[string]*watch
	queue    []item
	draining bool // Stop: deliver what is queued, then exit
	// busy: the delivery goroutine holds a batch swapped out of queue and
	// may be inside Deliver, so an update must queue behind it.
	busy bool
	// offered: the running Publish queued an update for the DirectSink
	// without waking the goroutine, and hands it over at its end.
	offered bool

	// closed is written under r.mu and read by the delivery goroutine
	// without it, so that Close stops delivery between two messages.
	closed atomic.Bool
	wake   chan struct{} // capacity 1: "the queue may be non-empty"
	done   chan struct{} // closed when the delivery goroutine has exited
}

type itemKind uint8

const (
	itemSnapshot itemKind = iota
	itemUpdate
	itemClosed
)

// item is one queued message and the watch it belongs to, so that messages
// of a closed watch can be dropped (by pointer, which also keeps a reused
// watch_id apart from its predecessor).
type item struct {
	w    *watch
	kind itemKind
	msg  Message
}

// ID returns the session's registry-unique id (1, 2, ...).
func (s *Session) ID() uint64 { return s.id }

// PrincipalID returns the principal the session was opened for.
func (s *Session) PrincipalID() string { return s.principal }

// Len returns the number of open watches in the session.
func (s *Session) Len() int {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return len(s.watches)
}

// Done is closed when the session's delivery goroutine has exited (after
// Close, or after Stop has drained it).
func (s *Session) Done() <-chan struct{} { return s.done }

// Close disconnects the session: its watches are removed without Closed
// messages (nobody is listening), its queued messages are dropped, their
// slots are freed, and its delivery goroutine stops. Close is idempotent
// and does not wait, so it may be called from Deliver; a Deliver already
// in progress finishes, and no other starts. Wait on Done to know the
// goroutine has exited.
func (s *Session) Close() {
	r := s.r
	r.mu.Lock()
	if s.closed.Load() {
		r.mu.Unlock()
		return
	}
	s.closed.Store(true)
	for _, w := range s.watches {
		r.unindexLocked(w)
	}
	r.ctr.disconnected.Add(uint64(len(s.watches)))
	r.ctr.droppedUpdates(s.queue)
	clear(s.watches)
	clear(s.queue)
	s.queue = nil
	delete(r.sessions, s)
	r.mu.Unlock()
	s.signal()
}

// Drain delivers what is queued for the session, the Closed messages of a
// CloseWhere that just returned included, then stops its delivery
// goroutine, and returns once it has exited. Its watches stay registered
// until Close, but nothing queued after Drain is delivered. It is for
// ending a session on purpose: its Sink learns why its watches went before
// the channel closes. It waits for the Sink, so it must not be called from
// Deliver.
func (s *Session) Drain() {
	s.r.mu.Lock()
	s.draining = true
	s.signal()
	s.r.mu.Unlock()
	<-s.done
}

// idleLocked reports (r.mu held) whether an update may go straight to the
// session's DirectSink: nothing of the session's is queued or being
// delivered, so it cannot overtake an earlier message, and Drain has not
// been asked for.
func (s *Session) idleLocked() bool {
	return s.offered || (s.direct != nil && len(s.queue) == 0 && !s.busy && !s.draining)
}

// push appends it to the queue (r.mu held) and wakes the goroutine if the
// queue was empty: a non-empty queue already has a wake-up pending or a
// goroutine about to look at it, so one Publish wakes a session once.
func (s *Session) push(it item) {
	if len(s.queue) == 0 {
		s.signal()
	}
	s.queue = append(s.queue, it)
}

func (s *Session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the session's delivery goroutine. It swaps the whole queue out
// under the lock (reusing the two slices, so steady state allocates
// nothing) and delivers it without the lock, skipping updates of watches
// closed meanwhile: a Closed message is always the last one for its watch,
// because it is enqueued after everything else that is kept for it.
func (s *Session) run() {
	r := s.r
	defer close(s.done)
	var batch []item
	for {
		r.mu.Lock()
		s.busy = false
		clear(batch)
		batch = batch[:0]
		if s.closed.Load() || (s.draining && len(s.queue) == 0) {
			r.mu.Unlock()
			return
		}
		if len(s.queue) == 0 {
			r.mu.Unlock()
			<-s.wake
			continue
		}
		batch, s.queue = s.queue, batch
		s.busy = true
		r.mu.Unlock()
		for i, it := range batch {
			if s.closed.Load() {
				// Swapped out before Close, so Close did not count these.
				r.ctr.droppedUpdates(batch[i:])
				break
			}
			if it.kind == itemUpdate {
				if it.w.closed.Load() {
					r.ctr.dropped.Add(1)
					continue
				}
				// Handed to the Sink now: it no longer occupies our queue.
				it.w.queued.Add(-1)
			}
			err := s.sink.Deliver(it.msg)
			switch {
			case err != nil && it.kind == itemUpdate:
				r.ctr.dropped.Add(1)
				r.deliveryFailed(it, err)
			case err != nil && it.kind != itemClosed:
				r.deliveryFailed(it, err)
			case err == nil && it.kind == itemUpdate:
				r.ctr.delivered.Add(1)
			}
		}
	}
}
