package statestore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/watch"
)

// testLeaderlessAfter is the tests' LeaderlessAfter: short, so a test
// waits a fraction of a second, and still above two election timeouts,
// so an ordinary election closes nothing.
const testLeaderlessAfter = 800 * time.Millisecond

// TestClusterLeaderless: a node cut off from the others (a follower, or
// the leader itself, which steps down once its lease finds no quorum)
// closes its watches with UNAVAILABLE once it has heard from no leader for
// LeaderlessAfter, not before; then refuses writes, linearizable reads and
// new watches on field leaderless_after, saying for how long; serves
// StaleOK reads; and serves everything again once it hears a leader.
func TestClusterLeaderless(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pick func(*testCluster) *statestore.Store
	}{
		{"follower", (*testCluster).follower},
		{"old leader", (*testCluster).leader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t, 3, func(co *statestore.ClusterOptions) { co.LeaderlessAfter = testLeaderlessAfter })
			n := tc.pick(c)
			e, err := clusterPut(n, "k", 1, statestore.Expect{})
			if err != nil {
				t.Fatal(err)
			}
			sink := newSink()
			ss, err := n.OpenSession(admin, sink)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
				t.Fatal(err)
			}
			if _, ok := sink.next(t).(*watch.Snapshot); !ok {
				t.Fatal("first message is not the snapshot")
			}
			cut := time.Now()
			c.net.Isolate(raftAddrOf(c, n))
			cl := sink.nextClosed(t)
			took := time.Since(cut)
			if cl.Reason != watch.Unavailable || cl.WatchID != "w" {
				t.Fatalf("the watch closed with %+v, want UNAVAILABLE", cl)
			}
			// The last contact may precede the cut by a heartbeat; the
			// upper slack is for a loaded machine under -race.
			if took < testLeaderlessAfter-100*time.Millisecond || took > testLeaderlessAfter+3*time.Second {
				t.Fatalf("the watch closed %v after the cut, bound %v", took, testLeaderlessAfter)
			}
			if !n.Cluster().Leaderless() {
				t.Fatal("Cluster().Leaderless() is false after the closure")
			}
			refused := func(what string, err error) {
				t.Helper()
				se := wantCode(t, err, statestore.Unavailable, statestore.FieldLeaderlessAfter)
				if !strings.Contains(se.Message, "heard from no leader for") || !strings.Contains(se.Message, testLeaderlessAfter.String()) {
					t.Fatalf("%s: message %q does not say for how long no leader was heard", what, se.Message)
				}
			}
			_, err = clusterPut(n, "k", 2, statestore.Expect{})
			refused("put", err)
			_, err = n.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/g", Key: "k"})
			refused("delete", err)
			_, err = n.Get(ctx, admin, "group/g", "k")
			refused("get", err)
			_, err = n.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w2", Namespace: "group/g"})
			refused("watch", err)
			if got, err := n.Get(statestore.StaleOK(ctx), admin, "group/g", "k"); err != nil || got.Revision != e.Revision {
				t.Fatalf("a stale read while leaderless = %+v, %v", got, err)
			}

			c.net.Heal(raftAddrOf(c, n))
			deadline := time.Now().Add(20 * time.Second)
			for n.Cluster().Leaderless() {
				if time.Now().After(deadline) {
					t.Fatal("still leaderless 20 s after healing")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Healed: writes (possibly after an election the rejoining node
			// provoked, UNAVAILABLE on another field), reads and watches.
			var e2 statestore.Entry
			for i := 0; ; i++ {
				e2, err = clusterPut(n, "k", 3, statestore.Expect{})
				if err == nil {
					break
				}
				if se := new(statestore.Error); !errors.As(err, &se) || se.Field == statestore.FieldLeaderlessAfter || i == 20 {
					t.Fatalf("put after healing: %v", err)
				}
			}
			if got, err := n.Get(ctx, admin, "group/g", "k"); err != nil || got.Revision != e2.Revision {
				t.Fatalf("get after healing = %+v, %v; want revision %d", got, err, e2.Revision)
			}
			if _, err := n.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w3", Namespace: "group/g"}); err != nil {
				t.Fatalf("watch after healing: %v", err)
			}
		})
	}
}

// TestClusterLeaderlessAfterRefused: a negative bound is INVALID_ARGUMENT
// naming the field, and opens nothing.
func TestClusterLeaderlessAfterRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	peers := []statestore.Peer{{ID: "a", RaftAddr: "ra", RPCAddr: "pa"}}
	_, err := statestore.OpenCluster(statestore.Options{Dir: dir}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa", Peers: peers,
		LeaderlessAfter: -time.Second, Engine: &replica.Raft{Loopback: replica.NewLoopback(), Transport: replica.NewInmemNetwork().Transport("ra")}})
	wantCode(t, err, statestore.InvalidArgument, "LeaderlessAfter")
}
