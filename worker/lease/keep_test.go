package lease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/lease"
)

// TestRenewIfDueAndDrop: the bookkeeping's renewal is a no-op until due and
// for a lease not held, reports a renewal, a loss (another holder took the
// key) and a release as Notes, and Drop of nothing held reports nothing.
func TestRenewIfDueAndDrop(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	if _, ok := lease.RenewIfDue(ctx, nil, s.Clock.Now()); ok {
		t.Fatal("RenewIfDue of no lease reported something")
	}
	a := newLease(t, s, "worker-a")
	if _, ok := lease.RenewIfDue(ctx, a, s.Clock.Now()); ok {
		t.Fatal("RenewIfDue of a lease not held reported something")
	}
	if err := a.Claim(ctx, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok := lease.RenewIfDue(ctx, a, s.Clock.Now()); ok {
		t.Fatal("RenewIfDue renewed before the renewal was due")
	}
	s.Clock.Set(a.RenewAt())
	n, ok := lease.RenewIfDue(ctx, a, s.Clock.Now())
	if !ok || n.Kind != lease.NoteRenewed || n.Err != nil || !strings.HasPrefix(n.Detail, key+" revision ") {
		t.Fatalf("due renewal: %+v %v, want NoteRenewed naming the key and revision", n, ok)
	}
	if n, ok := lease.Drop(ctx, a); !ok || n.Kind != lease.NoteReleased || n.Detail != key {
		t.Fatalf("Drop of a held lease: %+v %v, want NoteReleased naming the key", n, ok)
	}
	if _, ok := lease.Drop(ctx, a); ok {
		t.Fatal("Drop of a released lease reported something")
	}
	// Lost: b holds the key now, and a's renewal on its old revision fails.
	if err := a.Claim(ctx, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, statestore.System(), statestore.DeleteRequest{Namespace: ns, Key: key}); err != nil {
		t.Fatal(err)
	}
	if err := newLease(t, s, "worker-b").Claim(ctx, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	s.Clock.Set(a.RenewAt())
	n, ok = lease.RenewIfDue(ctx, a, s.Clock.Now())
	var lost *lease.LostError
	if !ok || n.Kind != lease.NoteLost || !errors.As(n.Err, &lost) || n.Detail != lost.Error() || a.Held() {
		t.Fatalf("renewal of a lost lease: %+v %v, want NoteLost carrying the *LostError", n, ok)
	}
}

// TestHold: a free key is claimed, a held one leaves the worker standby, a
// held lease stays held without a write, and a lease the watch shows lost
// reaches the callback before the new claim.
func TestHold(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	a, b := newLease(t, s, "worker-a"), newLease(t, s, "worker-b")
	noLoss := func(err error) { t.Fatalf("lost reported: %v", err) }
	if h := a.Hold(ctx, nil, s.Namespace(ns).Revision, s.Clock.Now(), noLoss); !h.Held || !h.Claimed || h.Err != nil {
		t.Fatalf("Hold of a free key: %+v, want claimed", h)
	}
	e, err := s.Get(ctx, statestore.System(), ns, key)
	if err != nil {
		t.Fatal(err)
	}
	if h := a.Hold(ctx, &e, e.Revision, s.Clock.Now(), noLoss); !h.Held || h.Claimed {
		t.Fatalf("Hold of our own lease: %+v, want held, no new claim", h)
	}
	if h := b.Hold(ctx, &e, e.Revision, s.Clock.Now(), noLoss); h.Held || !h.Standby {
		t.Fatalf("Hold of a key another holds: %+v, want standby", h)
	}
	// The watch still shows the key free, but a claimed it meanwhile: the
	// create-only claim finds it held.
	if h := b.Hold(ctx, nil, e.Revision-1, s.Clock.Now(), noLoss); h.Held || !h.Standby {
		t.Fatalf("Hold whose claim finds the key held: %+v, want standby", h)
	}
	// The key expired (the watch is past our write and shows nothing): a
	// loses it, hears so first, and claims afresh.
	if _, err := s.Delete(ctx, statestore.System(), statestore.DeleteRequest{Namespace: ns, Key: key}); err != nil {
		t.Fatal(err)
	}
	var heard []string
	h := a.Hold(ctx, nil, s.Namespace(ns).Revision, s.Clock.Now(), func(err error) {
		heard = append(heard, "lost, held="+map[bool]string{true: "yes", false: "no"}[a.Held()])
	})
	if !h.Claimed || len(heard) != 1 || heard[0] != "lost, held=no" {
		t.Fatalf("Hold after expiry: %+v, heard %v; want the loss heard before a new claim", h, heard)
	}
}

// TestPutOwned: create-only first, then on its own revision; on a
// conflict an entry of ours is adopted, an absent one created, and
// another's left alone with foreign's error.
func TestPutOwned(t *testing.T) {
	t.Parallel()
	const sk = "status/worker-a/x"
	errForeign := errors.New("someone else's")
	tests := []struct {
		name     string
		before   string // the owner of an entry there first ("" none)
		rev      func(first uint64) uint64
		ours     bool
		wantErr  error
		wantOver bool // the entry there first was overwritten
	}{
		{"first write creates", "", func(uint64) uint64 { return 0 }, false, nil, false},
		{"own revision", "worker-a", func(r uint64) uint64 { return r }, false, nil, true},
		{"ours from before a restart is adopted", "worker-a", func(uint64) uint64 { return 0 }, true, nil, true},
		{"another's is left alone", "worker-b", func(uint64) uint64 { return 0 }, false, errForeign, false},
		{"stale revision, entry gone, created", "", func(uint64) uint64 { return 99 }, false, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t, lease.RegisterSchema)
			req := statestore.PutRequest{Namespace: ns, Key: sk, Schema: lease.Schema,
				Document: []byte(`{"holder":"worker-a","intent_key":"intents/x"}`)}
			var first statestore.Entry
			if tc.before != "" {
				var err error
				first, err = client(t, s, tc.before).Put(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
			}
			e, err := lease.PutOwned(ctx, client(t, s, "worker-a"), req, tc.rev(first.Revision),
				func(statestore.Entry) bool { return tc.ours }, func(statestore.Entry) error { return errForeign })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("PutOwned: %v, want %v", err, tc.wantErr)
			}
			cur, gerr := s.Get(ctx, statestore.System(), ns, sk)
			switch {
			case tc.wantErr != nil:
				if gerr != nil || cur.Revision != first.Revision || cur.Owner != tc.before {
					t.Fatalf("another's entry changed: %+v %v", cur, gerr)
				}
			case gerr != nil || cur.Revision != e.Revision || cur.Owner != "worker-a" || (tc.wantOver && e.Revision != first.Revision+1):
				t.Fatalf("after PutOwned the entry is %+v %v, returned %+v", cur, gerr, e)
			}
		})
	}
}

// TestDeleteOwned: nothing written and an entry already gone are nil; an
// entry rewritten since our revision stays, with the conflict.
func TestDeleteOwned(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	c := client(t, s, "worker-a")
	const sk = "status/worker-a/y"
	if err := lease.DeleteOwned(ctx, c, ns, sk, 0); err != nil {
		t.Fatalf("DeleteOwned of nothing written: %v", err)
	}
	req := statestore.PutRequest{Namespace: ns, Key: sk, Schema: lease.Schema, Document: []byte(`{"holder":"worker-a"}`)}
	e1, err := c.Put(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := c.Put(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.DeleteOwned(ctx, c, ns, sk, e1.Revision); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("DeleteOwned on a stale revision: %v, want CONFLICT", err)
	}
	if err := lease.DeleteOwned(ctx, c, ns, sk, e2.Revision); err != nil {
		t.Fatalf("DeleteOwned on our revision: %v", err)
	}
	if _, err := s.Get(ctx, statestore.System(), ns, sk); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("the entry is still there: %v", err)
	}
	if err := lease.DeleteOwned(ctx, c, ns, sk, e2.Revision); err != nil {
		t.Fatalf("DeleteOwned of an entry already gone: %v", err)
	}
}
