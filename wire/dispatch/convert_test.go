package dispatch

import (
	"errors"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
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
