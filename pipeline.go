package statestore

import (
	"fmt"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, s.errClosed()
	}
	queued := monoNow()
	s.queue = append(s.queue, o)
	s.driveLocked(o)
	s.mu.Unlock()
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
// untaken wakes the helper. s.mu is held on entry and on return.
func (s *Store) driveLocked(own *op) {
	for own == nil || !own.answered() {
		switch {
		case s.canWriteLocked():
			s.writeStageLocked()
		case s.canSyncLocked():
			s.roundLocked()
		default:
			return
		}
	}
	if s.hasWorkLocked() {
		s.helperWake.Signal()
	}
}

// hasWorkLocked reports whether a stage is free and has work. s.mu is held.
func (s *Store) hasWorkLocked() bool { return s.canWriteLocked() || s.canSyncLocked() }

// canWriteLocked reports whether the write stage is free and has a batch to
// admit now. s.mu is held.
func (s *Store) canWriteLocked() bool {
	switch {
	case len(s.queue) == 0 || s.admitting || s.paused:
		return false
	case s.reset && (len(s.inflight) > 0 || s.syncing):
		// The failed batch and everything admitted after it must be
		// answered before the pending view is rebuilt.
		return false
	}
	return !s.syncing || len(s.queue) >= minWriteBatch
}

// canSyncLocked reports whether the sync stage is free and a written batch
// waits for it. s.mu is held.
func (s *Store) canSyncLocked() bool { return len(s.inflight) > 0 && !s.syncing }

// writeStageLocked admits the queued ops (up to maxBatch) as one batch
// against the pending view, writes its records, and hands it to the sync
// stage. s.mu is held on entry and on return, released meanwhile.
func (s *Store) writeStageLocked() {
	if s.reset {
		s.resetPendingLocked()
	}
	n := min(len(s.queue), maxBatch)
	ops := append([]*op(nil), s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.admitting = true
	s.mu.Unlock()

	b := s.admitBatch(ops)
	s.metrics.batchOps.Observe(int64(len(ops)))
	err := s.writeBatch(b)

	s.mu.Lock()
	s.admitting = false
	if err != nil {
		s.reset = true
	}
	s.inflight = append(s.inflight, b)
	s.idle.Broadcast()
}

// helperLoop is the helper: woken when a caller leaves work untaken, it
// drives the pipeline until nothing is left.
func (s *Store) helperLoop() {
	defer s.loops.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.driveLocked(nil)
		if s.stopping {
			return
		}
		s.helperWake.Wait()
	}
}

// writeBatch writes the records of b as one journal write. On failure the
// batch fails.
func (s *Store) writeBatch(b *batch) error {
	if len(b.recs) == 0 {
		return nil
	}
	if _, err := s.jnl.Write(b.recs, b.last-uint64(len(b.recs))+1); err != nil {
		b.err = &Error{Code: Storage, Field: "journal", Message: err.Error(), Err: err}
		return err
	}
	return nil
}

// roundLocked runs one sync round over every written batch. s.mu is held
// on entry and on return, released meanwhile; the sync stage is free and a
// batch is written.
func (s *Store) roundLocked() {
	round := s.inflight
	poisoned := s.poisoned
	s.syncing = true
	s.mu.Unlock()

	poisoned, published, leases := s.syncRound(round, poisoned)

	s.mu.Lock()
	n := copy(s.inflight, s.inflight[len(round):])
	clear(s.inflight[n:])
	s.inflight = s.inflight[:n]
	s.syncing = false
	if poisoned {
		s.poisoned, s.reset = true, true
	}
	s.idle.Broadcast()
	s.mu.Unlock()
	s.afterRound(published, leases)
	s.mu.Lock()
}

// afterRound starts what a published round may call for: a background
// checkpoint, and a re-read of the earliest lease deadline.
func (s *Store) afterRound(published, leases bool) {
	if published && s.quit != nil {
		s.maybeCheckpoint()
	}
	if leases {
		select {
		case s.leasesChanged <- struct{}{}:
		default:
		}
	}
}

// admitBatch admits ops in arrival order against the pending view and
// gives the admitted records their journal indexes. Only the write stage
// calls it.
func (s *Store) admitBatch(ops []*op) *batch {
	b := s.newBatch(s.pending)
	b.ops = ops
	// Leases due now expire before any op of this batch can observe their
	// keys, in the same write.
	b.expireDue(b.now)
	for _, o := range ops {
		if e, err := b.admit(o); err != nil {
			o.err = err
		} else if e != nil {
			o.res = *e
		}
	}
	if len(b.recs) > 0 {
		s.pending = b.view
		b.last = s.nextIndex + uint64(len(b.recs)) - 1
		s.nextIndex = b.last + 1
	}
	return b
}

// syncRound syncs the written batches of round with one fdatasync, then
// publishes and answers them in order. poisoned says an earlier batch
// failed; it returns whether one has now, and whether any batch was
// published and any lease changed.
func (s *Store) syncRound(round []*batch, poisoned bool) (stillPoisoned, published, leases bool) {
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
		serr = s.jnl.Sync(upTo)
		s.metrics.synced(monoNow()-start, records)
		if serr != nil {
			durable = s.jnl.LastIndex()
			serr = &Error{Code: Storage, Field: "journal", Message: serr.Error(), Err: serr}
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
// replaced the view. s.mu is held.
func (s *Store) resetPendingLocked() {
	v, idx := s.snapshot()
	s.pending, s.nextIndex = v, idx+1
	s.reset, s.poisoned = false, false
}

// quietLocked waits until no batch is being admitted, written or synced,
// and (with queue) no op is queued. s.mu is held.
func (s *Store) quietLocked(queue bool) {
	for s.admitting || len(s.inflight) > 0 || s.syncing || (queue && len(s.queue) > 0) {
		// Every goroutine that leaves a stage hands on what it leaves, so
		// this wake is a guard: a missed hand-off would hang Close.
		if s.hasWorkLocked() {
			s.helperWake.Signal()
		}
		s.idle.Wait()
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

// expiry commits lapsed leases when nobody else is writing: it sleeps until
// the earliest deadline of the published view (re-arming whenever a commit
// may have changed it) and then submits an expire op, which commits every
// due lease as EXPIRE records.
func (s *Store) expiry() {
	defer close(s.expiryDone)
	var (
		timer    clock.Timer
		timerC   <-chan time.Time
		armedFor int64
	)
	for {
		if next, ok := s.view.Load().NextDeadline(); ok && next != armedFor {
			if timer != nil {
				timer.Stop()
			}
			armedFor = next
			timer = clock.TimerAt(s.clock, time.UnixMilli(next))
			timerC = timer.C()
		}
		select {
		case <-timerC:
			fired := armedFor
			timer, timerC, armedFor = nil, nil, 0
			if _, err := s.submit(&op{kind: opExpire}); err != nil {
				if CodeOf(err) == Unavailable {
					return
				}
				// The disk refused (full, with the reserve used up, or
				// failing): try again after expiryRetry, not at once.
				armedFor = fired
				timer = clock.TimerAt(s.clock, s.clock.Now().Add(expiryRetry))
				timerC = timer.C()
			}
		case <-s.leasesChanged:
		case <-s.quit:
			if timer != nil {
				timer.Stop()
			}
			return
		}
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

// expireDue adds one EXPIRE per lease due at now, earliest deadline first,
// and returns how many.
func (b *batch) expireDue(now int64) int {
	var due []*Entry
	b.view.Due(now, func(e *Entry) bool { due = append(due, e); return true })
	for _, e := range due {
		rev := b.view.Namespace(e.Namespace).Revision + 1
		b.add(&journal.Record{Kind: journal.KindExpire, Namespace: e.Namespace, Key: e.Key, Revision: rev})
	}
	return len(due)
}

// commitAlone writes, syncs and publishes b outside the pipeline, for Open
// (before anything else can commit).
func (s *Store) commitAlone(b *batch) error {
	if len(b.recs) > 0 {
		first, err := s.jnl.Append(b.recs)
		if err != nil {
			return &Error{Code: Storage, Field: "journal", Message: err.Error(), Err: err}
		}
		b.last = first + uint64(len(b.recs)) - 1
		s.publish(b)
	}
	s.pending, s.nextIndex = s.view.Load(), s.index+1
	return nil
}

// admit checks o against the batch's view (the published state plus the
// batch's earlier records) and, if it passes, adds its record. It returns
// the entry a PUT produces, or for a DELETE an entry carrying only the
// deletion's revision.
func (b *batch) admit(o *op) (*Entry, error) {
	s := b.s
	switch o.kind {
	case opExpire:
		return nil, nil
	case opPut:
		if err := s.checkReserve(); err != nil {
			return nil, err
		}
		old, exists := b.view.Get(o.ns, o.key)
		if err := checkExpect(o.expect, old, exists); err != nil {
			return nil, err
		}
		var oldSize int64
		created := b.now
		if exists {
			oldSize, created = old.Size(), old.CreatedMs
		}
		if err := s.limits.CheckPut(s.usage(b.view, o.ns), o.ns, exists, oldSize, int64(len(o.doc))); err != nil {
			return nil, &Error{Code: QuotaExceeded, Field: boundField(err), Message: err.Error(), Err: err}
		}
		var expires int64
		if o.ttl > 0 {
			expires = b.now + o.ttl.Milliseconds()
		}
		rec := &journal.Record{Kind: journal.KindPut, Namespace: o.ns, Key: o.key,
			Revision: b.view.Namespace(o.ns).Revision + 1, Schema: o.schema, Owner: o.owner,
			CreatedMs: created, UpdatedMs: b.now, ExpiresMs: expires, Document: o.doc}
		e, err := b.add(rec)
		if err != nil {
			return nil, err
		}
		// The result carries the caller's own bytes (equal to the stored
		// ones), so the store's copy is never handed out.
		c := *e
		c.Document = o.reply
		return &c, nil
	case opDelete:
		old, exists := b.view.Get(o.ns, o.key)
		if !exists {
			return nil, newErr(NotFound, "key", "%q not found in namespace %q", o.key, o.ns)
		}
		if err := checkExpect(o.expect, old, exists); err != nil {
			return nil, err
		}
		rev := b.view.Namespace(o.ns).Revision + 1
		if _, err := b.add(&journal.Record{Kind: journal.KindDelete, Namespace: o.ns, Key: o.key, Revision: rev}); err != nil {
			return nil, err
		}
		return &Entry{Namespace: o.ns, Key: o.key, Revision: rev}, nil
	}
	return nil, newErr(InvalidArgument, "op", "unknown operation %d", o.kind)
}

// checkExpect applies the expected_revision rules of the package documentation.
func checkExpect(x Expect, old *Entry, exists bool) error {
	want, set := x.Revision()
	if !set {
		return nil
	}
	var cur uint64
	if exists {
		cur = old.Revision
	}
	switch {
	case want == 0 && exists:
		return &Error{Code: Conflict, Field: "expected_revision", Message: "create-only write but the key exists", CurrentRevision: cur}
	case want != 0 && cur != want:
		return &Error{Code: Conflict, Field: "expected_revision", Message: fmt.Sprintf("expected revision %d", want), CurrentRevision: cur}
	}
	return nil
}

func boundField(err error) string {
	if b := quota.BoundOf(err); b != "" {
		return b
	}
	return "quota"
}
