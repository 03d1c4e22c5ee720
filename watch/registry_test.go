package watch_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
)

func TestStrings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		got, want string
	}{
		{watch.Put.String(), "PUT"},
		{watch.Delete.String(), "DELETE"},
		{watch.Expire.String(), "EXPIRE"},
		{watch.Kind(0).String(), "Kind(0)"},
		{watch.BufferOverflow.String(), "BUFFER_OVERFLOW"},
		{watch.AckTimeout.String(), "ACK_TIMEOUT"},
		{watch.AuthorizationLost.String(), "AUTHORIZATION_LOST"},
		{watch.SnapshotDeliveryFailed.String(), "SNAPSHOT_DELIVERY_FAILED"},
		{watch.StoreClosed.String(), "STORE_CLOSED"},
		{watch.Restored.String(), "RESTORED"},
		{watch.Unavailable.String(), "UNAVAILABLE"},
		{watch.Reason(0).String(), "Reason(0)"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestReasonsListsEveryReason: Reasons is what Stats, the wire tables and
// the metrics iterate, so a reason left out of it would be closed but never
// counted or spelled.
func TestReasonsListsEveryReason(t *testing.T) {
	t.Parallel()
	for i, r := range watch.Reasons {
		if r != watch.Reason(i+1) || strings.HasPrefix(r.String(), "Reason(") {
			t.Errorf("Reasons[%d] = %v, want Reason(%d) with a wire name", i, r, i+1)
		}
	}
	if next := watch.Reason(len(watch.Reasons) + 1); !strings.HasPrefix(next.String(), "Reason(") {
		t.Errorf("%v has a wire name but is missing from Reasons", next)
	}
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	want := watch.Limits{MaxWatches: 1024, MaxPerSession: 16, MaxPerPrincipal: 256, MaxUnacked: 32, AckDeadline: 30 * time.Second}
	if got := e.r.Limits(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	if got := watch.LimitsFrom(quota.Default()); got != want {
		t.Fatalf("LimitsFrom(quota.Default()) = %+v, want %+v", got, want)
	}
}

// Sequences start at 1 for every watch, whenever it was added, and have no
// holes; the Snapshot comes first; updates follow commit order.
func TestSequencesPerWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("alice")
	const ns = "user/alice"
	snapEntries := []*materialize.Entry{{Namespace: ns, Key: "k", Revision: 2}}
	if err := e.r.Add(s, 41, "w1", ns, "", 0, nil); err != nil {
		t.Fatal(err)
	}
	e.r.Publish([]watch.Event{put(ns, "k", 1), put(ns, "k", 2)})
	if err := e.r.Add(s, 42, "w2", ns, "", 2, snapEntries); err != nil {
		t.Fatal(err)
	}
	e.r.Publish([]watch.Event{put(ns, "k", 3), {Revision: 4, Kind: watch.Delete, Namespace: ns, Key: "k"}})
	e.r.Publish([]watch.Event{{Revision: 5, Kind: watch.Expire, Namespace: ns, Key: "k2"}})

	got := byWatch(e.drain(s, sink))
	w1, w2 := got["w1"], got["w2"]
	if len(w1) != 6 || len(w2) != 4 {
		t.Fatalf("w1 got %d messages, w2 %d; want 6 and 4", len(w1), len(w2))
	}
	wantSnapshot(t, w1[0], "w1")
	for i := 1; i <= 5; i++ {
		wantUpdate(t, w1[i], "w1", uint64(i), uint64(i))
	}
	sn := w2[0].(*watch.Snapshot)
	if sn.RequestID != 42 || sn.SnapshotRevision != 2 || len(sn.Entries) != 1 || sn.Entries[0] != snapEntries[0] || sn.Namespace != ns {
		t.Fatalf("w2 snapshot %+v", sn)
	}
	for i := 1; i <= 3; i++ {
		wantUpdate(t, w2[i], "w2", uint64(i), uint64(i+2))
	}
	kinds := []watch.Kind{watch.Put, watch.Delete, watch.Expire}
	for i, k := range kinds {
		u := w2[i+1].(*watch.Update)
		if u.Kind != k || (k == watch.Put) != (u.Entry != nil) {
			t.Fatalf("update %d: kind %v entry %v, want kind %v with entry only for PUT", i+1, u.Kind, u.Entry, k)
		}
	}
}

func TestMatching(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		watchNS, prefix string
		eventNS, key    string
		want            bool
	}{
		{"empty prefix matches every key", "user/a", "", "user/a", "anything/x", true},
		{"key under prefix", "user/a", "intents/", "user/a", "intents/cam1", true},
		{"key equal to prefix", "user/a", "intents/cam1", "user/a", "intents/cam1", true},
		{"key shorter than prefix", "user/a", "intents/", "user/a", "intents", false},
		{"other prefix, same namespace", "user/a", "intents/", "user/a", "status/cam1", false},
		{"other namespace, same key", "user/a", "", "user/b", "k", false},
		{"namespace that extends the watched one", "user/a", "", "user/ab", "k", false},
		{"namespace that the watched one extends", "user/ab", "", "user/a", "k", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, watch.Limits{})
			s, _ := e.session("p")
			e.add(s, "w", c.watchNS, c.prefix)
			e.r.Publish([]watch.Event{put(c.eventNS, c.key, 1)})
			// Acking sequence 1 succeeds exactly when an update was sent.
			err := e.r.Ack(s, "w", 1)
			if got := err == nil; got != c.want {
				t.Fatalf("matched %v (ack error %v), want %v", got, err, c.want)
			}
			if !c.want && !errors.Is(err, watch.ErrInvalidSequence) {
				t.Fatalf("ack error %v, want ErrInvalidSequence", err)
			}
		})
	}
}

func TestOtherPrefixGetsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	e.add(s, "intents", "service/t", "intents/")
	e.add(s, "status", "service/t", "status/")
	e.r.Publish([]watch.Event{put("service/t", "intents/a", 1), put("service/t", "intents/b", 2)})
	got := byWatch(e.drain(s, sink))
	if len(got["status"]) != 1 || len(got["intents"]) != 3 {
		t.Fatalf("status got %d messages, intents %d; want 1 (snapshot) and 3", len(got["status"]), len(got["intents"]))
	}
	wantUpdate(t, got["intents"][2], "intents", 2, 2)
}

// n unacknowledged updates are held; the next one closes the watch with
// BUFFER_OVERFLOW, and nothing follows the Closed message.
func TestBufferOverflowBoundary(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 32} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, watch.Limits{MaxUnacked: n})
			s, sink := e.session("p")
			e.add(s, "w", "ns", "")
			e.r.Publish(puts("ns", "k", 0, n))
			got := e.drain(s, sink)
			if len(got) != n+1 {
				t.Fatalf("got %d messages before the bound, want %d", len(got), n+1)
			}
			for i := 1; i <= n; i++ {
				wantUpdate(t, got[i], "w", uint64(i), uint64(i))
			}
			if e.r.Len() != 1 {
				t.Fatalf("watch closed while holding %d updates (limit %d)", n, n)
			}
			e.r.Publish(puts("ns", "k", uint64(n), 1))
			if e.r.Len() != 0 || s.Len() != 0 {
				t.Fatalf("Len %d/%d after update %d, want 0: the watch must close", e.r.Len(), s.Len(), n+1)
			}
			wantClosed(t, sink.next(t), "w", watch.BufferOverflow)
			e.r.Publish(puts("ns", "k", uint64(n+1), 3))
			if rest := e.drain(s, sink); len(rest) != 0 {
				t.Fatalf("after Closed got %s", describe(rest[0]))
			}
			if err := e.r.Ack(s, "w", 1); !errors.Is(err, watch.ErrUnknownWatch) {
				t.Fatalf("ack after close: %v, want ErrUnknownWatch", err)
			}
		})
	}
}

func TestAckFreesBuffer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		ack     uint64 // after 32 updates
		allowed int    // further updates held before the next closes
	}{
		{"ack all", 32, 32},
		{"ack some", 10, 10},
		{"ack none", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, watch.Limits{})
			s, sink := e.session("p")
			e.add(s, "w", "ns", "")
			e.r.Publish(puts("ns", "k", 0, 32))
			if len(e.drain(s, sink)) != 33 {
				t.Fatal("first 32 updates not delivered")
			}
			if err := e.r.Ack(s, "w", c.ack); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.allowed; i++ {
				e.r.Publish(puts("ns", "k", uint64(32+i), 1))
				if e.r.Len() != 1 {
					t.Fatalf("closed at extra update %d, want %d allowed", i+1, c.allowed)
				}
			}
			got := e.drain(s, sink)
			if len(got) != c.allowed {
				t.Fatalf("got %d more updates, want %d", len(got), c.allowed)
			}
			for i, m := range got {
				wantUpdate(t, m, "w", uint64(33+i), uint64(33+i))
			}
			e.r.Publish(puts("ns", "k", uint64(32+c.allowed), 1))
			wantClosed(t, sink.next(t), "w", watch.BufferOverflow)
		})
	}
}

func TestAckErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		sent    int
		acks    []uint64 // all but the last must succeed
		wantErr error
	}{
		{"ack of a sequence never sent", 3, []uint64{4}, watch.ErrInvalidSequence},
		{"ack before any update", 0, []uint64{1}, watch.ErrInvalidSequence},
		{"ack 0 before any update is a no-op", 0, []uint64{0}, nil},
		{"ack of the last sent", 3, []uint64{3}, nil},
		{"older ack is harmless", 3, []uint64{3, 1}, nil},
		{"repeated ack is harmless", 3, []uint64{2, 2}, nil},
		{"never sent after valid", 3, []uint64{2, 5}, watch.ErrInvalidSequence},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, watch.Limits{})
			s, _ := e.session("p")
			e.add(s, "w", "ns", "")
			e.r.Publish(puts("ns", "k", 0, c.sent))
			var err error
			for i, a := range c.acks {
				err = e.r.Ack(s, "w", a)
				if i < len(c.acks)-1 && err != nil {
					t.Fatalf("ack %d: %v", a, err)
				}
			}
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			var se *watch.SequenceError
			if c.wantErr != nil && (!errors.As(err, &se) || se.Last != uint64(c.sent) || se.WatchID != "w") {
				t.Fatalf("error %#v does not name the watch and last sequence %d", err, c.sent)
			}
			if e.r.Len() != 1 {
				t.Fatal("an ack error must not close the watch")
			}
		})
	}
	t.Run("unknown, removed, closed session", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, watch.Limits{})
		s, _ := e.session("p")
		if err := e.r.Ack(s, "nope", 0); !errors.Is(err, watch.ErrUnknownWatch) {
			t.Fatalf("unknown: %v", err)
		}
		e.add(s, "w", "ns", "")
		if err := e.r.Remove(s, "w"); err != nil {
			t.Fatal(err)
		}
		if err := e.r.Ack(s, "w", 0); !errors.Is(err, watch.ErrUnknownWatch) {
			t.Fatalf("removed: %v", err)
		}
		s.Close()
		if err := e.r.Ack(s, "w", 0); !errors.Is(err, watch.ErrSessionClosed) {
			t.Fatalf("closed session: %v", err)
		}
	})
}

// An older ack does not lower the acknowledged sequence: the buffer stays
// as freed as the highest ack made it.
func TestOlderAckKeepsBufferFreed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{MaxUnacked: 4})
	s, sink := e.session("p")
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 4))
	e.drain(s, sink)
	for _, a := range []uint64{4, 1} {
		if err := e.r.Ack(s, "w", a); err != nil {
			t.Fatal(err)
		}
	}
	e.r.Publish(puts("ns", "k", 4, 4))
	if e.r.Len() != 1 {
		t.Fatal("older ack re-counted acknowledged updates")
	}
}

func TestAckDeadline(t *testing.T) {
	t.Parallel()
	const deadline = 30 * time.Second
	cases := []struct {
		name    string
		advance time.Duration
		closed  bool
	}{
		{"just under", deadline - time.Nanosecond, false},
		{"at", deadline, true},
		{"after", deadline + 15*time.Second, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, watch.Limits{AckDeadline: deadline})
			s, sink := e.session("p")
			e.add(s, "w", "ns", "")
			e.r.Publish(puts("ns", "k", 0, 1))
			wantSnapshot(t, sink.next(t), "w")
			wantUpdate(t, sink.next(t), "w", 1, 1)
			<-e.clk.Armed() // the registry's one timer is set
			e.clk.Advance(c.advance)
			if !c.closed {
				// The fake clock fires a timer only at its deadline, so the
				// watch is still open and holds its update.
				if e.r.Len() != 1 {
					t.Fatal("closed before the deadline")
				}
				if err := e.r.Ack(s, "w", 1); err != nil {
					t.Fatal(err)
				}
				if got := e.drain(s, sink); len(got) != 0 {
					t.Fatalf("got %s", describe(got[0]))
				}
				return
			}
			m := sink.next(t)
			wantClosed(t, m, "w", watch.AckTimeout)
			if !strings.Contains(m.(*watch.Closed).Message, "update 1") {
				t.Errorf("message %q does not name the update", m.(*watch.Closed).Message)
			}
			if e.r.Len() != 0 {
				t.Fatal("closed watch still counted")
			}
		})
	}
}

// The deadline runs from when the oldest unacknowledged update was
// enqueued: acking moves it to the next one, and a fully acked watch never
// times out.
func TestAckDeadlineFollowsOldestUnacked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{AckDeadline: 30 * time.Second})
	s, sink := e.session("p")
	e.add(s, "w", "ns", "")
	e.add(s, "idle", "other", "")      // no updates: never times out
	e.r.Publish(puts("ns", "k", 0, 1)) // seq 1 at t0
	<-e.clk.Armed()
	e.clk.Advance(20 * time.Second)
	e.r.Publish(puts("ns", "k", 1, 1)) // seq 2 at t0+20s
	if err := e.r.Ack(s, "w", 1); err != nil {
		t.Fatal(err)
	}
	if got := e.drain(s, sink); len(got) != 4 {
		t.Fatalf("got %d messages, want two snapshots and two updates", len(got))
	}
	e.clk.Advance(10 * time.Second) // t0+30s: the timer fires, finds seq 2 not due yet
	<-e.clk.Armed()                 // re-armed for t0+50s
	e.clk.Advance(20*time.Second - time.Nanosecond)
	if e.r.Len() != 2 {
		t.Fatal("closed before the oldest unacknowledged update's deadline")
	}
	e.clk.Advance(time.Nanosecond)
	m := sink.next(t)
	wantClosed(t, m, "w", watch.AckTimeout)
	if !strings.Contains(m.(*watch.Closed).Message, "update 2") {
		t.Errorf("message %q does not name update 2", m.(*watch.Closed).Message)
	}
	if e.r.Len() != 1 {
		t.Fatal("idle watch must stay open")
	}
}

func TestFullyAckedNeverTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{AckDeadline: 30 * time.Second})
	s, sink := e.session("p")
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 1))
	<-e.clk.Armed()
	e.clk.Advance(29 * time.Second)
	if err := e.r.Ack(s, "w", 1); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour) // the early timer fires and finds nothing due
	// Whichever runs first, the expiry scan or this Publish, exactly one
	// timer is armed for the new update, at its own deadline.
	e.r.Publish(puts("ns", "k", 1, 1))
	<-e.clk.Armed()
	got := e.drain(s, sink)
	if len(got) != 3 {
		t.Fatalf("got %d messages, want snapshot and two updates", len(got))
	}
	wantUpdate(t, got[2], "w", 2, 2)
	e.clk.Advance(30 * time.Second)
	wantClosed(t, sink.next(t), "w", watch.AckTimeout)
}

func TestSinkFailureOnSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	sink.setFail(func(m watch.Message) error {
		if sn, ok := m.(*watch.Snapshot); ok && sn.WatchID == "w" {
			return errRefused
		}
		return nil
	})
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 2))
	m := sink.next(t)
	wantClosed(t, m, "w", watch.SnapshotDeliveryFailed)
	if !strings.Contains(m.(*watch.Closed).Message, errRefused.Error()) {
		t.Errorf("message %q does not carry the cause", m.(*watch.Closed).Message)
	}
	if rest := e.drain(s, sink); len(rest) != 0 {
		t.Fatalf("after Closed got %s", describe(rest[0]))
	}
	if e.r.Len() != 0 {
		t.Fatal("failed watch still counted")
	}
}

func TestSinkFailureOnUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	sink.refuseUpdate(2)
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 4))
	wantSnapshot(t, sink.next(t), "w")
	wantUpdate(t, sink.next(t), "w", 1, 1)
	wantClosed(t, sink.next(t), "w", watch.BufferOverflow)
	e.r.Publish(puts("ns", "k", 4, 1))
	if rest := e.drain(s, sink); len(rest) != 0 {
		t.Fatalf("after Closed got %s", describe(rest[0]))
	}
}

// A refused Closed message is not retried and closes nothing else.
func TestSinkFailureOnClosedIsBestEffort(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	sink.setFail(func(m watch.Message) error {
		if _, ok := m.(*watch.Closed); ok {
			return errRefused
		}
		return nil
	})
	e.add(s, "w", "ns", "")
	e.add(s, "v", "ns", "")
	e.r.CloseWhere(watch.AuthorizationLost, func(_, _ string) bool { return true })
	got := e.drain(s, sink)
	if len(got) != 2 {
		t.Fatalf("got %d messages, want the two snapshots", len(got))
	}
}

func TestCloseWhereAuthorizationLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	alice, aSink := e.session("alice")
	bob, bSink := e.session("bob")
	e.add(alice, "own", "user/alice", "")
	e.add(alice, "svc", "service/t", "")
	e.add(bob, "svc", "service/t", "")
	e.r.Publish([]watch.Event{put("service/t", "k", 1)})
	before := byWatch(e.drain(alice, aSink))
	if len(before["svc"]) != 2 {
		t.Fatalf("alice svc got %d messages before the revocation", len(before["svc"]))
	}

	n := e.r.CloseWhere(watch.AuthorizationLost, func(p, ns string) bool {
		return p == "alice" && strings.HasPrefix(ns, "service/")
	})
	if n != 1 || e.r.Len() != 2 || alice.Len() != 1 {
		t.Fatalf("closed %d (Len %d, alice %d), want 1 closed", n, e.r.Len(), alice.Len())
	}
	e.r.Publish([]watch.Event{put("service/t", "k", 2), put("user/alice", "k", 1)})

	a := byWatch(e.drain(alice, aSink))
	if len(a["svc"]) != 1 {
		t.Fatalf("alice svc got %d messages after the revocation, want only Closed", len(a["svc"]))
	}
	wantClosed(t, a["svc"][0], "svc", watch.AuthorizationLost)
	if len(a["own"]) != 1 {
		t.Fatalf("alice own got %d messages, want its update", len(a["own"]))
	}
	wantUpdate(t, a["own"][0], "own", 1, 1)
	b := byWatch(e.drain(bob, bSink))
	if len(b["svc"]) != 3 {
		t.Fatalf("bob got %d messages, want snapshot and two updates", len(b["svc"]))
	}
	wantUpdate(t, b["svc"][2], "svc", 2, 2)
}

// Closing a watch drops its queued updates but not a queued Snapshot (the
// reply to the client's request): the Closed message follows it.
func TestCloseKeepsQueuedSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	entered, release := sink.block()
	e.add(s, "first", "other", "")
	<-entered // first's Snapshot is being delivered; w's queues behind it
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 3))
	if n := e.r.CloseWhere(watch.AuthorizationLost, func(_, ns string) bool { return ns == "ns" }); n != 1 {
		t.Fatalf("closed %d", n)
	}
	release()
	wantSnapshot(t, sink.next(t), "first")
	wantSnapshot(t, sink.next(t), "w")
	wantClosed(t, sink.next(t), "w", watch.AuthorizationLost)
	if rest := e.drain(s, sink); len(rest) != 0 {
		t.Fatalf("after Closed got %s", describe(rest[0]))
	}
}

// Closing a watch drops its queued updates: the Closed message follows
// whatever the Sink already had, and nothing else.
func TestCloseDropsQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("p")
	entered, release := sink.block()
	e.add(s, "w", "ns", "")
	<-entered // the Snapshot is being delivered; updates now queue behind it
	e.r.Publish(puts("ns", "k", 0, 5))
	if n := e.r.CloseAll(watch.Restored); n != 1 {
		t.Fatalf("CloseAll closed %d", n)
	}
	release()
	wantSnapshot(t, sink.next(t), "w")
	wantClosed(t, sink.next(t), "w", watch.Restored)
	if rest := e.drain(s, sink); len(rest) != 0 {
		t.Fatalf("after Closed got %s", describe(rest[0]))
	}
	// A restore does not end sessions: the client re-watches.
	e.add(s, "w", "ns", "")
	wantSnapshot(t, sink.next(t), "w")
}

// A client acking updates it has not received yet cannot grow the queue:
// at most MaxUnacked updates of a watch are ever queued.
func TestQueueBoundedDespiteEarlyAcks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{MaxUnacked: 4})
	s, sink := e.session("p")
	entered, release := sink.block()
	e.add(s, "w", "ns", "")
	<-entered
	e.r.Publish(puts("ns", "k", 0, 4))
	if err := e.r.Ack(s, "w", 4); err != nil {
		t.Fatal(err)
	}
	e.r.Publish(puts("ns", "k", 4, 1))
	if e.r.Len() != 0 {
		t.Fatal("a fifth queued update was accepted")
	}
	release()
	wantSnapshot(t, sink.next(t), "w")
	wantClosed(t, sink.next(t), "w", watch.BufferOverflow)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		lim  watch.Limits
		run  func(t *testing.T, e *env)
	}{
		{"per session: limit held, next refused, other session unaffected", watch.Limits{MaxPerSession: 2}, func(t *testing.T, e *env) {
			s1, _ := e.session("p")
			s2, _ := e.session("p")
			e.add(s1, "a", "ns", "")
			e.add(s1, "b", "ns", "")
			err := e.r.Add(s1, 0, "c", "ns", "", 0, nil)
			wantLimit(t, err, watch.BoundWatchesPerSession, 2)
			e.add(s2, "c", "ns", "")
			if s1.Len() != 2 || s2.Len() != 1 || e.r.Len() != 3 {
				t.Fatalf("Len %d %d %d", s1.Len(), s2.Len(), e.r.Len())
			}
		}},
		{"store-wide: limit held across sessions, Remove frees a slot", watch.Limits{MaxWatches: 3, MaxPerPrincipal: 3}, func(t *testing.T, e *env) {
			s1, _ := e.session("p")
			s2, _ := e.session("q")
			e.add(s1, "a", "ns", "")
			e.add(s1, "b", "ns", "")
			e.add(s2, "a", "ns", "")
			wantLimit(t, e.r.Add(s2, 0, "b", "ns", "", 0, nil), watch.BoundWatches, 3)
			if err := e.r.Remove(s1, "a"); err != nil {
				t.Fatal(err)
			}
			e.add(s2, "b", "ns", "")
			wantLimit(t, e.r.Add(s1, 0, "c", "ns", "", 0, nil), watch.BoundWatches, 3)
		}},
		{"per principal: held across its sessions, other principal unaffected, a close frees a place", watch.Limits{MaxPerPrincipal: 3}, func(t *testing.T, e *env) {
			s1, _ := e.session("p")
			s2, _ := e.session("p")
			q, _ := e.session("q")
			e.add(s1, "a", "ns", "")
			e.add(s1, "b", "ns", "")
			e.add(s2, "a", "ns", "")
			err := e.r.Add(s2, 0, "b", "ns", "", 0, nil)
			wantLimit(t, err, watch.BoundWatchesPerPrincipal, 3)
			if le := (*watch.LimitError)(nil); !errors.As(err, &le) || le.Principal != "p" || !strings.Contains(err.Error(), `principal "p"`) {
				t.Fatalf("the refusal %v does not name the principal", err)
			}
			e.add(q, "a", "ns", "")
			s1.Close()
			e.add(s2, "b", "ns", "")
			e.add(s2, "c", "ns", "")
			wantLimit(t, e.r.Add(s2, 0, "d", "ns", "", 0, nil), watch.BoundWatchesPerPrincipal, 3)
		}},
		{"duplicate watch_id in a session, fine in another", watch.Limits{}, func(t *testing.T, e *env) {
			s1, _ := e.session("p")
			s2, _ := e.session("p")
			e.add(s1, "a", "ns", "")
			err := e.r.Add(s1, 0, "a", "other", "", 0, nil)
			if !errors.Is(err, watch.ErrDuplicateWatch) || !strings.Contains(err.Error(), `"a"`) {
				t.Fatalf("duplicate: %v", err)
			}
			e.add(s2, "a", "ns", "")
		}},
		{"duplicate is reported before the limit", watch.Limits{MaxPerSession: 1}, func(t *testing.T, e *env) {
			s, _ := e.session("p")
			e.add(s, "a", "ns", "")
			if err := e.r.Add(s, 0, "a", "ns", "", 0, nil); !errors.Is(err, watch.ErrDuplicateWatch) {
				t.Fatalf("got %v", err)
			}
		}},
		{"watch_id reusable after Remove", watch.Limits{}, func(t *testing.T, e *env) {
			s, sink := e.session("p")
			e.add(s, "a", "ns", "")
			e.r.Publish(puts("ns", "k", 0, 2))
			if err := e.r.Remove(s, "a"); err != nil {
				t.Fatal(err)
			}
			if err := e.r.Remove(s, "a"); !errors.Is(err, watch.ErrUnknownWatch) {
				t.Fatalf("second Remove: %v", err)
			}
			e.add(s, "a", "ns", "")
			e.r.Publish(puts("ns", "k", 2, 1))
			got := e.drain(s, sink)
			// No Closed for a removed watch; the new one starts at 1.
			last := got[len(got)-1]
			wantUpdate(t, last, "a", 1, 3)
			for _, m := range got {
				if _, ok := m.(*watch.Closed); ok {
					t.Fatalf("Remove sent %s", describe(m))
				}
			}
		}},
		{"watch_id and slot reusable after a close", watch.Limits{MaxWatches: 1, MaxUnacked: 1}, func(t *testing.T, e *env) {
			s, sink := e.session("p")
			e.add(s, "a", "ns", "")
			e.r.Publish(puts("ns", "k", 0, 1))
			wantSnapshot(t, sink.next(t), "a")
			wantUpdate(t, sink.next(t), "a", 1, 1)
			e.r.Publish(puts("ns", "k", 1, 1))
			wantClosed(t, sink.next(t), "a", watch.BufferOverflow)
			e.add(s, "a", "ns", "")
			wantSnapshot(t, sink.next(t), "a")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newEnv(t, c.lim))
		})
	}
}

func wantLimit(t *testing.T, err error, bound string, limit int) {
	t.Helper()
	var le *watch.LimitError
	if !errors.Is(err, watch.ErrWatchLimit) || !errors.As(err, &le) || le.Bound != bound || le.Limit != limit {
		t.Fatalf("got %v, want the %s limit %d", err, bound, limit)
	}
	if !strings.Contains(err.Error(), bound) || !strings.Contains(err.Error(), strconv.Itoa(limit)) {
		t.Fatalf("message %q does not name the bound and its value", err)
	}
}

func TestSessionClose(t *testing.T) {
	// Serial: goleak.VerifyNone checks the goroutines of the whole process.
	e := newEnv(t, watch.Limits{MaxWatches: 3, MaxPerPrincipal: 3})
	s1, sink := e.session("p")
	s2, _ := e.session("q")
	if s1.ID() == s2.ID() || s1.PrincipalID() != "p" {
		t.Fatalf("ids %d %d principal %q", s1.ID(), s2.ID(), s1.PrincipalID())
	}
	entered, release := sink.block()
	for _, id := range []string{"a", "b", "c"} {
		e.add(s1, id, "ns", "")
	}
	<-entered // delivering a's snapshot; the rest is queued
	e.r.Publish(puts("ns", "k", 0, 3))
	s1.Close()
	s1.Close() // idempotent
	if e.r.Len() != 0 || s1.Len() != 0 {
		t.Fatalf("Len %d/%d after Close", e.r.Len(), s1.Len())
	}
	for _, id := range []string{"a", "b", "c"} {
		e.add(s2, id, "ns", "") // slots freed
	}
	if err := e.r.Add(s1, 0, "d", "ns", "", 0, nil); !errors.Is(err, watch.ErrSessionClosed) {
		t.Fatalf("Add on closed session: %v", err)
	}
	if err := e.r.Remove(s1, "a"); !errors.Is(err, watch.ErrSessionClosed) {
		t.Fatalf("Remove on closed session: %v", err)
	}
	release()
	select {
	case <-s1.Done():
	case <-time.After(waitLimit):
		t.Fatal("delivery goroutine did not stop")
	}
	// Only the message in flight at Close was delivered; the queue was dropped.
	if got := sink.pending(); len(got) != 1 {
		t.Fatalf("closed session delivered %d messages, want 1", len(got))
	}
	e.r.Publish(puts("ns", "k", 3, 1))
	e.r.Stop()
	goleak.VerifyNone(t)
}

func TestStop(t *testing.T) {
	// Serial: goleak.VerifyNone checks the goroutines of the whole process.
	e := newEnv(t, watch.Limits{})
	s1, sink1 := e.session("p")
	s2, sink2 := e.session("q")
	e.add(s1, "a", "ns", "")
	e.add(s2, "b", "ns", "")
	e.r.Publish(puts("ns", "k", 0, 1))
	<-e.clk.Armed()
	for _, sink := range []*recSink{sink1, sink2} {
		sink.next(t) // snapshot
		sink.next(t) // update
	}
	e.add(s1, "c", "ns", "")
	e.r.Stop()
	// Stop returns after the sessions drained: everything is already there.
	for _, c := range []struct {
		sink *recSink
		id   string
	}{{sink1, "a"}, {sink2, "b"}} {
		got := byWatch(c.sink.pending())
		if len(got[c.id]) != 1 {
			t.Fatalf("%s got %d more messages, want Closed", c.id, len(got[c.id]))
		}
		wantClosed(t, got[c.id][0], c.id, watch.StoreClosed)
		if c.id == "a" {
			// c was added just before Stop: its queued Snapshot is delivered,
			// then its Closed.
			if len(got["c"]) != 2 {
				t.Fatalf("c got %d messages, want Snapshot and Closed", len(got["c"]))
			}
			wantSnapshot(t, got["c"][0], "c")
			wantClosed(t, got["c"][1], "c", watch.StoreClosed)
		}
	}
	e.r.Stop() // idempotent
	if err := e.r.Add(s1, 0, "x", "ns", "", 0, nil); !errors.Is(err, watch.ErrStopped) {
		t.Fatalf("Add after Stop: %v", err)
	}
	s3 := e.r.OpenSession("r", newSink())
	if err := e.r.Add(s3, 0, "x", "ns", "", 0, nil); !errors.Is(err, watch.ErrStopped) {
		t.Fatalf("Add on a session opened after Stop: %v", err)
	}
	e.r.Publish(puts("ns", "k", 1, 1))
	if n := e.r.CloseAll(watch.Restored); n != 0 || e.r.Len() != 0 {
		t.Fatalf("CloseAll after Stop closed %d", n)
	}
	s1.Close()
	s3.Close()
	goleak.VerifyNone(t)
}

// Drain delivers what was queued before it, the Closed of a CloseWhere
// included, and then nothing more: the session is ending.
func TestDrainDeliversWhatIsQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	s, sink := e.session("alice")
	entered, release := sink.block()
	e.add(s, "first", "user/alice", "")
	<-entered // first's Snapshot is being delivered; the rest queues behind it
	e.add(s, "w", "service/t", "")
	if n := e.r.CloseWhere(watch.AuthorizationLost, func(p, _ string) bool { return p == "alice" }); n != 2 {
		t.Fatalf("closed %d, want 2", n)
	}
	drained := make(chan struct{})
	go func() {
		s.Drain()
		close(drained)
	}()
	select {
	case <-drained:
		t.Fatal("Drain returned while the Sink still held a message")
	default:
	}
	release()
	select {
	case <-drained:
	case <-time.After(waitLimit):
		t.Fatal("Drain did not return")
	}
	got := sink.pending()
	if len(got) != 4 {
		t.Fatalf("Drain delivered %d messages, want first's Snapshot, w's Snapshot and both Closed", len(got))
	}
	wantSnapshot(t, got[0], "first")
	wantSnapshot(t, got[1], "w")
	byID := byWatch(got[2:])
	wantClosed(t, byID["first"][0], "first", watch.AuthorizationLost)
	wantClosed(t, byID["w"][0], "w", watch.AuthorizationLost)
	// Nothing queued after Drain is delivered.
	e.add(s, "late", "user/alice", "")
	e.r.Publish([]watch.Event{put("user/alice", "k", 1)})
	select {
	case <-s.Done():
	default:
		t.Fatal("the delivery goroutine still runs after Drain")
	}
	if rest := sink.pending(); len(rest) != 0 {
		t.Fatalf("after Drain the Sink got %s", describe(rest[0]))
	}
	s.Close()
}
