package watch_test

import (
	"reflect"
	"testing"

	"github.com/keeppeek/statestore/watch"
)

// want builds the Stats a case expects: every reason present, the ones
// given set.
func want(st watch.Stats, closed map[watch.Reason]uint64) watch.Stats {
	st.Closed = map[watch.Reason]uint64{}
	for _, r := range watch.Reasons {
		st.Closed[r] = closed[r]
	}
	return st
}

// publishSettled opens a session with one watch on "ns", lets prepare set
// up its sink, publishes n updates in one call, settles delivery and
// returns the registry's stats.
func publishSettled(e *env, n int, prepare func(*recSink)) watch.Stats {
	s, sink := e.session("p")
	if prepare != nil {
		prepare(sink)
	}
	e.add(s, "w", "ns", "")
	e.r.Publish(puts("ns", "k", 0, n))
	e.drain(s, sink)
	return e.r.Stats()
}

// TestStatsMove drives each event the registry counts and checks every
// counter, so a counter that fails to move, or moves for the wrong event,
// fails. e.drain settles delivery with a barrier watch, which adds one
// Added and one Unwatched of its own.
func TestStatsMove(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		limits watch.Limits
		run    func(e *env) watch.Stats
		want   watch.Stats
	}{
		{
			name: "updates delivered",
			run:  func(e *env) watch.Stats { return publishSettled(e, 3, nil) },
			want: want(watch.Stats{Open: 1, Sessions: 1, Added: 2, Unwatched: 1, Enqueued: 3, Delivered: 3}, nil),
		},
		{
			// One Publish holds the lock for all three events, so the two
			// queued updates are still queued when the third overflows:
			// the close drops them, and the third is never enqueued.
			name:   "buffer overflow drops the update that overflowed and the queued ones",
			limits: watch.Limits{MaxUnacked: 2},
			run:    func(e *env) watch.Stats { return publishSettled(e, 3, nil) },
			want: want(watch.Stats{Sessions: 1, Added: 2, Unwatched: 1, Enqueued: 2, Dropped: 3, Overflowed: 1},
				map[watch.Reason]uint64{watch.BufferOverflow: 1}),
		},
		{
			name: "updates queued for a closed watch are dropped",
			run: func(e *env) watch.Stats {
				s, sink := e.session("p")
				entered, release := sink.block()
				e.add(s, "w", "ns", "")
				<-entered
				e.r.Publish(puts("ns", "k", 0, 5))
				e.r.CloseAll(watch.Restored)
				release()
				e.drain(s, sink)
				return e.r.Stats()
			},
			want: want(watch.Stats{Sessions: 1, Added: 2, Unwatched: 1, Enqueued: 5, Dropped: 5},
				map[watch.Reason]uint64{watch.Restored: 1}),
		},
		{
			name: "an update the sink refuses is dropped, and so are the ones behind it",
			run: func(e *env) watch.Stats {
				return publishSettled(e, 4, func(sink *recSink) { sink.refuseUpdate(2) })
			},
			want: want(watch.Stats{Sessions: 1, Added: 2, Unwatched: 1, Enqueued: 4, Delivered: 1, Dropped: 3},
				map[watch.Reason]uint64{watch.BufferOverflow: 1}),
		},
		{
			name: "unwatch",
			run: func(e *env) watch.Stats {
				s, _ := e.session("p")
				e.add(s, "w", "ns", "")
				if err := e.r.Remove(s, "w"); err != nil {
					e.t.Fatal(err)
				}
				return e.r.Stats()
			},
			want: want(watch.Stats{Sessions: 1, Added: 1, Unwatched: 1}, nil),
		},
		{
			name: "session close removes its watches and drops their queue",
			run: func(e *env) watch.Stats {
				s, sink := e.session("p")
				entered, release := sink.block()
				e.add(s, "a", "ns", "")
				<-entered
				e.add(s, "b", "ns", "")
				e.r.Publish(puts("ns", "k", 0, 3))
				s.Close()
				release()
				<-s.Done()
				return e.r.Stats()
			},
			want: want(watch.Stats{Added: 2, Disconnected: 2, Enqueued: 6, Dropped: 6}, nil),
		},
		{
			name: "ack timeout",
			run: func(e *env) watch.Stats {
				s, sink := e.session("p")
				e.add(s, "w", "ns", "")
				e.r.Publish(puts("ns", "k", 0, 1))
				wantSnapshot(e.t, sink.next(e.t), "w")
				wantUpdate(e.t, sink.next(e.t), "w", 1, 1)
				<-e.clk.Armed()
				e.clk.Advance(e.r.Limits().AckDeadline)
				wantClosed(e.t, sink.next(e.t), "w", watch.AckTimeout)
				e.drain(s, sink)
				return e.r.Stats()
			},
			want: want(watch.Stats{Sessions: 1, Added: 2, Unwatched: 1, Enqueued: 1, Delivered: 1},
				map[watch.Reason]uint64{watch.AckTimeout: 1}),
		},
		{
			name: "authorization lost",
			run: func(e *env) watch.Stats {
				s, _ := e.session("p")
				e.add(s, "a", "ns", "")
				e.add(s, "b", "other", "")
				e.r.CloseWhere(watch.AuthorizationLost, func(_, ns string) bool { return ns == "ns" })
				return e.r.Stats()
			},
			want: want(watch.Stats{Open: 1, Sessions: 1, Added: 2}, map[watch.Reason]uint64{watch.AuthorizationLost: 1}),
		},
		{
			// A node that lost its leader closes every watch, each counted
			// once under its own reason, and the sessions stay open.
			name: "unavailable",
			run: func(e *env) watch.Stats {
				s, _ := e.session("p")
				e.add(s, "a", "ns", "")
				e.add(s, "b", "other", "")
				if n := e.r.CloseAll(watch.Unavailable); n != 2 {
					e.t.Fatalf("CloseAll(Unavailable) closed %d, want 2", n)
				}
				return e.r.Stats()
			},
			want: want(watch.Stats{Sessions: 1, Added: 2}, map[watch.Reason]uint64{watch.Unavailable: 2}),
		},
		{
			name: "stop closes every watch with STORE_CLOSED",
			run: func(e *env) watch.Stats {
				s, _ := e.session("p")
				e.add(s, "a", "ns", "")
				e.add(s, "b", "ns", "")
				e.r.Stop()
				st := e.r.Stats()
				st.Sessions = 0 // Stop ends delivery but does not forget sessions
				return st
			},
			want: want(watch.Stats{Added: 2}, map[watch.Reason]uint64{watch.StoreClosed: 2}),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.limits)
			got := c.run(e)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("stats\n got %+v\nwant %+v", got, c.want)
			}
			// Settled: every update enqueued was delivered or dropped.
			if got.Enqueued != got.Delivered+got.Dropped-got.Overflowed {
				t.Fatalf("enqueued %d != delivered %d + dropped %d - overflowed %d", got.Enqueued, got.Delivered, got.Dropped, got.Overflowed)
			}
		})
	}
}
