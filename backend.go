package statestore

import (
	"sync"
	"sync/atomic"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
)

// A namespace lives in one of two homes: the journal (every namespace by
// default) or the [state_store] section of the media server's config.toml
// (the settings-backed ones, settings.go). Both take the same path up to
// admission (identifiers, policy, document size, schema: the facade does
// them before routing) and the same admission (batch.admit), each against
// its own published view; they differ in how a mutation is made durable
// and how a watch's snapshot is ordered against commits. The quotas count
// both homes together.

// backend is one home of namespaces.
type backend interface {
	// published is the state of the namespaces held here, as last
	// published: never mutated, read without locks.
	published() *materialize.View
	// commit admits o, makes it durable and publishes it, or answers why
	// not; once it fails nothing changed.
	commit(o *op) (Entry, error)
	// atCommitPoint runs fn on the published view at one point in this
	// home's commit order: no mutation is published while fn runs. When
	// fn reports a lease that lapsed in that view, its EXPIRE is committed
	// and fn runs again on the state after it.
	atCommitPoint(fn func(v *materialize.View) (lapsed bool, err error)) error
}

// journalBackend is the home of the journal-backed namespaces: their
// published view, the journal index it reflects, and the commit-order lock
// that orders publication against watch registration. Mutations commit
// through the pipeline.
type journalBackend struct {
	pipe    *pipeline
	watches *watch.Registry // nil until Open has replayed and purged

	// view is the last published state: never mutated after publication,
	// read without locks.
	view atomic.Pointer[materialize.View]
	// pubMu is the commit-order lock: held while a batch's view is
	// published (and its watch updates queued), and by anything that must
	// see the view and its journal index as one point in the commit order.
	pubMu sync.Mutex
	index uint64 // journal index the published view reflects (under pubMu)

	// cluster is set in cluster mode: the view is published by the raft
	// state machine (fsm.go) and lapsed leases expire at the leader.
	cluster *clusterNode
}

func (jb *journalBackend) published() *materialize.View { return jb.view.Load() }

func (jb *journalBackend) commit(o *op) (Entry, error) { return jb.pipe.submit(o) }

func (jb *journalBackend) atCommitPoint(fn func(v *materialize.View) (bool, error)) error {
	for {
		jb.pubMu.Lock()
		lapsed, err := fn(jb.view.Load())
		jb.pubMu.Unlock()
		if !lapsed {
			return err
		}
		if err := jb.expire(); err != nil {
			return err
		}
	}
}

// expire commits the EXPIRE of every lease due now.
func (jb *journalBackend) expire() error {
	if jb.cluster != nil {
		return jb.cluster.expire()
	}
	_, err := jb.pipe.submit(&op{kind: opExpire})
	return err
}

// snapshot returns the published view with the journal index it reflects.
func (jb *journalBackend) snapshot() (*materialize.View, uint64) {
	jb.pubMu.Lock()
	defer jb.pubMu.Unlock()
	return jb.view.Load(), jb.index
}

// publish makes a synced batch visible: its view, its journal index and its
// watch updates, as one step in the commit order.
func (jb *journalBackend) publish(b *batch) {
	var events []watch.Event
	if jb.watches != nil {
		events = b.events()
	}
	jb.pubMu.Lock()
	jb.view.Store(b.view)
	jb.index = b.last
	if events != nil {
		jb.watches.Publish(events)
	}
	jb.pubMu.Unlock()
}

// replace publishes v, the state at index idx, in place of the state the
// journal built (a restore), and closes every watch with RESTORED: none
// may carry on across it, whichever home it watched.
func (jb *journalBackend) replace(v *materialize.View, idx uint64) {
	jb.pubMu.Lock()
	defer jb.pubMu.Unlock()
	jb.view.Store(v)
	jb.index = idx
	if jb.watches != nil { // nil offline (cluster_offline.go): nobody watches
		jb.watches.CloseAll(watch.Restored)
	}
}

// journalLog is the journal as the pipeline's commitLog.
type journalLog struct{ j *journal.Journal }

func (l journalLog) Write(recs []*journal.Record, first uint64) error {
	_, err := l.j.Write(recs, first)
	return err
}

func (l journalLog) Sync(upTo uint64, park bool) error {
	if park {
		return l.j.SyncParked(upTo)
	}
	return l.j.Sync(upTo)
}

func (l journalLog) Durable() uint64 { return l.j.LastIndex() }

func (l journalLog) Poll() { l.j.Poll() }

// usageOf is the store-wide part of the quotas' usage (namespaces holding
// entries, value bytes) of the namespaces held in home.
func usageOf(home backend) quota.Usage {
	_, bytes, nss := home.published().Totals()
	return quota.Usage{TotalBytes: bytes, Namespaces: nss}
}
