package statestore

import (
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/replica/consensus"
	"github.com/keeppeek/statestore/watch"
)

// A node cut off from its leader keeps its state but can no longer tell
// whether that state is current: a watch on it would go quiet while the
// others move on, and its writes and linearizable reads wait two election
// timeouts only to fail. So once it has heard from no leader for
// ClusterOptions.LeaderlessAfter it ends its watches with the close reason
// UNAVAILABLE (their clients re-snapshot on another node) and refuses
// writes, linearizable reads and new watches at once, until a leader is
// heard again. Reads under StaleOK are still served: they never promised
// to be current.

// DefaultLeaderlessAfter is ClusterOptions.LeaderlessAfter's default: ten
// of replica's default election timeouts, so an ordinary election (0.6-0.7 s
// after a leader kill) never closes a watch.
const DefaultLeaderlessAfter = 3 * time.Second

// FieldLeaderlessAfter is the Field of a leaderless node's refusals.
const FieldLeaderlessAfter = "leaderless_after"

// leaderless tracks when this node last heard from a leader.
type leaderless struct {
	bound time.Duration
	// heard is the last time (Unix nanoseconds) a leader was heard: raft's
	// last contact on a follower, the monitor's own tick on a leader (raft
	// steps a leader down once its lease finds no quorum, so while it is
	// leader it has heard from one within LeaderLeaseTimeout).
	heard atomic.Int64
	// since is when this node turned leaderless, 0 while it is not.
	since atomic.Int64
	done  chan struct{}
}

// leaderlessTick is how often the monitor looks: a tenth of the bound,
// within [5 ms, 250 ms], so a watch closes at most a tick after the bound.
func leaderlessTick(bound time.Duration) time.Duration {
	return min(max(bound/10, 5*time.Millisecond), 250*time.Millisecond)
}

// watchLeaderless runs until the store closes: it marks the node
// leaderless once no leader was heard for the bound, closing every watch
// (again on each tick while it lasts, for one registered in the instant it
// turned), and clears the mark once a leader is heard.
func (c *clusterNode) watchLeaderless() {
	l := &c.less
	defer close(l.done)
	t := time.NewTicker(leaderlessTick(l.bound))
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		now := time.Now()
		if c.heardLeader(now) {
			continue
		}
		l.since.CompareAndSwap(0, now.UnixNano())
		if !c.s.shut.Load() {
			c.s.watches.CloseAll(watch.Unavailable)
		}
	}
}

// heardLeader records raft's latest contact with a leader and reports
// whether it is within the bound at now, clearing the leaderless mark if
// so.
func (c *clusterNode) heardLeader(now time.Time) bool {
	l := &c.less
	r := c.node
	if r.State() == consensus.Leader {
		l.heard.Store(now.UnixNano())
	} else if lc := r.LastContact(); lc.UnixNano() > l.heard.Load() {
		l.heard.Store(lc.UnixNano())
	}
	if now.Sub(time.Unix(0, l.heard.Load())) < l.bound {
		l.since.Store(0)
		return true
	}
	return false
}

// refuseLeaderless is the refusal of a write, a linearizable read or a
// new watch on a node that has heard from no leader for its bound, nil
// otherwise.
func (c *clusterNode) refuseLeaderless() error {
	// A leader heard since the monitor's last tick counts at once: a call
	// right after the links heal is served.
	if c.less.since.Load() == 0 || c.heardLeader(time.Now()) {
		return nil
	}
	quiet := time.Since(time.Unix(0, c.less.heard.Load())).Round(time.Millisecond)
	return newErr(Unavailable, FieldLeaderlessAfter, "this node has heard from no leader for %v (bound %v): it serves only stale reads until one is heard", quiet, c.less.bound)
}

// Leaderless reports whether this node had heard from no leader for its
// ClusterOptions.LeaderlessAfter at the monitor's last tick (a tenth of
// the bound, at most 250 ms ago), and so refuses writes, linearizable
// reads and new watches unless a leader was heard since.
func (cl *Cluster) Leaderless() bool { return cl.c.less.since.Load() != 0 }
