package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// The bookkeeping a worker loop keeps around its leases, one per intent
// (worker/reconcile's transcoder and worker/cv's analyses): claim when the
// watch shows the key free, renew when due, hear that a lease was lost,
// release it, and write the intent's status entry on its own revision.
// Each loop reports in its own event type, so these return what happened
// as a Note and leave the reporting, and what a lost lease stops, to it.

// NoteKind says what a Note reports.
type NoteKind uint8

// Note kinds.
const (
	// NoteRenewed: a renewal succeeded; Detail is "KEY revision N".
	NoteRenewed NoteKind = iota + 1
	// NoteLost: the lease is no longer ours; Err is the *LostError and
	// Detail its text.
	NoteLost
	// NoteReleased: a held lease was deleted; Detail is its key.
	NoteReleased
	// NoteStoreError: a renewal or release failed for another reason (the
	// lease may still be ours until its TTL runs out); Detail is "renew: "
	// or "release: " and the error.
	NoteStoreError
)

// Note is one thing the bookkeeping did, for the loop to report.
type Note struct {
	Kind   NoteKind
	Err    error
	Detail string
}

// RenewIfDue renews l when it is held and its renewal is due at now, and
// returns what happened; false when nothing was due (l nil, not held, or
// not yet due).
func RenewIfDue(ctx context.Context, l *Lease, now time.Time) (Note, bool) {
	if l == nil || !l.Held() || now.Before(l.RenewAt()) {
		return Note{}, false
	}
	err := l.Renew(ctx, now)
	var lost *LostError
	switch {
	case errors.As(err, &lost):
		return Note{Kind: NoteLost, Err: lost, Detail: lost.Error()}, true
	case err != nil:
		return Note{Kind: NoteStoreError, Err: err, Detail: "renew: " + err.Error()}, true
	}
	return Note{Kind: NoteRenewed, Detail: fmt.Sprintf("%s revision %d", l.Key(), l.Revision())}, true
}

// Drop releases l if this worker holds it (the loop has already forgotten
// l) and returns what happened; false when there was nothing to release.
func Drop(ctx context.Context, l *Lease) (Note, bool) {
	if l == nil || !l.Held() {
		return Note{}, false
	}
	if err := l.Release(ctx); err != nil {
		return Note{Kind: NoteStoreError, Err: err, Detail: "release: " + err.Error()}, true
	}
	return Note{Kind: NoteReleased, Detail: l.Key()}, true
}

// Holding is what Hold found.
type Holding struct {
	// Held: this worker holds the lease (Claimed: it just claimed it).
	Held, Claimed bool
	// Standby: another worker holds it; stay standby.
	Standby bool
	// Err: the claim failed for another reason.
	Err error
}

// Hold brings l in line with what the watch of its key shows, e (nil when
// absent) as of namespace revision seen, and claims it at now when it is
// free. A lease the watch shows lost is handed to lost first, before any
// claim, so the loop stops what it guarded before anything new starts.
func (l *Lease) Hold(ctx context.Context, e *statestore.Entry, seen uint64, now time.Time, lost func(error)) Holding {
	claim, gone := l.Observe(e, seen)
	if gone != nil {
		lost(gone)
	}
	if l.Held() {
		return Holding{Held: true}
	}
	if !claim {
		return Holding{Standby: true}
	}
	err := l.Claim(ctx, now)
	var held *HeldError
	switch {
	case errors.As(err, &held):
		return Holding{Standby: true}
	case err != nil:
		return Holding{Err: err}
	}
	return Holding{Held: true, Claimed: true}
}

// PutOwned writes a worker's own entry (an intent's status) with
// compare-and-set only: create-only when rev is 0, else on rev, its own
// last revision. On a CONFLICT it rereads: an entry ours says this worker
// wrote (its own from before a restart) is adopted and written on its
// revision, an absent one is created, and anyone else's is left as it is,
// with foreign's error.
func PutOwned(ctx context.Context, c stateclient.Client, req statestore.PutRequest, rev uint64,
	ours func(statestore.Entry) bool, foreign func(statestore.Entry) error) (statestore.Entry, error) {
	put := func(x statestore.Expect) (statestore.Entry, error) {
		req.Expect = x
		return c.Put(ctx, req)
	}
	x := statestore.CreateOnly
	if rev != 0 {
		x = statestore.IfRevision(rev)
	}
	e, err := put(x)
	if errors.Is(err, statestore.ErrConflict) {
		cur, gerr := c.Get(ctx, req.Namespace, req.Key)
		switch {
		case gerr == nil && ours(cur):
			e, err = put(statestore.IfRevision(cur.Revision))
		case gerr == nil:
			err = foreign(cur)
		case errors.Is(gerr, statestore.ErrNotFound):
			e, err = put(statestore.CreateOnly)
		default:
			err = gerr
		}
	}
	return e, err
}

// DeleteOwned removes a worker's own entry written at rev (an intent's
// status once the intent is gone), on that revision only, so an entry
// someone rewrote since stays. Nothing written (rev 0) and an entry
// already gone are both nil.
func DeleteOwned(ctx context.Context, c stateclient.Client, namespace, key string, rev uint64) error {
	if rev == 0 {
		return nil
	}
	_, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: namespace, Key: key, Expect: statestore.IfRevision(rev)})
	if errors.Is(err, statestore.ErrNotFound) {
		return nil
	}
	return err
}
