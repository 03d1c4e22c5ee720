package dispatch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

func TestErrorMessageCarriesFieldAndRevision(t *testing.T) {
	t.Parallel()
	m := errorMessage(7, &statestore.Error{Code: statestore.Conflict, Field: "expected_revision", Message: "want 3", CurrentRevision: 5})
	e := m.GetResult().GetError()
	if m.GetResult().GetRequestId() != 7 || e.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_CONFLICT ||
		e.GetField() != "expected_revision" || e.GetCurrentRevision() != 5 || e.GetMessage() != "want 3" {
		t.Fatalf("conflict answered as %v", m)
	}
	// A foreign error is UNAVAILABLE with its text, never UNSPECIFIED.
	m = errorMessage(8, errString("disk on fire"))
	if e := m.GetResult().GetError(); e.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.GetMessage(), "disk on fire") {
		t.Fatalf("foreign error answered as %v", m)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestOutboxBounds fills an outbox nobody drains: updates stop at the
// limit (the registry then closes the watch), snapshots and closures go on
// into the margin and stop there, so a stalled peer holds a fixed number
// of messages whatever the store publishes.
func TestOutboxBounds(t *testing.T) {
	t.Parallel()
	const limit, margin = 3, 2
	o := newOutbox(limit, margin, newByteBudget(1<<20), func(*pb.ServerMessage) error { return nil }, func() {})
	m := &pb.ServerMessage{}
	for i := range limit {
		if err := o.offer(m); err != nil {
			t.Fatalf("update %d of %d: %v", i+1, limit, err)
		}
	}
	if err := o.offer(m); !errors.Is(err, errOutboxFull) {
		t.Fatalf("update past the limit: %v, want errOutboxFull", err)
	}
	for i := range margin {
		if err := o.force(m, nil); err != nil {
			t.Fatalf("closure %d of the margin %d: %v", i+1, margin, err)
		}
	}
	if err := o.force(m, nil); !errors.Is(err, errOutboxFull) {
		t.Fatalf("closure past the margin: %v, want errOutboxFull", err)
	}
	o.mu.Lock()
	n := o.lenLocked()
	o.mu.Unlock()
	if n != limit+margin {
		t.Fatalf("the outbox holds %d messages, want %d", n, limit+margin)
	}
	o.close(true)
	if err := o.queue(m, nil); !errors.Is(err, errOutboxClosed) {
		t.Fatalf("an answer after close: %v, want errOutboxClosed", err)
	}
}

// offerUpdates takes the longest prefix there is room for, in the queue
// and in the byte budget, in order, and says why it stopped; a closed
// outbox takes nothing.
func TestOfferUpdatesTakesAPrefix(t *testing.T) {
	t.Parallel()
	updates := func(n, keyBytes int) []*watch.Update {
		us := make([]*watch.Update, n)
		memo := new(watch.Memo)
		key := "k" + strings.Repeat("k", keyBytes)
		for i := range us {
			us[i] = &watch.Update{WatchID: fmt.Sprint("w", i), Sequence: 1, Revision: 9, Kind: watch.Delete, Key: key, Memo: memo}
		}
		return us
	}
	size, err := wire.UpdateSize(updates(1, 0)[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		limit, offers int
		budget        int64 // the byte budget, over one session: its share
		held          int64 // bytes the outbox already holds
		closed        bool
		keyBytes      int // each update over what remains of the share
		want          int
		wantErr       error
	}{
		{name: "all fit", limit: 8, offers: 5, budget: 1 << 20, want: 5},
		{name: "queue limit", limit: 3, offers: 5, budget: 1 << 20, want: 3, wantErr: errOutboxFull},
		{name: "byte budget", limit: 8, offers: 5, budget: minShare, held: minShare - 2*int64(size), want: 2, wantErr: errOutboxFull},
		{name: "an empty outbox takes one over its share", limit: 8, offers: 2, budget: minShare, keyBytes: minShare, want: 1, wantErr: errOutboxFull},
		{name: "closed", limit: 8, offers: 2, budget: 1 << 20, closed: true, want: 0, wantErr: errOutboxClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newByteBudget(c.budget)
			b.join()
			o := newOutbox(c.limit, 2, b, func(*pb.ServerMessage) error { return nil }, func() {})
			o.sendEncoded = func(framing.Encoded) error { return nil }
			if c.held > 0 {
				b.force(o, c.held)
			}
			if c.closed {
				o.close(true)
			}
			us := updates(c.offers, c.keyBytes)
			n, err := o.offerUpdates(us)
			if n != c.want || !errors.Is(err, c.wantErr) {
				t.Fatalf("offerUpdates took %d (%v), want %d (%v)", n, err, c.want, c.wantErr)
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.lenLocked() != n {
				t.Fatalf("the outbox holds %d, want %d", o.lenLocked(), n)
			}
			for i := range n {
				if q := o.q[o.head+i]; q.u != us[i] || q.n <= 0 {
					t.Fatalf("queued %d is %+v, want update %d with its size", i, q, i)
				}
			}
		})
	}
}
