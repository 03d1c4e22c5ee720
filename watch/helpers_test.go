package watch_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit only bounds a wait for something that must happen; no test
// sleeps to let something happen.
const waitLimit = 10 * time.Second

var errRefused = errors.New("outbound queue full")

// recSink records every message it accepts on a channel. fail, when set,
// may refuse a message; gate, when set, makes Deliver announce itself on
// entered and then block until gate is closed.
type recSink struct {
	ch chan watch.Message

	mu      sync.Mutex
	fail    func(watch.Message) error
	gate    chan struct{}
	entered chan struct{}
}

func newSink() *recSink { return &recSink{ch: make(chan watch.Message, 1<<14)} }

func (s *recSink) Deliver(m watch.Message) error {
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	return s.offer(m)
}

// offer is Deliver without the gate: what a DirectSink's OfferUpdates
// does, which must not block.
func (s *recSink) offer(m watch.Message) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		if err := fail(m); err != nil {
			return err
		}
	}
	s.ch <- m
	return nil
}

// directSink makes a Sink a watch.DirectSink whose OfferUpdates hands the
// updates to offer, in order, until one is refused, and counts its calls.
type directSink struct {
	watch.Sink
	offer func(watch.Message) error
	calls *atomic.Int64
}

func (d *directSink) OfferUpdates(us []*watch.Update) (int, error) {
	d.calls.Add(1)
	for i, u := range us {
		if err := d.offer(u); err != nil {
			return i, err
		}
	}
	return len(us), nil
}

// directPrefix names the test that runs registry tests again with every
// env session's sink a DirectSink (TestDirectSinks).
const directPrefix = "TestDirectSinks/"

// isDirect reports whether t runs under TestDirectSinks.
func isDirect(t *testing.T) bool { return strings.HasPrefix(t.Name(), directPrefix) }

// block makes the next Deliver calls wait until the returned release is
// called; entered receives once per blocked call.
func (s *recSink) block() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	s.entered = make(chan struct{}, 1024)
	gate := s.gate
	return s.entered, func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	}
}

// refuseUpdate makes the sink refuse the update with sequence seq.
func (s *recSink) refuseUpdate(seq uint64) {
	s.setFail(func(m watch.Message) error {
		if u, ok := m.(*watch.Update); ok && u.Sequence == seq {
			return errRefused
		}
		return nil
	})
}

func (s *recSink) setFail(f func(watch.Message) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

func (s *recSink) next(t *testing.T) watch.Message {
	t.Helper()
	select {
	case m := <-s.ch:
		return m
	case <-time.After(waitLimit):
		t.Fatal("timed out waiting for a message")
		return nil
	}
}

// pending returns what the sink already holds, without waiting.
func (s *recSink) pending() []watch.Message {
	var out []watch.Message
	for {
		select {
		case m := <-s.ch:
			out = append(out, m)
		default:
			return out
		}
	}
}

type env struct {
	t       *testing.T
	r       *watch.Registry
	clk     *clock.Fake
	barrier int
	// direct: sessions get DirectSinks (under TestDirectSinks), whose
	// calls count every OfferUpdates.
	direct bool
	calls  *atomic.Int64
}

var t0 = time.Unix(1_700_000_000, 0)

func newEnv(t *testing.T, l watch.Limits) *env {
	clk := clock.NewFake(t0)
	r := watch.NewRegistry(l, clk)
	t.Cleanup(r.Stop)
	return &env{t: t, r: r, clk: clk, direct: isDirect(t), calls: new(atomic.Int64)}
}

func (e *env) session(principal string) (*watch.Session, *recSink) {
	sink := newSink()
	if e.direct {
		return e.r.OpenSession(principal, &directSink{Sink: sink, offer: sink.offer, calls: e.calls}), sink
	}
	return e.r.OpenSession(principal, sink), sink
}

func (e *env) add(s *watch.Session, id, ns, prefix string) {
	e.t.Helper()
	if err := e.r.Add(s, 0, id, ns, prefix, 0, nil); err != nil {
		e.t.Fatalf("Add(%q): %v", id, err)
	}
}

// drain returns every message delivered to sink before now: it adds a
// barrier watch, whose Snapshot is queued behind everything already queued
// for the session, and collects messages until that Snapshot arrives.
func (e *env) drain(s *watch.Session, sink *recSink) []watch.Message {
	e.t.Helper()
	e.barrier++
	id := fmt.Sprintf("barrier-%d", e.barrier)
	if err := e.r.Add(s, 0, id, "zz/barrier", "", 0, nil); err != nil {
		e.t.Fatalf("barrier Add: %v", err)
	}
	var out []watch.Message
	for {
		m := sink.next(e.t)
		if sn, ok := m.(*watch.Snapshot); ok && sn.WatchID == id {
			if err := e.r.Remove(s, id); err != nil {
				e.t.Fatalf("barrier Remove: %v", err)
			}
			return out
		}
		out = append(out, m)
	}
}

func put(ns, key string, rev uint64) watch.Event {
	return watch.Event{Revision: rev, Kind: watch.Put, Namespace: ns, Key: key,
		Entry: &materialize.Entry{Namespace: ns, Key: key, Revision: rev}}
}

// puts returns n PUT events in ns at revisions from+1 .. from+n.
func puts(ns, key string, from uint64, n int) []watch.Event {
	evs := make([]watch.Event, n)
	for i := range evs {
		evs[i] = put(ns, key, from+uint64(i)+1)
	}
	return evs
}

func wantSnapshot(t *testing.T, m watch.Message, id string) {
	t.Helper()
	if s, ok := m.(*watch.Snapshot); !ok || s.WatchID != id {
		t.Fatalf("got %s, want the Snapshot of %q", describe(m), id)
	}
}

func wantUpdate(t *testing.T, m watch.Message, id string, seq, rev uint64) {
	t.Helper()
	if u, ok := m.(*watch.Update); !ok || u.WatchID != id || u.Sequence != seq || u.Revision != rev {
		t.Fatalf("got %s, want Update %q seq %d rev %d", describe(m), id, seq, rev)
	}
}

func wantClosed(t *testing.T, m watch.Message, id string, reason watch.Reason) {
	t.Helper()
	if c, ok := m.(*watch.Closed); !ok || c.WatchID != id || c.Reason != reason {
		t.Fatalf("got %s, want Closed %q %v", describe(m), id, reason)
	}
}

func describe(m watch.Message) string {
	switch m := m.(type) {
	case *watch.Snapshot:
		return fmt.Sprintf("Snapshot{%q rev %d, %d entries}", m.WatchID, m.SnapshotRevision, len(m.Entries))
	case *watch.Update:
		return fmt.Sprintf("Update{%q seq %d rev %d %v %s/%s}", m.WatchID, m.Sequence, m.Revision, m.Kind, m.Namespace, m.Key)
	case *watch.Closed:
		return fmt.Sprintf("Closed{%q %v: %s}", m.WatchID, m.Reason, m.Message)
	}
	return fmt.Sprintf("%T", m)
}

// byWatch splits messages per watch id, keeping their order.
func byWatch(ms []watch.Message) map[string][]watch.Message {
	out := map[string][]watch.Message{}
	for _, m := range ms {
		var id string
		switch m := m.(type) {
		case *watch.Snapshot:
			id = m.WatchID
		case *watch.Update:
			id = m.WatchID
		case *watch.Closed:
			id = m.WatchID
		}
		out[id] = append(out[id], m)
	}
	return out
}
