package statestore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
)

// settle polls cond every 5 ms, at most 2,000 times (10 s): the raft
// state moves in raft's goroutines and the leader's progress calls.
func settle(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for range 2000 {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within 10 s; last %s", what, last)
}

// follower returns the leader's record of id, failing if it has none.
func followerOf(t *testing.T, st statestore.ClusterStats, id string) statestore.FollowerStats {
	t.Helper()
	for _, f := range st.Followers {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("the leader's stats list no follower %q: %v", id, st)
	return statestore.FollowerStats{}
}

// TestClusterStats: a write raises the commit and applied index on every
// node and every follower's applied index at the leader, with no lag left;
// a leadership transfer bumps the term and every node's leader changes; a
// stopped follower's lag and last contact grow on the leader as writes go
// on without it; a checkpoint counts a snapshot taken.
func TestClusterStats(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l := c.leader()
	before := map[string]statestore.ClusterStats{}
	for _, s := range c.all() {
		st := s.Cluster().Stats()
		before[st.NodeID] = st
		if st.LeaderChanges == 0 || st.Term == 0 {
			t.Errorf("%s after the election: %v; want a term and a leader change", st.NodeID, st)
		}
	}
	if _, err := clusterPut(l, "k", 1, statestore.Expect{}); err != nil {
		t.Fatal(err)
	}
	idx := l.Cluster().AppliedIndex()
	for _, s := range c.all() {
		settle(t, s.Cluster().NodeID()+" applies the write", func() (bool, string) {
			st := s.Cluster().Stats()
			b := before[st.NodeID]
			return st.AppliedIndex >= idx && st.CommitIndex >= idx && st.AppliedIndex > b.AppliedIndex && st.CommitIndex > b.CommitIndex &&
				st.LastLogIndex >= st.CommitIndex, st.String()
		})
		st := s.Cluster().Stats()
		switch {
		case s == l && (st.State != "leader" || st.LastContact != 0 || len(st.Followers) != 2):
			t.Errorf("leader: %v; want state leader, last contact 0, two followers", st)
		case s != l && (st.State != "follower" || st.LastContact < 0 || st.LastContact > 5*time.Second || st.Followers != nil):
			t.Errorf("follower: %v; want state follower, a recent contact, no follower table", st)
		}
	}
	settle(t, "the leader sees both followers caught up", func() (bool, string) {
		st := l.Cluster().Stats()
		ok := len(st.Followers) == 2
		for _, f := range st.Followers {
			ok = ok && f.Answered && f.Voter && f.AppliedIndex >= idx && f.LastLogIndex >= idx && f.Lag == 0 && f.LastContact >= 0 && f.LastContact < 5*time.Second
		}
		return ok, st.String()
	})

	// A follower asks the leader for the same table.
	for _, s := range c.all() {
		ls, err := s.Cluster().LeaderStats(ctx)
		if err != nil || ls.NodeID != l.Cluster().NodeID() || len(ls.Followers) != 2 || !ls.Followers[0].Answered {
			t.Errorf("%s: LeaderStats = %v, %v; want the leader's, with both followers", s.Cluster().NodeID(), ls, err)
		}
	}

	// A leadership transfer: a new term, a leader change on every node.
	old := l.Cluster().Stats()
	if err := l.Cluster().TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	settle(t, "a new leader", func() (bool, string) {
		for _, s := range c.all() {
			if s != l && s.Cluster().IsLeader() {
				return true, ""
			}
		}
		return false, l.Cluster().Stats().String()
	})
	nl := c.leader()
	for _, s := range c.all() {
		settle(t, s.Cluster().NodeID()+" sees the new leader's term", func() (bool, string) {
			st := s.Cluster().Stats()
			b := before[st.NodeID]
			return st.Term > old.Term && st.LeaderChanges > b.LeaderChanges && st.Leader == nl.Cluster().NodeID(), st.String()
		})
	}

	// A stopped follower falls behind on the leader, once the new leader
	// has heard from it.
	settle(t, "the new leader hears from both followers", func() (bool, string) {
		st := nl.Cluster().Stats()
		ok := len(st.Followers) == 2
		for _, f := range st.Followers {
			ok = ok && f.Answered && f.LastContact >= 0
		}
		return ok, st.String()
	})
	var gone *statestore.Store
	for _, s := range c.all() {
		if s != nl {
			gone = s
			break
		}
	}
	id := gone.Cluster().NodeID()
	c.stop(gone)
	at := followerOf(t, nl.Cluster().Stats(), id)
	const writes = 5
	for i := range writes {
		if _, err := clusterPut(nl, fmt.Sprintf("away%d", i), i, statestore.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, "the stopped follower's lag and last contact grow", func() (bool, string) {
		st := nl.Cluster().Stats()
		leaderMoved(t, nl, st)
		f := followerOf(t, st, id)
		return f.Lag >= at.Lag+writes && f.AppliedIndex <= at.AppliedIndex && f.LastContact > at.LastContact+time.Second, st.String()
	})

	taken := nl.Cluster().Stats().SnapshotsTaken
	if err := nl.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := nl.Cluster().Stats().SnapshotsTaken; got != taken+1 {
		t.Errorf("after a checkpoint, snapshots taken %d; want %d", got, taken+1)
	}
}

// leaderMoved skips the rest of a test whose leader l lost its
// leadership while the test watched its follower table: under -race on a
// loaded machine a missed heartbeat elects another node, whose table
// starts afresh, and what the test measures (growth at one leader) is then
// not there to see.
func leaderMoved(t *testing.T, l *statestore.Store, st statestore.ClusterStats) {
	t.Helper()
	if !l.Cluster().IsLeader() {
		t.Skipf("the leader lost its leadership during the test (its stats: %s)", st.String())
	}
}

// TestClusterStatsFollowerCutOffFromRaft: a follower whose raft links are
// cut still answers the leader's progress calls (they travel beside
// raft), and the leader reports its silence from raft all the same: its
// last contact grows past a second while its lag grows with the writes.
func TestClusterStatsFollowerCutOffFromRaft(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	id := f.Cluster().NodeID()
	settle(t, "the leader hears from its followers", func() (bool, string) {
		st := l.Cluster().Stats()
		ok := len(st.Followers) == 2
		for _, f := range st.Followers {
			ok = ok && f.Answered && f.LastContact >= 0
		}
		return ok, st.String()
	})
	c.net.Isolate(raftAddrOf(c, f))
	followerOf(t, l.Cluster().Stats(), id) // listed before the writes
	for i := range 3 {
		if _, err := clusterPut(l, fmt.Sprintf("cut%d", i), i, statestore.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, "the cut-off follower's last contact and lag grow", func() (bool, string) {
		st := l.Cluster().Stats()
		leaderMoved(t, l, st)
		g := followerOf(t, st, id)
		// At least the 3 writes it cannot have received (its lag before
		// them may be a progress poll stale, so it is no floor).
		return g.Lag >= 3 && g.LastContact > time.Second, st.String()
	})
}
