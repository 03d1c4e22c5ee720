package statestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/replica/consensus"
)

// A node's raft state for operators (Cluster.Stats). Raft tells a node its
// own term, indexes and contact with the leader, but not how far each
// follower has applied: that lives in raft's replication goroutines and is
// not public. So the leader asks every follower for its progress over the
// store's own peer calls (verbProgress), every progressInterval while it
// leads, and keeps the last answer of each; a write costs nothing more.
// A follower's lag and last contact are therefore as of its last answer,
// at most progressInterval old while it answers, and grow honestly once
// it stops answering.

// verbProgress asks a peer for its applied index and its contact with
// the leader.
const verbProgress = "progress"

// progressInterval is how often the leader asks its followers for their
// progress: one small call per follower per interval, beside raft's own
// heartbeats several times as often.
const progressInterval = 250 * time.Millisecond

// ClusterStats is one node's raft state, as Cluster.Stats reads it.
type ClusterStats struct {
	// NodeID is this node's ID, Leader the leader's ("" when none is known).
	NodeID string
	Leader string
	// State is raft's role of this node: "follower", "candidate",
	// "leader" or "shutdown".
	State string
	// Term is the raft term this node is in.
	Term uint64
	// CommitIndex is the highest raft index this node knows committed
	// (raft learns it from the leader's next message, so right after a
	// snapshot install it may trail AppliedIndex for a heartbeat);
	// AppliedIndex the last its state machine (the store) applied, which
	// rests below CommitIndex when the last entries are raft's own (the
	// no-op each term begins with, a barrier): those never reach the
	// state machine; LastLogIndex the last its log (or its latest
	// snapshot) holds, committed or not.
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	// LastContact is how long ago this node last heard from a leader: zero
	// on the leader, negative when it never has since it started.
	LastContact time.Duration
	// LeaderChanges counts the leaders this node learned of since it
	// started, after knowing none or another (consensus.Node.LeaderChanges).
	LeaderChanges uint64
	// SnapshotsTaken counts the raft snapshots this node wrote of its own
	// state (raft's threshold, Store.Checkpoint, a membership change);
	// SnapshotsInstalled those it replaced its state with, sent by a
	// leader because this node was too far behind. The snapshot a node
	// restores from its own disk while it opens counts as neither.
	SnapshotsTaken     uint64
	SnapshotsInstalled uint64
	// Followers is, on the leader only, every other member of the
	// configuration in its order, with its progress as of its last answer.
	Followers []FollowerStats
}

// FollowerStats is one follower's progress as the leader last heard it.
type FollowerStats struct {
	ID    string
	Voter bool
	// Answered reports whether the follower has ever answered this
	// leader's progress calls; until it has, its indexes are 0, Lag the
	// whole log and LastContact negative.
	Answered bool
	// AppliedIndex is the index the follower's state machine had applied
	// at its last answer, LastLogIndex the last its log held then (what
	// raft's leader calls its match index, once replication agrees).
	AppliedIndex uint64
	LastLogIndex uint64
	// Lag is the replication lag, in entries the follower's log lacks:
	// the leader's LastLogIndex now less the follower's LastLogIndex at
	// its last answer (0 if above). It counts raft's own entries as well,
	// so a caught-up follower's lag is 0 whatever AppliedIndex says.
	Lag uint64
	// LastContact is how long ago the follower last heard from a leader as
	// far as this leader knows: the time since its last answer plus its
	// own silence from the leader then, so it grows as well when the
	// follower answers but raft cannot reach it. It is negative while the
	// follower has not answered, or had heard from no leader when it did.
	LastContact time.Duration
}

// progressAnswer is a peer's answer to verbProgress.
type progressAnswer struct {
	Applied   uint64 `json:"applied"`
	LastIndex uint64 `json:"last_index"`
	Term      uint64 `json:"term"`
	// ContactNs is how long ago the peer last heard from a leader, in
	// nanoseconds: 0 on a leader, negative if never. A duration, not a
	// time, so the two machines' clocks need not agree.
	ContactNs int64     `json:"contact_ns"`
	Err       *fwdError `json:"err,omitempty"`
}

// peerProgress is the leader's record of one follower's last answer.
type peerProgress struct {
	applied  uint64
	last     uint64
	answered time.Time     // when the answer arrived here
	silence  time.Duration // the follower's silence from a leader then, negative for never
}

// progress holds a node's counters and its followers' progress.
type progress struct {
	taken     atomic.Uint64
	installed atomic.Uint64
	// live is set once raft has started here: a snapshot restored before
	// is this node's own, from its disk, not an install.
	live atomic.Bool

	mu    sync.Mutex
	peers map[string]peerProgress
	// kick asks for a round at once: a new leader's records of its
	// followers are as old as its last term's.
	kick chan struct{}
	done chan struct{}
}

// lastContact is how long ago this node heard from a leader: 0 on the
// leader, negative when never.
func lastContact(r consensus.Node, now time.Time) time.Duration {
	if r.State() == consensus.Leader {
		return 0
	}
	lc := r.LastContact()
	if lc.IsZero() {
		return -1
	}
	return max(now.Sub(lc), 0)
}

// kickProgress asks pollProgress for a round now, without waiting.
func (c *clusterNode) kickProgress() {
	select {
	case c.prog.kick <- struct{}{}:
	default:
	}
}

// answerProgress is the peer side of verbProgress.
func (c *clusterNode) answerProgress() progressAnswer {
	r := c.node
	return progressAnswer{Applied: c.fsm.appliedIndex(), LastIndex: r.LastIndex(), Term: r.CurrentTerm(),
		ContactNs: int64(lastContact(r, time.Now()))}
}

// pollProgress runs until the store closes, asking the followers for
// their progress every progressInterval while this node leads, and at
// once when it takes over.
func (c *clusterNode) pollProgress() {
	defer close(c.prog.done)
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.prog.kick:
		}
		if c.node.State() == consensus.Leader {
			c.askProgress()
		}
	}
}

// askProgress asks every other member for its progress in parallel, each
// call bounded by progressInterval so a silent follower delays no round.
func (c *clusterNode) askProgress() {
	members, err := c.node.Members()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), progressInterval)
	defer cancel()
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	body, _ := json.Marshal(&fwdRequest{Verb: verbProgress})
	var wg sync.WaitGroup
	for _, m := range members {
		if m.ID == c.self {
			continue
		}
		c.rpcMu.Lock()
		addr, ok := c.rpcs[m.ID]
		c.rpcMu.Unlock()
		if !ok {
			continue
		}
		wg.Go(func() {
			out, err := c.caller.Call(ctx, addr, body)
			if err != nil {
				return
			}
			var a progressAnswer
			if json.Unmarshal(out, &a) != nil || a.Err != nil {
				return
			}
			now := time.Now()
			c.prog.mu.Lock()
			c.prog.peers[m.ID] = peerProgress{applied: a.Applied, last: a.LastIndex, answered: now, silence: time.Duration(a.ContactNs)}
			c.prog.mu.Unlock()
		})
	}
	wg.Wait()
}

// Stats is this node's raft state now: its role, term, indexes, contact
// with the leader, leader changes and snapshots, and on the leader each
// follower's progress as of its last answer (at most a quarter second old
// while it answers). It reads what raft and the store already keep and
// takes no lock a write takes.
func (cl *Cluster) Stats() ClusterStats {
	c := cl.c
	r := c.node
	now := time.Now()
	st := ClusterStats{
		NodeID: c.self, State: r.State().String(), Term: r.CurrentTerm(),
		CommitIndex: r.CommitIndex(), AppliedIndex: c.fsm.appliedIndex(), LastLogIndex: r.LastIndex(),
		LastContact: lastContact(r, now), LeaderChanges: c.node.LeaderChanges(),
		SnapshotsTaken: c.prog.taken.Load(), SnapshotsInstalled: c.prog.installed.Load(),
	}
	st.Leader, _ = c.node.Leader()
	if r.State() != consensus.Leader {
		return st
	}
	members, err := c.node.Members()
	if err != nil {
		return st
	}
	c.prog.mu.Lock()
	defer c.prog.mu.Unlock()
	for _, m := range members {
		if m.ID == c.self {
			continue
		}
		f := FollowerStats{ID: m.ID, Voter: m.Voter, Lag: st.LastLogIndex, LastContact: -1}
		if p, ok := c.prog.peers[m.ID]; ok {
			f.Answered, f.AppliedIndex, f.LastLogIndex = true, p.applied, p.last
			f.Lag = st.LastLogIndex - min(p.last, st.LastLogIndex)
			if p.silence >= 0 {
				f.LastContact = now.Sub(p.answered) + p.silence
			}
		}
		st.Followers = append(st.Followers, f)
	}
	return st
}

// String is the stats on one line, for logs and test failures.
func (st ClusterStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s term %d commit %d applied %d last %d contact %v leaders %d snapshots %d/%d",
		st.NodeID, st.State, st.Term, st.CommitIndex, st.AppliedIndex, st.LastLogIndex, st.LastContact, st.LeaderChanges,
		st.SnapshotsTaken, st.SnapshotsInstalled)
	for _, f := range st.Followers {
		fmt.Fprintf(&b, "; %s applied %d last %d lag %d contact %v", f.ID, f.AppliedIndex, f.LastLogIndex, f.Lag, f.LastContact)
	}
	return b.String()
}

// verbStats asks the leader for its Stats (Cluster.LeaderStats).
const verbStats = "stats"

// statsAnswer is the leader's answer to verbStats.
type statsAnswer struct {
	Stats *ClusterStats `json:"stats,omitempty"`
	Err   *fwdError     `json:"err,omitempty"`
}

// answerStats is the peer side of verbStats: only the leader knows its
// followers' progress, so another node refuses as not the leader.
func (c *clusterNode) answerStats() statsAnswer {
	if c.node.State() != consensus.Leader {
		return statsAnswer{Err: &fwdError{Code: Unavailable, Field: "leader", Message: c.self + " is not the leader", NotApplied: true}}
	}
	st := (&Cluster{c: c}).Stats()
	return statsAnswer{Stats: &st}
}

// LeaderStats is the leader's Stats, with its followers' progress: this
// node's own on the leader, else asked of the leader over the peer calls
// (one call, within ctx). It is UNAVAILABLE naming the leader when none
// is known or the leader does not answer as one.
func (cl *Cluster) LeaderStats(ctx context.Context) (ClusterStats, error) {
	c := cl.c
	if c.node.State() == consensus.Leader {
		return cl.Stats(), nil
	}
	id, _ := c.node.Leader()
	if id == "" {
		return ClusterStats{}, newErr(Unavailable, "leader", "no leader is known to ask for its followers' progress")
	}
	c.rpcMu.Lock()
	addr, ok := c.rpcs[id]
	c.rpcMu.Unlock()
	if !ok {
		return ClusterStats{}, newErr(Unavailable, "leader", "the leader %q has no known RPC address", id)
	}
	body, _ := json.Marshal(&fwdRequest{Verb: verbStats})
	out, err := c.caller.Call(ctx, addr, body)
	if err != nil {
		return ClusterStats{}, wrapErr(Unavailable, "leader", fmt.Errorf("asking the leader %q for its stats: %w", id, err))
	}
	var a statsAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		return ClusterStats{}, wrapErr(Unavailable, "leader", fmt.Errorf("the leader %q answered stats that do not decode: %w", id, err))
	}
	if a.Err != nil {
		return ClusterStats{}, newErr(a.Err.Code, a.Err.Field, "asking %q for its stats: %s", id, a.Err.Message)
	}
	if a.Stats == nil {
		return ClusterStats{}, newErr(Unavailable, "leader", "the leader %q answered no stats", id)
	}
	return *a.Stats, nil
}
