package watch

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
)

// noDeadline marks "no update pending anywhere". Real deadlines are offsets
// from the registry's epoch of at least AckDeadline, so never negative.
const noDeadline = time.Duration(-1)

// Registry holds every open watch. All methods are safe for concurrent use;
// none blocks on a Sink.
type Registry struct {
	lim   Limits
	clk   clock.Clock
	epoch time.Time // times are kept as offsets from it (monotonic with the real clock)

	// mu guards everything below, every Session's watches and queue, and
	// every watch's counters. It is held only for in-memory bookkeeping,
	// never across a Deliver or a timer operation.
	mu       sync.Mutex
	stopped  bool
	sessions map[*Session]struct{}
	// byNS indexes open watches by namespace so Publish only looks at the
	// watches of the event's namespace. Each watch knows its index (idx)
	// for O(1) removal.
	byNS  map[string][]*watch
	count int
	// perPrincipal counts open watches by their session's principal.
	perPrincipal map[string]int
	lastSID      uint64
	// deadline is when the ack timer must fire (offset from epoch), or
	// noDeadline. Invariant: whenever some update is unacknowledged it is
	// set and not later than the earliest real deadline. Acks only move
	// real deadlines later, so they leave it alone: the timer may fire
	// early, and expire then re-arms it for the true earliest.
	deadline time.Duration
	scratch  []*watch
	// offered lists the sessions whose updates the running Publish hands
	// to their DirectSink at its end (offerLocked), and updates is that
	// hand-off's scratch; both empty between calls.
	offered []*Session
	updates []*Update

	ctr counters

	kick      chan struct{} // tells the timer goroutine that deadline changed
	quit      chan struct{}
	timerDone chan struct{}
	stopOnce  sync.Once
}

// watch is one registered watch. Its fields are guarded by Registry.mu,
// except closed, which the delivery goroutine reads without the lock.
type watch struct {
	s         *Session
	id        string
	namespace string
	prefix    string
	idx       int    // position in Registry.byNS[namespace]
	seq       uint64 // last sequence enqueued
	acked     uint64 // highest sequence acknowledged
	// queued counts this watch's updates in the session's queue and not
	// yet handed to the Sink. Publish reads and raises it under mu; the
	// delivery goroutine lowers it, without mu, just before Deliver.
	queued atomic.Int32
	// sent[n % MaxUnacked] is when update n was enqueued, for each
	// unacknowledged n in (acked, seq]: at most MaxUnacked of them, so the
	// slots never collide.
	sent   []time.Duration
	closed atomic.Bool
}

// NewRegistry returns an empty registry using l (zero fields take the
// defaults) and clk for the ack deadline (nil means the wall clock). It
// starts the registry's timer goroutine; Stop ends it.
func NewRegistry(l Limits, clk clock.Clock) *Registry {
	if clk == nil {
		clk = clock.Real{}
	}
	r := &Registry{
		lim: l.withDefaults(), clk: clk, epoch: clk.Now(),
		sessions: make(map[*Session]struct{}), byNS: make(map[string][]*watch), perPrincipal: make(map[string]int),
		deadline: noDeadline,
		kick:     make(chan struct{}, 1), quit: make(chan struct{}), timerDone: make(chan struct{}),
	}
	go r.timerLoop()
	return r
}

// Limits returns the limits in force, defaults applied.
func (r *Registry) Limits() Limits { return r.lim }

func (r *Registry) now() time.Duration { return r.clk.Now().Sub(r.epoch) }

// OpenSession registers one authenticated control channel and starts its
// delivery goroutine. After Stop it returns a session that is already
// closed (Add on it fails with ErrStopped).
func (r *Registry) OpenSession(principalID string, sink Sink) *Session {
	s := &Session{r: r, principal: principalID, sink: sink, watches: make(map[string]*watch),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.direct, _ = sink.(DirectSink)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSID++
	s.id = r.lastSID
	if r.stopped {
		s.closed.Store(true)
		close(s.done)
		return s
	}
	r.sessions[s] = struct{}{}
	go s.run()
	return s
}

// Add registers a watch of session s on (namespace, prefix) and enqueues its
// Snapshot (snapRev and entries as the store captured them) as the watch's
// first message. The store calls it under its commit-order lock, the same
// lock it holds around Publish, so the snapshot and the registration sit at
// one point in the commit order: every later Publish reaches the watch,
// none earlier does. It never blocks on a Sink. entries is handed to the
// Sink as is and must not be modified afterwards.
//
// Errors: ErrStopped, ErrSessionClosed, ErrDuplicateWatch (watch_id open in
// this session), or a *LimitError (ErrWatchLimit) naming the bound.
func (r *Registry) Add(s *Session, requestID uint64, watchID, namespace, prefix string, snapRev uint64, entries []*materialize.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopped:
		return ErrStopped
	case s.r != r:
		return fmt.Errorf("watch %q: session belongs to another registry: %w", watchID, ErrSessionClosed)
	case s.closed.Load():
		return ErrSessionClosed
	}
	if _, dup := s.watches[watchID]; dup {
		return fmt.Errorf("watch_id %q: %w", watchID, ErrDuplicateWatch)
	}
	if len(s.watches) >= r.lim.MaxPerSession {
		return &LimitError{Bound: BoundWatchesPerSession, Limit: r.lim.MaxPerSession}
	}
	if r.count >= r.lim.MaxWatches {
		return &LimitError{Bound: BoundWatches, Limit: r.lim.MaxWatches}
	}
	if r.perPrincipal[s.principal] >= r.lim.MaxPerPrincipal {
		return &LimitError{Bound: BoundWatchesPerPrincipal, Limit: r.lim.MaxPerPrincipal, Principal: s.principal}
	}
	w := &watch{s: s, id: watchID, namespace: namespace, prefix: prefix,
		sent: make([]time.Duration, r.lim.MaxUnacked)}
	ws := r.byNS[namespace]
	w.idx = len(ws)
	r.byNS[namespace] = append(ws, w)
	s.watches[watchID] = w
	r.count++
	r.perPrincipal[s.principal]++
	r.ctr.added.Add(1)
	s.push(item{w: w, kind: itemSnapshot, msg: &Snapshot{RequestID: requestID, WatchID: watchID,
		Namespace: namespace, KeyPrefix: prefix, SnapshotRevision: snapRev, Entries: entries}})
	return nil
}

// Remove ends a watch at the client's request (UnwatchState): its queued
// messages are dropped and no Closed message is sent. ErrUnknownWatch if
// the session has no open watch with that id.
func (r *Registry) Remove(s *Session, watchID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.lookup(s, watchID)
	if err != nil {
		return err
	}
	r.closeLocked(w, 0, "")
	return nil
}

func (r *Registry) lookup(s *Session, watchID string) (*watch, error) {
	if s.closed.Load() || s.r != r {
		return nil, ErrSessionClosed
	}
	w := s.watches[watchID]
	if w == nil {
		return nil, fmt.Errorf("watch_id %q: %w", watchID, ErrUnknownWatch)
	}
	return w, nil
}

// Ack records that the client applied every update of the watch up to and
// including sequence applied (WatchStateAck), freeing their buffer slots.
// An ack at or below one already recorded is a harmless no-op (acks may
// cross updates on the wire). An ack above the last sequence enqueued is a
// *SequenceError (ErrInvalidSequence): the client claims an update that
// does not exist. ErrUnknownWatch if the watch is not open.
func (r *Registry) Ack(s *Session, watchID string, applied uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.lookup(s, watchID)
	if err != nil {
		return err
	}
	if applied > w.seq {
		return &SequenceError{WatchID: watchID, Applied: applied, Last: w.seq}
	}
	if applied > w.acked {
		w.acked = applied
	}
	return nil
}

// Publish hands committed events, in commit order, to every matching watch
// (same namespace, key starting with the watch's prefix). The store calls it
// under its commit-order lock after the batch is durable. It only appends
// to session queues and wakes each touched session's goroutine (once per
// session, however many updates), or, for an idle session with a
// DirectSink, hands the session's updates to it in one OfferUpdates (see
// offerLocked); it never waits for a Sink. A watch that
// already holds MaxUnacked unacknowledged updates is closed with
// BufferOverflow instead of receiving the next one.
func (r *Registry) Publish(events []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.count == 0 {
		return
	}
	var now time.Duration
	haveNow := false
	bound := uint64(r.lim.MaxUnacked)
	// Counted once per call: the counters are shared by every core.
	var enqueued uint64
	defer func() { r.ctr.enqueued.Add(enqueued) }()
	for i := range events {
		ev := &events[i]
		ws := r.byNS[ev.Namespace]
		// One per event that reaches a watch, made at the first match.
		var memo *Memo
		// Walk backwards: closing ws[j] swap-deletes it, moving the last
		// element (already visited) into slot j, so nothing is skipped or
		// visited twice. Order across watches is irrelevant: each has its
		// own sequence, and events stay in commit order (outer loop).
		for j := len(ws) - 1; j >= 0; j-- {
			w := ws[j]
			if !strings.HasPrefix(ev.Key, w.prefix) {
				continue
			}
			if q := w.queued.Load(); w.seq-w.acked >= bound || int(q) >= r.lim.MaxUnacked {
				r.ctr.overflowed.Add(1)
				r.ctr.dropped.Add(1)
				r.closeLocked(w, BufferOverflow, fmt.Sprintf(
					"update buffer full: %d unacknowledged updates (limit %d), %d undelivered", w.seq-w.acked, bound, q))
				continue
			}
			if !haveNow {
				now, haveNow = r.now(), true
			}
			w.seq++
			w.sent[w.seq%bound] = now
			if w.seq-w.acked == 1 && r.deadline == noDeadline {
				r.deadline = now + r.lim.AckDeadline
				select {
				case r.kick <- struct{}{}:
				default:
				}
			}
			if memo == nil {
				memo = new(Memo)
			}
			u := &Update{WatchID: w.id, Sequence: w.seq, Revision: ev.Revision, Kind: ev.Kind,
				Namespace: ev.Namespace, Key: ev.Key, Memo: memo}
			if ev.Kind == Put {
				u.Entry = ev.Entry
			}
			enqueued++
			w.queued.Add(1)
			if s := w.s; s.idleLocked() {
				// Its goroutine stays asleep: offerLocked hands the
				// session's share of the call to its DirectSink.
				if !s.offered {
					s.offered = true
					r.offered = append(r.offered, s)
				}
				s.queue = append(s.queue, item{w: w, kind: itemUpdate, msg: u})
				continue
			}
			w.s.push(item{w: w, kind: itemUpdate, msg: u})
		}
	}
	for _, s := range r.offered {
		r.offerLocked(s)
	}
	clear(r.offered)
	r.offered = r.offered[:0]
}

// offerLocked hands the updates Publish queued for s, a session that was
// idle (nothing queued or being delivered) and has a DirectSink, to the
// sink in one OfferUpdates: one wake-up of the session's consumer for the
// whole commit, and none of its delivery goroutine. What the sink refuses,
// and whatever a closure queued behind the updates, is left in the queue
// for the goroutine, which delivers it in order: the refused update's
// watch is closed first (BufferOverflow), dropping its updates.
func (r *Registry) offerLocked(s *Session) {
	s.offered = false
	us := r.updates[:0]
	for _, it := range s.queue {
		if it.kind != itemUpdate {
			break
		}
		us = append(us, it.msg.(*Update))
	}
	n, err := s.direct.OfferUpdates(us)
	clear(us)
	r.updates = us[:0]
	for _, it := range s.queue[:n] {
		// Handed to the Sink: it no longer occupies the queue.
		it.w.queued.Add(-1)
	}
	r.ctr.delivered.Add(uint64(n))
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	if n < len(us) {
		it := s.queue[0]
		r.closeLocked(it.w, BufferOverflow, refusedMessage(it.msg.(*Update), err))
	}
	if len(s.queue) > 0 {
		s.signal()
	}
}

// refusedMessage is the Closed message of a watch whose Sink refused u.
func refusedMessage(u *Update, err error) string {
	return fmt.Sprintf("update %d could not be queued on the control channel: %v", u.Sequence, err)
}

// CloseWhere closes, with a Closed message carrying reason, every open
// watch for which close(principalID, namespace) returns true, and returns
// how many it closed. The embedder uses it with AuthorizationLost when it
// revokes or downgrades a principal: close returns true where the principal
// may no longer read the namespace. close runs under the registry's lock
// and must not call the registry.
func (r *Registry) CloseWhere(reason Reason, close func(principalID, namespace string) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closeWhereLocked(reason, close)
}

func (r *Registry) closeWhereLocked(reason Reason, close func(principalID, namespace string) bool) int {
	due := r.scratch[:0]
	for s := range r.sessions {
		for _, w := range s.watches {
			if close(s.principal, w.namespace) {
				due = append(due, w)
			}
		}
	}
	n := len(due)
	for _, w := range due {
		r.closeLocked(w, reason, closeMessage(reason))
	}
	clear(due)
	r.scratch = due[:0]
	return n
}

// CloseAll closes every open watch with reason (StoreClosed, Restored,
// Unavailable) and a Closed message, and returns how many. Sessions stay
// open and may add new watches (after a restore, clients re-watch with a
// fresh snapshot).
func (r *Registry) CloseAll(reason Reason) int {
	return r.CloseWhere(reason, func(string, string) bool { return true })
}

func closeMessage(reason Reason) string {
	switch reason {
	case AuthorizationLost:
		return "the principal is no longer authorized to watch this namespace"
	case StoreClosed:
		return "the state store is closing"
	case Restored:
		return "the state store was restored from a backup; re-watch for a fresh snapshot"
	case Unavailable:
		return "this node has lost its cluster's leader, so its state may be stale; re-watch for a fresh snapshot, on another node if you can"
	}
	return reason.String()
}

// Stop closes every watch with StoreClosed, lets each session deliver what
// it has queued (those Closed messages included), then stops every session
// goroutine and the timer, and returns when they have exited. Afterwards Add
// returns ErrStopped and Publish does nothing. Stop is idempotent; it waits
// for Sinks, so it must not be called from Deliver.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		// Closing and refusing new watches in one critical section: no Add
		// can slip in between and be left open without a Closed message.
		r.closeWhereLocked(StoreClosed, func(string, string) bool { return true })
		r.stopped = true
		r.deadline = noDeadline
		sessions := make([]*Session, 0, len(r.sessions))
		for s := range r.sessions {
			s.draining = true
			s.signal()
			sessions = append(sessions, s)
		}
		r.mu.Unlock()
		close(r.quit)
		<-r.timerDone
		for _, s := range sessions {
			<-s.done
		}
	})
}

// Len returns the number of open watches in the registry.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// closeLocked ends w: it leaves the namespace index and its session, stops
// counting against the limits, and its queued updates are dropped. With a
// reason (non-zero), a Closed message is enqueued as its last message.
//
// A queued Snapshot is kept: it is the reply (StateStoreResult) to the
// client's WatchState request, and dropping it would leave that request
// unanswered. It reflects state at a commit point before the close, which
// the client was entitled to then, and the Closed message follows it.
func (r *Registry) closeLocked(w *watch, reason Reason, msg string) {
	r.unindexLocked(w)
	s := w.s
	delete(s.watches, w.id)
	// Drop w's queued updates: the client must re-snapshot anyway, and
	// this is what keeps a closed watch from holding memory.
	q := s.queue[:0]
	for _, it := range s.queue {
		if it.w != w || it.kind != itemUpdate {
			q = append(q, it)
		} else {
			r.ctr.dropped.Add(1)
		}
	}
	r.ctr.ended(reason)
	clear(s.queue[len(q):])
	s.queue = q
	if reason != 0 {
		s.push(item{w: w, kind: itemClosed, msg: &Closed{WatchID: w.id, Reason: reason, Message: msg}})
	}
}

// unindexLocked marks w closed and removes it from byNS and the count.
func (r *Registry) unindexLocked(w *watch) {
	w.closed.Store(true)
	ws := r.byNS[w.namespace]
	last := len(ws) - 1
	if w.idx != last {
		ws[w.idx] = ws[last]
		ws[w.idx].idx = w.idx
	}
	ws[last] = nil
	if last == 0 {
		delete(r.byNS, w.namespace)
	} else {
		r.byNS[w.namespace] = ws[:last]
	}
	r.count--
	if r.perPrincipal[w.s.principal]--; r.perPrincipal[w.s.principal] == 0 {
		delete(r.perPrincipal, w.s.principal)
	}
}

// deliveryFailed closes the watch whose message the Sink refused.
func (r *Registry) deliveryFailed(it item, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if it.w.closed.Load() {
		return
	}
	if it.kind == itemSnapshot {
		r.closeLocked(it.w, SnapshotDeliveryFailed, fmt.Sprintf("snapshot could not be queued: %v", err))
		return
	}
	r.closeLocked(it.w, BufferOverflow, refusedMessage(it.msg.(*Update), err))
}

// timerLoop keeps one clock timer armed for r.deadline. It re-arms when
// Publish sets a deadline (kick) and after each expiry scan.
func (r *Registry) timerLoop() {
	defer close(r.timerDone)
	var (
		t     clock.Timer
		tc    <-chan time.Time
		armed = noDeadline
	)
	for {
		select {
		case <-r.quit:
			if t != nil {
				t.Stop()
			}
			return
		case <-r.kick:
		case <-tc:
			t, tc, armed = nil, nil, noDeadline
			r.expire()
		}
		r.mu.Lock()
		want := r.deadline
		r.mu.Unlock()
		if want == armed {
			continue
		}
		if t != nil {
			t.Stop()
			t, tc = nil, nil
		}
		armed = want
		if want != noDeadline {
			t = clock.TimerAt(r.clk, r.epoch.Add(want))
			tc = t.C()
		}
	}
}

// expire closes, with AckTimeout, every watch whose oldest unacknowledged
// update has waited AckDeadline or longer, and sets deadline to the
// earliest remaining one. A scan of all watches is fine: it runs at most
// once per timer firing, and the registry holds at most MaxWatches.
func (r *Registry) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	now := r.now()
	bound := uint64(r.lim.MaxUnacked)
	next := noDeadline
	due := r.scratch[:0]
	for _, ws := range r.byNS {
		for _, w := range ws {
			if w.seq == w.acked {
				continue
			}
			d := w.sent[(w.acked+1)%bound] + r.lim.AckDeadline
			if d <= now {
				due = append(due, w)
			} else if next == noDeadline || d < next {
				next = d
			}
		}
	}
	for _, w := range due {
		r.closeLocked(w, AckTimeout, fmt.Sprintf("update %d unacknowledged for %v (deadline %v)",
			w.acked+1, now-w.sent[(w.acked+1)%bound], r.lim.AckDeadline))
	}
	clear(due)
	r.scratch = due[:0]
	r.deadline = next
}
