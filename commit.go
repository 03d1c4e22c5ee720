package statestore

import (
	"sync"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// The commit pipeline, in commit order:
//
//	admit (against the pending view: the published one plus every batch
//	       admitted but not yet answered)
//	  -> log write (one batch to the page cache)
//	  -> log sync (one fdatasync for every batch written meanwhile)
//	  -> publish (the batch's view, its index and its watch updates)
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
// until the op is answered, takes whichever stage is free and has work, so
// under load no step waits for a pipeline goroutine to be scheduled behind
// a hundred runnable callers (with 127 writers on two cores, dedicated
// stage goroutines waited 300 µs and more for a CPU while ops piled up),
// and a lone writer runs both stages without a goroutine wake-up. A caller
// answered with work left that no running caller has taken wakes the
// helper, a goroutine that drives the pipeline until it is empty.
//
// A goroutine that may take either stage takes the sync stage first: the
// disk is the scarce resource. A sync that starts while other callers are
// queued (or several batches wait) parks (journal.SyncParked, an io_uring)
// rather than holding a processor in the system call: with two
// processors, a held one left a hundred callers one CPU. A lone writer's
// sync holds its processor, the faster way when nobody else needs it.
// Each caller polls the log on its way in, so a finished sync is noticed
// even when every processor is busy.
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
//
// The pipeline knows the store only through its commitEnv, and the
// journal only through commitLog, so its tests run it on a fake log
// (commit_test.go) and a replicated log can stand behind the same
// interface.

// commitLog is what the pipeline needs of a durable log.
type commitLog interface {
	// Write hands recs, with consecutive indexes from first, to the log
	// without waiting for durability. On failure nothing of recs is kept.
	Write(recs []*journal.Record, first uint64) error
	// Sync returns once every record up to upTo is durable. park asks the
	// waiting goroutine to give its processor up meanwhile. On failure the
	// log is cut back to Durable.
	Sync(upTo uint64, park bool) error
	// Durable is the acknowledged floor: the last record known durable.
	Durable() uint64
	// Poll hands on a sync that finished while every processor was busy.
	Poll()
}

// outcomeLog is a commitLog that judges each batch on its own (the raft
// log: one entry per batch, each with its own future), rather than by one
// durable floor: a batch after a failed one may still have committed, and
// one whose outcome is unknown must say so.
type outcomeLog interface {
	commitLog
	// Outcome returns the fate of the batch ending at last, once Sync
	// covered it: nil when it committed and was applied.
	Outcome(last uint64) error
	// NotApplied is the answer for an op judged against state that
	// included a batch that failed: it was applied nowhere, so it may be
	// retried once the pending view is rebuilt.
	NotApplied() error
}

// commitEnv is everything the pipeline is given: the log, and the store's
// side of each step.
type commitEnv struct {
	log commitLog
	// admit admits ops, in arrival order, as one batch against pending.
	admit func(pending *materialize.View, ops []*op) *batch
	// publish makes a synced batch visible (its view, its index, its
	// watch updates) as one step in the commit order.
	publish func(b *batch)
	// published returns the published view and the index it reflects, to
	// rebuild the pending view from.
	published func() (*materialize.View, uint64)
	// afterRound runs, outside the pipeline's lock, after a round that
	// published a batch or changed a lease.
	afterRound func(published, leases bool)
	// closed is the answer to an op submitted after close.
	closed  func() error
	metrics *metrics
}

// pipeline is the commit pipeline: the queue, the two stages and what
// they own, and the helper goroutine.
type pipeline struct {
	env commitEnv

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
	helper     sync.WaitGroup

	// Owned by the write stage: the published view plus every admitted
	// batch, and the log index its next record gets.
	pending   *materialize.View
	nextIndex uint64
}

// newPipeline returns a pipeline whose first batch is admitted against
// the published state of env. Its helper runs once start is called.
func newPipeline(env commitEnv) *pipeline {
	p := &pipeline{env: env}
	p.helperWake = sync.NewCond(&p.mu)
	p.idle = sync.NewCond(&p.mu)
	p.resetPendingLocked()
	return p
}

// maxBatch bounds one group commit so one write never carries an unbounded
// batch and no caller waits behind an arbitrarily long one.
const maxBatch = 512

// minWriteBatch is the batch size the write stage waits for while a sync
// is in flight.
const minWriteBatch = 32

// start starts the helper goroutine.
func (p *pipeline) start() {
	p.helper.Add(1)
	go p.helperLoop()
}

// submit queues o, drives the pipeline while o is unanswered and a stage
// is free, and returns o's outcome once its batch is synced and published
// (or failed). Once queued, an op is always answered, never abandoned.
func (p *pipeline) submit(o *op) (Entry, error) {
	o.done = make(chan struct{})
	// A sync in flight may have finished while every P was busy (this
	// goroutine's among them): hand it on before queueing behind it.
	p.env.log.Poll()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Entry{}, p.env.closed()
	}
	queued := monoNow()
	p.queue = append(p.queue, o)
	p.driveLocked(o)
	p.mu.Unlock()
	<-o.done
	p.env.metrics.answered(o, queued)
	return o.res, o.err
}

// driveLocked runs free stages that have work, in the calling goroutine,
// while own is unanswered (own is nil for the helper, which drives until
// nothing is left). A caller that returns with work left untaken wakes the
// helper. p.mu is held on entry and on return.
func (p *pipeline) driveLocked(own *op) {
	for own == nil || !own.answered() {
		switch {
		case p.canSyncLocked():
			p.roundLocked()
		case p.canWriteLocked():
			p.writeStageLocked()
		default:
			return
		}
	}
	if p.hasWorkLocked() {
		p.helperWake.Signal()
	}
}

// hasWorkLocked reports whether a stage is free and has work.
func (p *pipeline) hasWorkLocked() bool { return p.canWriteLocked() || p.canSyncLocked() }

// canWriteLocked reports whether the write stage is free and has a batch
// to admit now.
func (p *pipeline) canWriteLocked() bool {
	switch {
	case len(p.queue) == 0 || p.admitting || p.paused:
		return false
	case p.reset && (len(p.inflight) > 0 || p.syncing):
		// The failed batch and everything admitted after it must be
		// answered before the pending view is rebuilt.
		return false
	}
	return !p.syncing || len(p.queue) >= minWriteBatch
}

// canSyncLocked reports whether the sync stage is free and a written
// batch waits for it.
func (p *pipeline) canSyncLocked() bool { return len(p.inflight) > 0 && !p.syncing }

// writeStageLocked admits the queued ops (up to maxBatch) as one batch
// against the pending view, writes its records, and hands it to the sync
// stage. p.mu is held on entry and on return, released meanwhile.
func (p *pipeline) writeStageLocked() {
	if p.reset {
		p.resetPendingLocked()
	}
	n := min(len(p.queue), maxBatch)
	ops := append([]*op(nil), p.queue[:n]...)
	rest := copy(p.queue, p.queue[n:])
	clear(p.queue[rest:])
	p.queue = p.queue[:rest]
	p.admitting = true
	p.mu.Unlock()

	b := p.admitBatch(ops)
	p.env.metrics.batchOps.Observe(int64(len(ops)))
	err := p.writeBatch(b)

	p.mu.Lock()
	p.admitting = false
	if err != nil {
		p.reset = true
	}
	p.inflight = append(p.inflight, b)
	p.idle.Broadcast()
}

// admitBatch admits ops against the pending view and gives the admitted
// records their log indexes. Only the write stage calls it.
func (p *pipeline) admitBatch(ops []*op) *batch {
	b := p.env.admit(p.pending, ops)
	if len(b.recs) > 0 {
		p.pending = b.view
		b.last = p.nextIndex + uint64(len(b.recs)) - 1
		p.nextIndex = b.last + 1
	}
	return b
}

// writeBatch writes the records of b as one log write. On failure the
// batch fails.
func (p *pipeline) writeBatch(b *batch) error {
	if len(b.recs) == 0 {
		return nil
	}
	if err := p.env.log.Write(b.recs, b.last-uint64(len(b.recs))+1); err != nil {
		b.err = wrapErr(Storage, "journal", err)
		return err
	}
	return nil
}

// helperLoop is the helper: woken when a caller leaves work untaken, it
// drives the pipeline until nothing is left.
func (p *pipeline) helperLoop() {
	defer p.helper.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		p.driveLocked(nil)
		if p.stopping {
			return
		}
		p.helperWake.Wait()
	}
}

// roundLocked runs one sync round over every written batch. p.mu is held
// on entry and on return, released meanwhile; the sync stage is free and
// a batch is written.
func (p *pipeline) roundLocked() {
	round := p.inflight
	poisoned := p.poisoned
	// Other callers are waiting for the CPU: park during the fdatasync
	// rather than hold a processor.
	park := len(p.queue) > 0 || len(round) > 1 || p.admitting
	p.syncing = true
	p.mu.Unlock()

	poisoned, published, leases := p.syncRound(round, poisoned, park)

	p.mu.Lock()
	n := copy(p.inflight, p.inflight[len(round):])
	clear(p.inflight[n:])
	p.inflight = p.inflight[:n]
	p.syncing = false
	if poisoned {
		p.poisoned, p.reset = true, true
	}
	p.idle.Broadcast()
	p.mu.Unlock()
	if published || leases {
		p.env.afterRound(published, leases)
	}
	p.mu.Lock()
}

// syncRound syncs the written batches of round with one fdatasync, then
// publishes and answers them in order. poisoned says an earlier batch
// failed; park, that the fdatasync should park rather than hold a
// processor. It returns whether a batch has failed now, and whether any
// batch was published and any lease changed.
func (p *pipeline) syncRound(round []*batch, poisoned, park bool) (stillPoisoned, published, leases bool) {
	if ol, ok := p.env.log.(outcomeLog); ok {
		return p.syncOutcomes(ol, round, poisoned, park)
	}
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
		serr = p.env.log.Sync(upTo, park)
		p.env.metrics.synced(monoNow()-start, records)
		if serr != nil {
			durable = p.env.log.Durable()
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
			p.env.publish(b)
			leases = leases || b.leases
			published = true
		}
		b.answer()
	}
	return poisoned, published, leases
}

// syncOutcomes is syncRound on a log that judges each batch on its own:
// every batch's answer is its own outcome. An op admission refused after
// an earlier batch failed was judged against state that may never commit,
// so it answers NotApplied (retried by the caller) rather than its
// refusal.
func (p *pipeline) syncOutcomes(ol outcomeLog, round []*batch, poisoned, park bool) (stillPoisoned, published, leases bool) {
	var upTo uint64
	records := 0
	for _, b := range round {
		if b.err == nil && len(b.recs) > 0 {
			upTo = max(upTo, b.last)
			records += len(b.recs)
		}
	}
	if upTo > 0 {
		start := monoNow()
		_ = ol.Sync(upTo, park) // the outcomes carry every failure
		p.env.metrics.synced(monoNow()-start, records)
	}
	for _, b := range round {
		before := poisoned
		switch {
		case b.err != nil:
			poisoned = true
		case len(b.recs) > 0:
			if err := ol.Outcome(b.last); err != nil {
				b.err, poisoned = err, true
				break
			}
			p.env.publish(b)
			leases = leases || b.leases
			published = true
		}
		if before && b.err == nil {
			for _, o := range b.ops {
				if o.err != nil {
					o.res, o.err = Entry{}, ol.NotApplied()
				}
			}
		}
		b.answer()
	}
	return poisoned, published, leases
}

// resetPendingLocked rebuilds the write stage's state from the published
// view once the pipeline has drained: after a failure, or after an
// exclusive section (a restore) replaced the view.
func (p *pipeline) resetPendingLocked() {
	v, idx := p.env.published()
	p.pending, p.nextIndex = v, idx+1
	p.reset, p.poisoned = false, false
}

// quietLocked waits until no batch is being admitted, written or synced,
// and (with queue) no op is queued.
func (p *pipeline) quietLocked(queue bool) {
	for p.admitting || len(p.inflight) > 0 || p.syncing || (queue && len(p.queue) > 0) {
		// Every goroutine that leaves a stage hands on what it leaves, so
		// this wake is a guard: a missed hand-off would hang close.
		if p.hasWorkLocked() {
			p.helperWake.Signal()
		}
		p.idle.Wait()
	}
}

// exclusive runs fn while no batch commits: it holds the write stage off
// and waits for every written batch to be synced and answered, so ops
// queued meanwhile wait and then proceed against the state fn leaves. It
// answers closed() once close has begun, without running fn.
func (p *pipeline) exclusive(fn func() error) error {
	p.mu.Lock()
	for p.paused && !p.closed {
		p.idle.Wait()
	}
	if p.closed {
		p.mu.Unlock()
		return p.env.closed()
	}
	p.paused = true
	p.quietLocked(false)
	p.mu.Unlock()
	err := fn()
	p.mu.Lock()
	p.resetPendingLocked()
	p.paused = false
	p.helperWake.Signal()
	p.idle.Broadcast()
	p.mu.Unlock()
	return err
}

// close stops accepting ops, waits for an exclusive section in progress,
// answers every op already queued, and stops the helper. It reports false
// when the pipeline was closed already.
func (p *pipeline) close() bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.closed = true
	for p.paused {
		p.idle.Wait()
	}
	p.quietLocked(true)
	p.stopping = true
	p.helperWake.Signal()
	p.mu.Unlock()
	p.helper.Wait()
	return true
}

// isClosed reports whether close has begun.
func (p *pipeline) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// commitAlone writes, syncs and publishes b outside the stages, before the
// pipeline serves any op (Open's purge of overdue leases), and admits the
// next batch on top of it.
func (p *pipeline) commitAlone(b *batch) error {
	if len(b.recs) > 0 {
		first := p.nextIndex
		b.last = first + uint64(len(b.recs)) - 1
		if err := p.env.log.Write(b.recs, first); err != nil {
			return wrapErr(Storage, "journal", err)
		}
		if err := p.env.log.Sync(b.last, false); err != nil {
			return wrapErr(Storage, "journal", err)
		}
		p.env.publish(b)
	}
	p.mu.Lock()
	p.resetPendingLocked()
	p.mu.Unlock()
	return nil
}
