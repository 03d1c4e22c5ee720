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
// Three goroutines run it, each a loop that keeps going while it has work,
// so under load no step waits to be scheduled except the callers. The
// committer admits queued ops against the pending view, one batch at a
// time, and gives their records journal indexes. The writer hands every
// admitted batch to the journal in one write. The syncer syncs every
// written batch with one fdatasync, then publishes and answers them in
// order. So while one fdatasync is in flight the next batches are admitted
// and written, and each fdatasync covers everything written during the one
// before it; and admission (tree work) overlaps the journal's copying. While
// a sync runs, the committer lets a batch gather to minWriteBatch ops: each
// batch clones the view and copies the tree paths it touches. A write that
// finds the pipeline empty runs the three steps in its own goroutine
// instead (commitDirect), so a lone writer pays no goroutine wake-ups.
//
// Validation that needs no state (identifiers, policy, schema, TTL) runs in
// the caller's goroutine before the op is queued, so the committer's serial
// work per op is a few map and tree operations.
//
// Failure: a batch whose write or sync fails is answered STORAGE, and so is
// every batch after it (each was admitted against state that included
// it), until the pipeline drains; the committer then rebuilds the pending
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

// minWriteBatch is the batch size the committer waits for before admitting
// while a sync is in flight.
const minWriteBatch = 32

// submit queues o and returns its outcome once its batch is synced and
// published (or failed). Once queued, an op is always answered, never
// abandoned.
func (s *Store) submit(o *op) (Entry, error) {
	o.done = make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, newErr(Unavailable, "store", "the store is closed")
	}
	if s.idleLocked() {
		s.direct = true
		s.mu.Unlock()
		s.commitDirect(o)
		return o.res, o.err
	}
	s.queue = append(s.queue, o)
	if n := len(s.queue); n == 1 || n == minWriteBatch {
		s.work.Signal()
	}
	s.mu.Unlock()
	<-o.done
	return o.res, o.err
}

// idleLocked reports whether nothing is queued or in the pipeline, so a
// submitter may run all three stages itself. s.mu is held.
func (s *Store) idleLocked() bool {
	return len(s.queue) == 0 && len(s.inflight) == 0 && !s.admitting && !s.writing &&
		!s.syncing && !s.direct && !s.paused && !s.reset
}

// commitDirect admits and writes o in the caller's goroutine, and syncs it
// there too unless a sync is already running: with nothing else in the
// pipeline, handing o to the committer, writer and syncer in turn would
// only add three goroutine wake-ups to the latency of every lone write.
// s.direct holds the committer off until o is written; ops that arrive
// after that are admitted and written while o's fdatasync runs, and the
// syncer takes them once it ends.
func (s *Store) commitDirect(o *op) {
	b := s.admitBatch([]*op{o})
	err := s.writeBatches([]*batch{b})
	s.mu.Lock()
	s.direct = false
	if err != nil {
		s.reset = true
	}
	// The pipeline was empty and held off: b is the only batch in it.
	s.inflight = append(s.inflight, b)
	s.nwritten++
	s.work.Signal()
	if !s.syncing {
		s.roundLocked()
	}
	s.mu.Unlock()
	<-o.done
}

// commitLoop is the committer: it admits queued ops, one batch at a time,
// against the pending view, and queues each batch for the writer.
func (s *Store) commitLoop() {
	defer s.loops.Done()
	s.mu.Lock()
	for {
		switch {
		case s.reset && (len(s.inflight) > 0 || s.writing || s.syncing):
			// Wait for the failed batch and everything admitted after
			// it to be answered before rebuilding the pending view.
			s.work.Wait()
			continue
		case s.reset:
			s.resetPendingLocked()
		}
		if s.stopping {
			s.mu.Unlock()
			return
		}
		if len(s.queue) == 0 || s.paused || s.direct || (s.syncing && len(s.queue) < minWriteBatch) {
			s.work.Wait()
			continue
		}
		n := min(len(s.queue), maxBatch)
		ops := append([]*op(nil), s.queue[:n]...)
		s.queue = append(s.queue[:0], s.queue[n:]...)
		s.admitting = true
		s.mu.Unlock()

		b := s.admitBatch(ops)

		s.mu.Lock()
		s.admitting = false
		s.inflight = append(s.inflight, b)
		s.written.Signal()
	}
}

// writeLoop is the writer: it hands every admitted batch not yet written
// to the journal as one write.
func (s *Store) writeLoop() {
	defer s.loops.Done()
	s.mu.Lock()
	for {
		if s.nwritten == len(s.inflight) {
			if s.stopping {
				s.mu.Unlock()
				return
			}
			s.written.Wait()
			continue
		}
		// A copy: the syncer shifts s.inflight once it has answered a
		// round.
		batches := append(s.writeBuf[:0], s.inflight[s.nwritten:]...)
		s.writing = true
		s.mu.Unlock()

		err := s.writeBatches(batches)

		s.mu.Lock()
		s.writing = false
		if err != nil {
			s.reset = true
		}
		s.nwritten += len(batches)
		clear(batches)
		s.writeBuf = batches[:0]
		s.synced.Signal()
	}
}

// writeBatches writes the records of batches, which carry consecutive
// journal indexes, as one journal write. On failure every batch fails.
func (s *Store) writeBatches(batches []*batch) error {
	recs := s.recBuf[:0]
	var first uint64
	for _, b := range batches {
		if len(b.recs) > 0 && first == 0 {
			first = b.last - uint64(len(b.recs)) + 1
		}
		recs = append(recs, b.recs...)
	}
	defer func() { clear(recs); s.recBuf = recs[:0] }()
	if len(recs) == 0 {
		return nil
	}
	if _, err := s.jnl.Write(recs, first); err != nil {
		serr := &Error{Code: Storage, Field: "journal", Message: err.Error(), Err: err}
		for _, b := range batches {
			b.err = serr
		}
		return err
	}
	return nil
}

// syncLoop is the syncer: it syncs every written batch with one fdatasync,
// then publishes and answers them in order.
func (s *Store) syncLoop() {
	defer s.loops.Done()
	s.mu.Lock()
	for {
		if s.nwritten == 0 || s.syncing {
			if s.stopping && len(s.inflight) == 0 {
				s.mu.Unlock()
				return
			}
			s.synced.Wait()
			continue
		}
		s.roundLocked()
	}
}

// roundLocked runs one sync round over the written batches, as the syncer
// or as a lone writer (commitDirect). s.mu is held on entry and on return,
// released meanwhile; s.nwritten > 0 and no round is running.
func (s *Store) roundLocked() {
	round := s.inflight[:s.nwritten]
	poisoned := s.poisoned
	s.syncing = true
	s.mu.Unlock()

	poisoned, published, leases := s.syncRound(round, poisoned)

	s.mu.Lock()
	n := copy(s.inflight, s.inflight[len(round):])
	clear(s.inflight[n:])
	s.inflight = s.inflight[:n]
	s.nwritten -= len(round)
	s.syncing = false
	if poisoned {
		s.poisoned, s.reset = true, true
	}
	// The committer may be gathering, or waiting for the drain; the
	// syncer may be waiting while a lone writer ran this round.
	s.work.Signal()
	s.synced.Signal()
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
// gives the admitted records their journal indexes. Only the committer
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
	for _, b := range round {
		if b.err == nil {
			upTo = max(upTo, b.last)
		}
	}
	var serr error
	durable := upTo
	if upTo > 0 {
		if serr = s.jnl.Sync(upTo); serr != nil {
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

// resetPendingLocked rebuilds the committer's state from the published view
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
	for s.admitting || s.writing || len(s.inflight) > 0 || s.syncing || s.direct || (queue && len(s.queue) > 0) {
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
			timer = s.clock.NewTimer(time.Duration(next-s.clock.Now().UnixMilli()) * time.Millisecond)
			timerC = timer.C()
		}
		select {
		case <-timerC:
			timer, timerC, armedFor = nil, nil, 0
			if _, err := s.submit(&op{kind: opExpire}); err != nil && CodeOf(err) == Unavailable {
				return
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

// checkExpect applies the expected_revision rules of DESIGN.md §3.
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
