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

// The commit pipeline. One goroutine, the committer, owns every mutation:
//
//	admit (against a clone of the published view, in arrival order)
//	  -> journal (one WriteBatch, one fsync)
//	  -> apply (publish the clone)
//	  -> notify (watch hooks, in commit order)
//	  -> reply
//
// Validation that needs no state (identifiers, policy, schema, TTL) runs in
// the caller's goroutine before the op is queued, so the committer's serial
// work per op is a few map and tree operations.

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

	res Entry
	err error
	// wake is closed when the op is answered or when its submitter must
	// take over as leader (lead is then true).
	wake chan struct{}
	lead bool
}

// maxBatch bounds one group commit so one fsync never carries an unbounded
// write and no caller waits behind an arbitrarily long batch.
const maxBatch = 512

// submit queues o and returns its outcome. Group commit is leader-based:
// the submitter that finds no commit in progress becomes the leader and
// commits everything queued (up to maxBatch) in its own goroutine, then
// answers the batch and hands leadership to the head of the queue. A lone
// writer therefore pays no goroutine hand-off, and under load every fsync
// carries every write that queued while the previous one ran. Once queued,
// an op is always answered with the fsync's outcome, never abandoned.
func (s *Store) submit(o *op) (Entry, error) {
	o.wake = make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, newErr(Unavailable, "store", "the store is closed")
	}
	s.queue = append(s.queue, o)
	if s.busy {
		s.mu.Unlock()
		<-o.wake
		if !o.lead {
			return o.res, o.err
		}
		s.mu.Lock()
	}
	s.busy = true
	n := min(len(s.queue), maxBatch)
	batch := append([]*op(nil), s.queue[:n]...)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.mu.Unlock()

	s.runBatch(batch)

	s.mu.Lock()
	for _, b := range batch {
		if b != o {
			close(b.wake)
		}
	}
	s.handOffLocked()
	s.mu.Unlock()
	return o.res, o.err
}

// handOffLocked ends a leader's turn: the head of the queue becomes the
// next leader, or the store goes idle. s.mu is held.
func (s *Store) handOffLocked() {
	if len(s.queue) > 0 {
		next := s.queue[0]
		next.lead = true
		close(next.wake)
		return
	}
	s.busy = false
	s.idle.Broadcast()
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

// batch is one group commit in the making: a private clone of the published
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
}

func (s *Store) newBatch() *batch {
	return &batch{s: s, view: s.view.Load().Clone(), now: s.clock.Now().UnixMilli()}
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

// runBatch admits ops in arrival order, commits their records in one
// journal append, publishes the new view and answers every op.
func (s *Store) runBatch(ops []*op) {
	b := s.newBatch()
	// Leases due now expire before any op of this batch can observe their
	// keys, in the same fsync.
	b.expireDue(b.now)
	admitted := make([]*op, 0, len(ops))
	for _, o := range ops {
		if e, err := b.admit(o); err != nil {
			o.err = err
		} else {
			if e != nil {
				o.res = *e
			}
			admitted = append(admitted, o)
		}
	}
	if err := s.commitBatch(b); err != nil {
		for _, o := range admitted {
			o.res, o.err = Entry{}, err
		}
	}
}

// commitBatch makes b's records durable and publishes b's view. On failure
// nothing is published: the clone is dropped and memory is unchanged.
func (s *Store) commitBatch(b *batch) error {
	if len(b.recs) == 0 {
		return nil
	}
	first, err := s.jnl.Append(b.recs)
	if err != nil {
		return &Error{Code: Storage, Field: "journal", Message: err.Error(), Err: err}
	}
	var events []watch.Event
	if s.watches != nil {
		events = b.events()
	}
	s.pubMu.Lock()
	s.view.Store(b.view)
	s.index = first + uint64(len(b.recs)) - 1
	if events != nil {
		s.watches.Publish(events)
	}
	s.pubMu.Unlock()
	if s.quit != nil {
		s.maybeCheckpoint()
	}
	if b.leases {
		select {
		case s.leasesChanged <- struct{}{}:
		default:
		}
	}
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
