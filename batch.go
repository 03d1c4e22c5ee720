package statestore

import (
	"fmt"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/quota"
)

// The admission rules: what an op must satisfy against the state it is
// admitted on (expected revision, quotas, the journal reserve), judged in
// the write stage on the batch's view, so every op of a batch sees the
// batch's earlier records.

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
		// One lookup of the namespace's counters serves the quota and the
		// revision.
		n := b.view.Namespace(o.ns)
		if err := s.limits.CheckPut(s.usage(b.view, o.ns, n), o.ns, exists, oldSize, int64(len(o.doc))); err != nil {
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
