package watch_test

import (
	"errors"
	"testing"

	"github.com/keeppeek/statestore/watch"
)

// Every registry property holds when the sessions' sinks are DirectSinks:
// the tests that build their sessions through env run again with each
// session's updates handed over by Publish whenever nothing of the session
// is queued or being delivered.
//
// Serial, as TestStop and TestSessionClose are (goleak.VerifyNone checks
// the whole process): they run in its body, the parallel ones after it.
func TestDirectSinks(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"SessionClose", TestSessionClose},
		{"Stop", TestStop},
		{"SequencesPerWatch", TestSequencesPerWatch},
		{"Matching", TestMatching},
		{"OtherPrefixGetsNothing", TestOtherPrefixGetsNothing},
		{"BufferOverflowBoundary", TestBufferOverflowBoundary},
		{"AckFreesBuffer", TestAckFreesBuffer},
		{"AckErrors", TestAckErrors},
		{"OlderAckKeepsBufferFreed", TestOlderAckKeepsBufferFreed},
		{"AckDeadline", TestAckDeadline},
		{"AckDeadlineFollowsOldestUnacked", TestAckDeadlineFollowsOldestUnacked},
		{"FullyAckedNeverTimesOut", TestFullyAckedNeverTimesOut},
		{"SinkFailureOnSnapshot", TestSinkFailureOnSnapshot},
		{"SinkFailureOnUpdate", TestSinkFailureOnUpdate},
		{"SinkFailureOnClosedIsBestEffort", TestSinkFailureOnClosedIsBestEffort},
		{"CloseWhereAuthorizationLost", TestCloseWhereAuthorizationLost},
		{"CloseKeepsQueuedSnapshot", TestCloseKeepsQueuedSnapshot},
		{"CloseDropsQueued", TestCloseDropsQueued},
		{"QueueBoundedDespiteEarlyAcks", TestQueueBoundedDespiteEarlyAcks},
		{"Limits", TestLimits},
		{"DrainDeliversWhatIsQueued", TestDrainDeliversWhatIsQueued},
		{"StatsMove", TestStatsMove},
		{"UpdatesOfOneEventShareAMemo", TestUpdatesOfOneEventShareAMemo},
		{"NoGapUnderConcurrentWrites", TestNoGapUnderConcurrentWrites},
		{"ConcurrentChurn", TestConcurrentChurn},
	} {
		t.Run(c.name, c.run)
	}
}

// A session that is idle when a commit publishes gets the commit's updates
// for all its watches in one OfferUpdates, in order, and none through
// Deliver; one whose earlier message is still being delivered gets them
// through Deliver, behind it.
func TestDirectSinkTakesACommitAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	e.direct = true
	s, sink := e.session("p")
	e.add(s, "a", "ns", "")
	e.add(s, "b", "ns", "k")
	wantSnapshot(t, sink.next(t), "a")
	wantSnapshot(t, sink.next(t), "b")
	e.drain(s, sink)
	before := e.calls.Load()
	e.r.Publish(puts("ns", "k1", 0, 3))
	if got := e.calls.Load() - before; got != 1 {
		t.Fatalf("%d OfferUpdates calls for one Publish, want 1", got)
	}
	per := byWatch(sink.pending())
	for _, id := range []string{"a", "b"} {
		if len(per[id]) != 3 {
			t.Fatalf("watch %s: %d updates offered at once, want 3: %v", id, len(per[id]), per)
		}
		for i, m := range per[id] {
			wantUpdate(t, m, id, uint64(i+1), uint64(i+1))
		}
	}

	// A snapshot still in Deliver: the next commit queues behind it.
	entered, release := sink.block()
	e.add(s, "c", "ns", "")
	<-entered
	before = e.calls.Load()
	e.r.Publish(puts("ns", "k1", 3, 1))
	if got := e.calls.Load() - before; got != 0 {
		t.Fatalf("%d OfferUpdates calls while a snapshot is being delivered, want 0", got)
	}
	release()
	got := e.drain(s, sink)
	if len(got) != 4 {
		t.Fatalf("got %d messages, want the snapshot and 3 updates: %v", len(got), got)
	}
	wantSnapshot(t, got[0], "c")
	per = byWatch(got[1:])
	wantUpdate(t, per["a"][0], "a", 4, 4)
	wantUpdate(t, per["b"][0], "b", 4, 4)
	wantUpdate(t, per["c"][0], "c", 1, 4)
}

// The update a DirectSink refuses closes its watch with BUFFER_OVERFLOW
// after the updates it took; the session's later updates (other watches')
// still reach the sink, through Deliver, and every update is counted once.
func TestDirectSinkRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	sink := newSink()
	// Refused when offered, accepted by Deliver: the refusal alone must
	// close the watch.
	offer := func(m watch.Message) error {
		if u, ok := m.(*watch.Update); ok && u.WatchID == "b" && u.Sequence == 2 {
			return errRefused
		}
		return sink.offer(m)
	}
	s := e.r.OpenSession("p", &directSink{Sink: sink, offer: offer, calls: e.calls})
	for _, id := range []string{"a", "b", "c"} {
		e.add(s, id, "ns", "")
	}
	e.drain(s, sink)
	e.r.Publish(puts("ns", "k", 0, 3))
	per := byWatch(e.drain(s, sink))
	for _, id := range []string{"a", "c"} {
		if len(per[id]) != 3 {
			t.Fatalf("watch %s: %v, want its 3 updates", id, per[id])
		}
		for i, m := range per[id] {
			wantUpdate(t, m, id, uint64(i+1), uint64(i+1))
		}
	}
	if b := per["b"]; len(b) != 2 {
		t.Fatalf("watch b: %v, want update 1 and its closure", b)
	}
	wantUpdate(t, per["b"][0], "b", 1, 1)
	wantClosed(t, per["b"][1], "b", watch.BufferOverflow)
	st := e.r.Stats()
	if st.Enqueued != 9 || st.Delivered != 7 || st.Dropped != 2 || st.Overflowed != 0 {
		t.Fatalf("stats %+v, want 9 enqueued, 7 delivered, 2 dropped (b's 2 and 3)", st)
	}
	if e.r.Len() != 2 {
		t.Fatalf("%d watches open, want 2", e.r.Len())
	}
	if err := e.r.Ack(s, "b", 1); !errors.Is(err, watch.ErrUnknownWatch) {
		t.Fatalf("Ack of the closed watch: %v, want ErrUnknownWatch", err)
	}
}

// Once Drain is asked for, nothing more reaches the sink, OfferUpdates
// included.
func TestDirectSinkNothingAfterDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	e.direct = true
	s, sink := e.session("p")
	e.add(s, "a", "ns", "")
	wantSnapshot(t, sink.next(t), "a")
	s.Drain()
	before := e.calls.Load()
	e.r.Publish(puts("ns", "k", 0, 2))
	if got := e.calls.Load() - before; got != 0 {
		t.Fatalf("%d OfferUpdates calls after Drain", got)
	}
	if got := sink.pending(); len(got) != 0 {
		t.Fatalf("delivered after Drain: %v", got)
	}
	s.Close()
}

// What a DirectSink took no longer counts as queued: a watch acknowledged
// as it goes takes many times its buffer's worth of updates, all offered.
func TestDirectSinkFreesTheQueue(t *testing.T) {
	t.Parallel()
	const bound = 4
	e := newEnv(t, watch.Limits{MaxUnacked: bound})
	e.direct = true
	s, sink := e.session("p")
	e.add(s, "a", "ns", "")
	wantSnapshot(t, sink.next(t), "a")
	e.drain(s, sink)
	for round := range uint64(5) {
		before := e.calls.Load()
		e.r.Publish(puts("ns", "k", round*bound, bound))
		if e.calls.Load() == before {
			t.Fatalf("round %d: nothing offered", round)
		}
		got := sink.pending()
		if len(got) != bound {
			t.Fatalf("round %d: %v, want %d updates", round, got, bound)
		}
		for i, m := range got {
			n := round*bound + uint64(i) + 1
			wantUpdate(t, m, "a", n, n)
		}
		if err := e.r.Ack(s, "a", (round+1)*bound); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
