package watch_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
)

// observedSink reports each Deliver's result, so a test knows the delivery
// goroutine has offered a message without reading the ChanSink itself.
type observedSink struct {
	*watch.ChanSink
	results chan error
}

func newObservedSink(bound int) *observedSink {
	return &observedSink{ChanSink: watch.NewChanSink(bound), results: make(chan error, 1024)}
}

func (o *observedSink) Deliver(m watch.Message) error {
	err := o.ChanSink.Deliver(m)
	o.results <- err
	return err
}

// offered waits for n Deliver calls and returns how many were refused.
func (o *observedSink) offered(t *testing.T, n int) (refused int) {
	t.Helper()
	for range n {
		select {
		case err := <-o.results:
			if err != nil {
				refused++
			}
		case <-time.After(waitLimit):
			t.Fatal("timed out waiting for a delivery")
		}
	}
	return refused
}

func receive(t *testing.T, s *watch.ChanSink) watch.Message {
	t.Helper()
	select {
	case m := <-s.C():
		return m
	case <-time.After(waitLimit):
		t.Fatal("timed out waiting for a message")
		return nil
	}
}

func TestChanSinkDeliverBound(t *testing.T) {
	t.Parallel()
	s := watch.NewChanSink(2)
	steps := []struct {
		msg     watch.Message
		refused bool
	}{
		{&watch.Snapshot{WatchID: "w"}, false},
		{&watch.Update{WatchID: "w", Sequence: 1}, false},
		{&watch.Update{WatchID: "w", Sequence: 2}, true}, // the bound: two unread
		{&watch.Snapshot{WatchID: "v"}, true},
		{&watch.Closed{WatchID: "w", Reason: watch.BufferOverflow}, false}, // into the reserve
	}
	for i, st := range steps {
		err := s.Deliver(st.msg)
		if st.refused != (err != nil) {
			t.Fatalf("step %d: refused=%v, got %v", i, st.refused, err)
		}
		if err == nil {
			continue
		}
		var fe *watch.SinkFullError
		if !errors.Is(err, watch.ErrSinkFull) || !errors.As(err, &fe) || fe.Bound != 2 {
			t.Fatalf("step %d: %v is not a SinkFullError with bound 2", i, err)
		}
		if !strings.Contains(err.Error(), "2 unread") {
			t.Fatalf("step %d: %q does not name the bound", i, err)
		}
	}
	<-s.C() // the snapshot; the Closed still counts against the bound
	<-s.C() // update 1: now there is room
	if err := s.Deliver(&watch.Update{WatchID: "w", Sequence: 2}); err != nil {
		t.Fatalf("after a read: %v", err)
	}
	// Beyond the bound (reached again: the first Closed and update 2 are
	// unread) the reserve holds one Closed per watch a default session may
	// hold.
	reserve := quota.Default().MaxWatchesPerSession
	for i := range reserve {
		if err := s.Deliver(&watch.Closed{WatchID: "x", Reason: watch.AckTimeout}); err != nil {
			t.Fatalf("Closed %d of the reserve refused: %v", i+1, err)
		}
	}
	if err := s.Deliver(&watch.Closed{WatchID: "x", Reason: watch.AckTimeout}); !errors.Is(err, watch.ErrSinkFull) {
		t.Fatalf("Closed past the reserve: %v, want ErrSinkFull", err)
	}
}

func TestChanSinkDefaultBound(t *testing.T) {
	t.Parallel()
	q := quota.Default()
	want := q.MaxWatchesPerSession * (1 + q.MaxUnackedUpdates)
	if got := watch.NewChanSink(0).Bound(); got != want || watch.DefaultChanSinkBound != want {
		t.Fatalf("default bound %d (DefaultChanSinkBound %d), want %d", got, watch.DefaultChanSinkBound, want)
	}
	if got := watch.NewChanSink(-1).Bound(); got != want {
		t.Fatalf("bound -1 gave %d, want the default %d", got, want)
	}
}

// A full ChanSink makes the registry close the watch with BUFFER_OVERFLOW
// naming the sink's bound, and the Closed still reaches the reader.
func TestChanSinkOverflowClosesWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	sink := newObservedSink(3)
	s := e.r.OpenSession("p", sink)
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 5))
	// Snapshot, updates 1 and 2 fill the bound; update 3 is refused; the
	// Closed goes into the reserve; updates 4 and 5 are dropped unoffered.
	if refused := sink.offered(t, 5); refused != 1 {
		t.Fatalf("%d deliveries refused, want 1 (update 3)", refused)
	}
	wantSnapshot(t, receive(t, sink.ChanSink), "w")
	wantUpdate(t, receive(t, sink.ChanSink), "w", 1, 1)
	wantUpdate(t, receive(t, sink.ChanSink), "w", 2, 2)
	m := receive(t, sink.ChanSink)
	wantClosed(t, m, "w", watch.BufferOverflow)
	if msg := m.(*watch.Closed).Message; !strings.Contains(msg, "3 unread messages") {
		t.Fatalf("Closed message %q does not name the sink's bound", msg)
	}
	if e.r.Len() != 0 {
		t.Fatal("the overflowed watch still counts")
	}
}

// With the default bound the sink is never what refuses: a reader that
// stops reading is caught by the registry's own MaxUnacked bound.
func TestChanSinkDefaultLeavesOverflowToRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	sink := newObservedSink(0)
	s := e.r.OpenSession("p", sink)
	unacked := quota.Default().MaxUnackedUpdates
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, unacked))
	refused := sink.offered(t, 1+unacked) // the snapshot and every update
	// One more unacknowledged update breaks the registry's bound; the
	// registry's Closed is the only further delivery.
	e.r.Publish(puts("ns", "k", uint64(unacked), 1))
	if refused += sink.offered(t, 1); refused != 0 {
		t.Fatalf("the default-bound sink refused %d deliveries", refused)
	}
	wantSnapshot(t, receive(t, sink.ChanSink), "w")
	for i := 1; i <= unacked; i++ {
		wantUpdate(t, receive(t, sink.ChanSink), "w", uint64(i), uint64(i))
	}
	m := receive(t, sink.ChanSink)
	wantClosed(t, m, "w", watch.BufferOverflow)
	if msg := m.(*watch.Closed).Message; strings.Contains(msg, watch.ErrSinkFull.Error()) {
		t.Fatalf("Closed message %q blames the sink, want the registry's bound", msg)
	}
}
