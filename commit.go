package statestore

import (
	"fmt"
	"sync"
	"time"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

// The commit pipeline, in commit order:
//
//	admit (against the pending view: the published one plus every batch
//	       admitted but not yet answered)
//	  -> journal write (one WriteBatch to the page cache)
//	  -> journal sync (one fdatasync for every batch written meanwhile)
//	  -> apply (publish the batch's view)
//	  -> notify (watch hooks, in commit order)
//	  -> reply
//
// It has two stages, each held by one goroutine at a time: the write stage
// admits the queued ops as one batch and writes its records; the sync
// stage syncs every written batch with one fdatasync, then publishes and
// answers them in order. So while one fdatasync is in flight the next
// batches are admitted and written, and each fdatasync covers everything
// written during the one before it.
//
// The callers run the stages themselves: a caller queues its op and then,
// until the op is answered, takes whichever stage is free and has work.
// Under load the goroutines that are already running do the work, so no
// step waits for a pipeline goroutine to be scheduled behind a hundred
// runnable callers (with 127 writers on two cores, dedicated stage
// goroutines were seen waiting 300 µs and more for a CPU while ops piled
// up). A lone writer runs both stages for its own op without a single
// goroutine wake-up. A caller whose op has been answered returns;
// if it leaves work that no running caller has taken, it wakes the helper,
// a goroutine that drives the pipeline until it is empty, so work never
// waits for the next caller to arrive.
//
// A goroutine that may take either stage takes the sync stage first: the
// disk is the scarce resource, so a written batch starts its fdatasync
// before another batch is admitted. A sync that starts while other callers
// are queued (or several batches wait) parks on the journal's io_uring
// (journal.SyncParked) rather than holding a processor in the system call:
// with two processors, a held one left a hundred callers one CPU, and an
// execution trace showed runnable goroutines with nothing running a fifth
// of the time. A lone writer's sync holds its processor, the faster way
// when nobody else needs it. Each caller polls the journal on its way in,
// so a finished sync is noticed even when every processor is busy.
//
// While a sync runs, the write stage lets a batch gather to minWriteBatch
// ops: each batch clones the view, copies the tree paths it touches and
// costs a write system call.
//
// Validation that needs no state (identifiers, policy, schema, TTL) runs in
// the caller's goroutine before the op is queued, so the write stage's
// serial work per op is a few map and tree operations.
//
// Failure: a batch whose write or sync fails is answered STORAGE, and so is
// every batch after it (each was admitted against state that included
// it), until the pipeline drains; the write stage then rebuilds the pending
// view from the published one. The journal cuts its files back to the last
// synced record, so disk and memory agree again. A batch that was synced
// is always published, whatever fails after it.

// pipeline is the commit pipeline's state, one value in the Store: the
// queue, the two stages and what they own, and the channels of the loops
// that feed and follow it (the helper and the lease-expiry loop).
type pipeline struct {
	// mu guards the commit queue and the stages.
	mu         sync.Mutex
	helperWake *sync.Cond // wakes the helper
	idle       *sync.Cond // signalled when the pipeline may have gone quiet
	closed     bool       // no new op is accepted
	stopping   bool       // the helper exits once quiet
	paused     bool       // an exclusive section holds the write stage off
	admitting  bool       // the write stage is held
	syncing    bool       // the sync stage is held
	queue      []*op
	inflight   []*batch // written batches awaiting their sync, in order
	poisoned   bool     // a batch failed: later ones fail until the pipeline drains
	reset      bool     // pending must be rebuilt before the next batch
	loops      sync.WaitGroup

	// Owned by the write stage: the published view plus every admitted
	// batch, and the journal index its next record gets.
	pending   *materialize.View
	nextIndex uint64

	leasesChanged chan struct{}
	quit          chan struct{}
	expiryDone    chan struct{}
}

// init readies p for its first op, in place (its conditions point at
// its own mutex).
func (p *pipeline) init() {
	p.helperWake = sync.NewCond(&p.mu)
	p.idle = sync.NewCond(&p.mu)
	p.leasesChanged = make(chan struct{}, 1)
}

type opKind int

const (
	opPut opKind = iota
	opDelete
	opExpire // no mutation of its own: commits every due lease, then replies
)

type op struct {
	kind   opKind
	owner  string
	ns     string
	key    string
	schema string
	doc    []byte // the store's own copy, kept in the view
	reply  []byte // the caller's document, returned in the result entry
	expect Expect
	ttl    time.Duration

	res  Entry
	err  error
	done chan struct{} // closed once res and err are final
}

// maxBatch bounds one group commit so one write never carries an unbounded
// batch and no caller waits behind an arbitrarily long one.
const maxBatch = 512

// minWriteBatch is the batch size the write stage waits for while a sync
// is in flight.
const minWriteBatch = 32

// submit queues o, drives the pipeline while o is unanswered and a stage
// is free, and returns o's outcome once its batch is synced and published
// (or failed). Once queued, an op is always answered, never abandoned.
func (s *Store) submit(o *op) (Entry, error) {
	o.done = make(chan struct{})
	// A sync in flight may have finished while every P was busy (this
	// goroutine's among them): hand it on before queueing behind it.
	s.jnl.Poll()
	s.pipe.mu.Lock()
	if s.pipe.closed {
		s.pipe.mu.Unlock()
		return Entry{}, s.errClosed()
	}
	queued := monoNow()
	s.pipe.queue = append(s.pipe.queue, o)
	s.driveLocked(o)
	s.pipe.mu.Unlock()
	<-o.done
	s.metrics.answered(o, queued)
	return o.res, o.err
}

// answered reports whether o's outcome is final.
func (o *op) answered() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// driveLocked runs free pipeline stages that have work, in the calling
// goroutine, while own is unanswered (own is nil for the helper, which
// drives until nothing is left). A caller that returns with work left
// untaken wakes the helper. s.pipe.mu is held on entry and on return.
func (s *Store) driveLocked(own *op) {
	for own == nil || !own.answered() {
		switch {
		case s.canSyncLocked():
			s.roundLocked()
		case s.canWriteLocked():
			s.writeStageLocked()
		default:
			return
		}
	}
	if s.hasWorkLocked() {
		s.pipe.helperWake.Signal()
	}
}

// hasWorkLocked reports whether a stage is free and has work. s.pipe.mu is held.
func (s *Store) hasWorkLocked() bool { return s.canWriteLocked() || s.canSyncLocked() }

// canWriteLocked reports whether the write stage is free and has a batch to
// admit now. s.pipe.mu is held.
func (s *Store) canWriteLocked() bool {
	switch {
	case len(s.pipe.queue) == 0 || s.pipe.admitting || s.pipe.paused:
		return false
	case s.pipe.reset && (len(s.pipe.inflight) > 0 || s.pipe.syncing):
		// The failed batch and everything admitted after it must be
		// answered before the pending view is rebuilt.
		return false
	}
	return !s.pipe.syncing || len(s.pipe.queue) >= minWriteBatch
}

// canSyncLocked reports whether the sync stage is free and a written batch
// waits for it. s.pipe.mu is held.
func (s *Store) canSyncLocked() bool { return len(s.pipe.inflight) > 0 && !s.pipe.syncing }

// writeStageLocked admits the queued ops (up to maxBatch) as one batch
// against the pending view, writes its records, and hands it to the sync
// stage. s.pipe.mu is held on entry and on return, released meanwhile.
func (s *Store) writeStageLocked() {
	if s.pipe.reset {
		s.resetPendingLocked()
	}
	n := min(len(s.pipe.queue), maxBatch)
	ops := append([]*op(nil), s.pipe.queue[:n]...)
	rest := copy(s.pipe.queue, s.pipe.queue[n:])
	clear(s.pipe.queue[rest:])
	s.pipe.queue = s.pipe.queue[:rest]
	s.pipe.admitting = true
	s.pipe.mu.Unlock()

	b := s.admitBatch(ops)
	s.metrics.batchOps.Observe(int64(len(ops)))
	err := s.writeBatch(b)

	s.pipe.mu.Lock()
	s.pipe.admitting = false
	if err != nil {
		s.pipe.reset = true
	}
	s.pipe.inflight = append(s.pipe.inflight, b)
	s.pipe.idle.Broadcast()
}

// helperLoop is the helper: woken when a caller leaves work untaken, it
// drives the pipeline until nothing is left.
func (s *Store) helperLoop() {
	defer s.pipe.loops.Done()
	s.pipe.mu.Lock()
	defer s.pipe.mu.Unlock()
	for {
		s.driveLocked(nil)
		if s.pipe.stopping {
			return
		}
		s.pipe.helperWake.Wait()
	}
}

// writeBatch writes the records of b as one journal write. On failure the
// batch fails.
func (s *Store) writeBatch(b *batch) error {
	if len(b.recs) == 0 {
		return nil
	}
	if _, err := s.jnl.Write(b.recs, b.last-uint64(len(b.recs))+1); err != nil {
		b.err = wrapErr(Storage, "journal", err)
		return err
	}
	return nil
}

// roundLocked runs one sync round over every written batch. s.pipe.mu is held
// on entry and on return, released meanwhile; the sync stage is free and a
// batch is written.
func (s *Store) roundLocked() {
	round := s.pipe.inflight
	poisoned := s.pipe.poisoned
	// Other callers are waiting for the CPU: park during the fdatasync
	// rather than hold a processor (journal.SyncParked).
	park := len(s.pipe.queue) > 0 || len(round) > 1 || s.pipe.admitting
	s.pipe.syncing = true
	s.pipe.mu.Unlock()

	poisoned, published, leases := s.syncRound(round, poisoned, park)

	s.pipe.mu.Lock()
	n := copy(s.pipe.inflight, s.pipe.inflight[len(round):])
	clear(s.pipe.inflight[n:])
	s.pipe.inflight = s.pipe.inflight[:n]
	s.pipe.syncing = false
	if poisoned {
		s.pipe.poisoned, s.pipe.reset = true, true
	}
	s.pipe.idle.Broadcast()
	s.pipe.mu.Unlock()
	s.afterRound(published, leases)
	s.pipe.mu.Lock()
}

// afterRound starts what a published round may call for: a background
// checkpoint, and a re-read of the earliest lease deadline.
func (s *Store) afterRound(published, leases bool) {
	if published && s.pipe.quit != nil {
		s.maybeCheckpoint()
	}
	if leases {
		select {
		case s.pipe.leasesChanged <- struct{}{}:
		default:
		}
	}
}

// admitBatch admits ops in arrival order against the pending view and
// gives the admitted records their journal indexes. Only the write stage
// calls it.
func (s *Store) admitBatch(ops []*op) *batch {
	b := s.newBatch(s.pipe.pending)
	b.ops = ops
	// Leases due now expire before any op of this batch can observe their
	// keys, in the same write. If that fails, admission is broken: the
	// batch fails whole, writes nothing and leaves pending as it was.
	if _, err := b.expireDue(b.now); err != nil {
		b.err, b.recs, b.entries = err, nil, nil
		return b
	}
	for _, o := range ops {
		if e, err := b.admit(o); err != nil {
			o.err = err
		} else if e != nil {
			o.res = *e
		}
	}
	if len(b.recs) > 0 {
		s.pipe.pending = b.view
		b.last = s.pipe.nextIndex + uint64(len(b.recs)) - 1
		s.pipe.nextIndex = b.last + 1
	}
	return b
}

// syncRound syncs the written batches of round with one fdatasync, then
// publishes and answers them in order. poisoned says an earlier batch
// failed; park, that the fdatasync should park rather than hold a
// processor. It returns whether a batch has failed now, and whether any
// batch was published and any lease changed.
func (s *Store) syncRound(round []*batch, poisoned, park bool) (stillPoisoned, published, leases bool) {
	var upTo uint64
	records := 0
	for _, b := range round {
		if b.err == nil {
			upTo = max(upTo, b.last)
			records += len(b.recs)
		}
	}
	var serr error
	durable := upTo
	if upTo > 0 {
		start := monoNow()
		if park {
			serr = s.jnl.SyncParked(upTo)
		} else {
			serr = s.jnl.Sync(upTo)
		}
		s.metrics.synced(monoNow()-start, records)
		if serr != nil {
			durable = s.jnl.LastIndex()
			serr = wrapErr(Storage, "journal", serr)
		}
	}
	for _, b := range round {
		switch {
		case b.err != nil:
			poisoned = true
		case poisoned:
			b.err = newErr(Storage, "journal", "an earlier batch failed to commit")
		case b.last > durable:
			b.err, poisoned = serr, true
		case len(b.recs) > 0:
			s.publish(b)
			leases = leases || b.leases
			published = true
		}
		b.answer()
	}
	return poisoned, published, leases
}

// resetPendingLocked rebuilds the write stage's state from the published view
// once the pipeline has drained: after a failure, or after a restore
// replaced the view. s.pipe.mu is held.
func (s *Store) resetPendingLocked() {
	v, idx := s.snapshot()
	s.pipe.pending, s.pipe.nextIndex = v, idx+1
	s.pipe.reset, s.pipe.poisoned = false, false
}

// quietLocked waits until no batch is being admitted, written or synced,
// and (with queue) no op is queued. s.pipe.mu is held.
func (s *Store) quietLocked(queue bool) {
	for s.pipe.admitting || len(s.pipe.inflight) > 0 || s.pipe.syncing || (queue && len(s.pipe.queue) > 0) {
		// Every goroutine that leaves a stage hands on what it leaves, so
		// this wake is a guard: a missed hand-off would hang Close.
		if s.hasWorkLocked() {
			s.pipe.helperWake.Signal()
		}
		s.pipe.idle.Wait()
	}
}

// publish makes a synced batch visible: its view, its journal index and its
// watch updates, as one step in the commit order.
func (s *Store) publish(b *batch) {
	var events []watch.Event
	if s.watches != nil {
		events = b.events()
	}
	s.pubMu.Lock()
	s.view.Store(b.view)
	s.index = b.last
	if events != nil {
		s.watches.Publish(events)
	}
	s.pubMu.Unlock()
}

// answer replies to every op of b: a failed batch fails them all, since
// even an op admission refused was judged against state that never
// committed.
func (b *batch) answer() {
	for _, o := range b.ops {
		if b.err != nil {
			o.res, o.err = Entry{}, b.err
		}
		close(o.done)
	}
}

// batch is one group commit in the making: a private clone of the pending
// view with the batch's admitted records applied, and those records.
type batch struct {
	s    *Store
	view *materialize.View
	recs []*journal.Record
	now  int64
	// leases is set when the batch adds or removes a lease, so the expiry
	// goroutine re-reads the earliest deadline.
	leases bool
	// entries[i] is the entry recs[i] produced (PUT) or removed.
	entries []*Entry

	ops  []*op // every op of the batch, answered together
	last uint64
	err  error // the write failed, or the batch failed in the pipeline
}

func (s *Store) newBatch(from *materialize.View) *batch {
	return &batch{s: s, view: from.Clone(), now: s.clock.Now().UnixMilli()}
}

// add applies rec to the batch's view. Admission already checked it, so a
// refusal here is a bug in admission, reported rather than hidden.
func (b *batch) add(rec *journal.Record) (*Entry, error) {
	rec.TimeMs = b.now
	if rec.ExpiresMs != 0 || rec.Kind == journal.KindExpire {
		b.leases = true
	}
	e, err := b.view.Apply(rec)
	if err != nil {
		return nil, &Error{Code: Storage, Field: "journal", Message: fmt.Sprintf("internal: admitted record refused: %v", err), Err: err}
	}
	b.recs = append(b.recs, rec)
	b.entries = append(b.entries, e)
	return e, nil
}

// commitAlone writes, syncs and publishes b outside the pipeline, for Open
// (before anything else can commit).
func (s *Store) commitAlone(b *batch) error {
	if len(b.recs) > 0 {
		first, err := s.jnl.Append(b.recs)
		if err != nil {
			return wrapErr(Storage, "journal", err)
		}
		b.last = first + uint64(len(b.recs)) - 1
		s.publish(b)
	}
	s.pipe.pending, s.pipe.nextIndex = s.view.Load(), s.index+1
	return nil
}
