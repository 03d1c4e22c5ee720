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

// The admission rules: what an op must satisfy against the state it is
// admitted on (expected revision, quotas, the journal reserve), judged on
// the batch's view, so every op of a batch sees the batch's earlier
// records. Both homes of a namespace (the journal and config.toml) admit
// with this code, each through its own admission.

// admission is what one home of namespaces judges its ops against besides
// its view.
type admission struct {
	limits quota.Limits
	clock  clock.Clock
	// others is the usage of the namespaces held elsewhere: the quotas
	// count both homes together.
	others func() quota.Usage
	// reserve refuses a PUT while the log runs on its disk reserve; nil
	// where no reserve applies.
	reserve func() error
	// stamp, when set, is the time a batch is stamped with instead of the
	// clock's: in cluster mode the leader's clock, never below the last
	// applied record's time, so no follower's state moves back in time.
	stamp func() int64
}

// newBatch starts a batch on a private clone of from, stamped now.
func (a *admission) newBatch(from *materialize.View) *batch {
	now := a.clock.Now().UnixMilli()
	if a.stamp != nil {
		now = a.stamp()
	}
	return &batch{adm: a, view: from.Clone(), now: now}
}

// admitAll admits ops in arrival order as one batch on pending: leases due
// now expire first, in the same batch, so no op observes their keys.
func (a *admission) admitAll(pending *materialize.View, ops []*op) *batch {
	b := a.newBatch(pending)
	b.ops = ops
	// If the EXPIREs fail, admission is broken: the batch fails whole,
	// writes nothing and leaves pending as it was.
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
	return b
}

// batch is one group commit in the making: a private clone of the pending
// view with the batch's admitted records applied, and those records.
type batch struct {
	adm  *admission
	view *materialize.View
	recs []*journal.Record
	now  int64
	// leases is set when the batch adds or removes a lease, so the expiry
	// loop re-reads the earliest deadline.
	leases bool
	// entries[i] is the entry recs[i] produced (PUT) or removed.
	entries []*Entry

	ops  []*op // every op of the batch, answered together
	last uint64
	err  error // the write failed, or the batch failed in the pipeline
}

// admit checks o against the batch's view (the published state plus the
// batch's earlier records) and, if it passes, adds its record. It returns
// the entry a PUT produces, or for a DELETE an entry carrying only the
// deletion's revision.
func (b *batch) admit(o *op) (*Entry, error) {
	a := b.adm
	switch o.kind {
	case opExpire:
		return nil, nil
	case opPut:
		if a.reserve != nil {
			if err := a.reserve(); err != nil {
				return nil, wrapErr(Storage, "journal reserve", err)
			}
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
		// One lookup of the namespace's counters serves the quota and the
		// revision.
		n := b.view.Namespace(o.ns)
		_, bytes, nss := b.view.Totals()
		u := a.others()
		u.Namespaces, u.NamespaceEntries, u.TotalBytes = u.Namespaces+nss, n.Entries, u.TotalBytes+bytes
		if err := a.limits.CheckPut(u, o.ns, exists, oldSize, int64(len(o.doc))); err != nil {
			return nil, wrapErr(QuotaExceeded, boundField(err), err)
		}
		var expires int64
		if o.ttl > 0 {
			expires = b.now + o.ttl.Milliseconds()
		}
		rec := &journal.Record{Kind: journal.KindPut, Namespace: o.ns, Key: o.key,
			Revision: n.Revision + 1, Schema: o.schema, Owner: o.owner,
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

// expireDue adds one EXPIRE per lease due at now, earliest deadline first,
// and returns how many. An error is add's: a bug, and the batch is lost.
func (b *batch) expireDue(now int64) (int, error) {
	var due []*Entry
	b.view.Due(now, func(e *Entry) bool { due = append(due, e); return true })
	for _, e := range due {
		rev := b.view.Namespace(e.Namespace).Revision + 1
		if _, err := b.add(&journal.Record{Kind: journal.KindExpire, Namespace: e.Namespace, Key: e.Key, Revision: rev}); err != nil {
			return 0, err
		}
	}
	return len(due), nil
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

// events turns a committed batch's records into watch events.
func (b *batch) events() []watch.Event {
	ev := make([]watch.Event, len(b.recs))
	for i, r := range b.recs {
		ev[i] = watch.Event{Revision: r.Revision, Namespace: r.Namespace, Key: r.Key}
		switch r.Kind {
		case journal.KindPut:
			ev[i].Kind = watch.Put
			ev[i].Entry = b.entries[i]
		case journal.KindDelete:
			ev[i].Kind = watch.Delete
		case journal.KindExpire:
			ev[i].Kind = watch.Expire
		}
	}
	return ev
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

type opKind int

const (
	opPut opKind = iota
	opDelete
	opExpire // no mutation of its own: commits every due lease, then replies
)

// op is one call's mutation on its way through the pipeline.
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

// answered reports whether o's outcome is final.
func (o *op) answered() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}
