package statestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/replica/consensus"
	"github.com/keeppeek/statestore/watch"
)

// Cluster mode: the same *Store over a raft group, driven through the
// engine-neutral contract of package replica/consensus (package replica is
// the hashicorp/raft engine; this package links none of it). The
// leader admits every write exactly as a single store does, against its
// pending view; one raft entry carries one group-commit batch of journal
// record frames; every node's state machine (fsm.go) checks each record as
// replay does and publishes it to its own view and watches. Followers
// forward writes to the leader and answer once it did (their own reads
// that could miss such a write wait until they applied it), and serve
// linearizable reads through the leader's read index. Only the leader
// expires leases.

// Peer is one member of a cluster's initial configuration.
type Peer struct {
	ID       string // unique forever: a wiped node rejoins under a new ID
	RaftAddr string // its raft address
	RPCAddr  string // its address for forwarded writes and read indexes
}

// ClusterOptions configure OpenCluster.
type ClusterOptions struct {
	// NodeID is this node's ID; it must be among Peers.
	NodeID string
	// RaftAddr and RPCAddr are this node's listening addresses (host:port),
	// as Peers lists them.
	RaftAddr string
	RPCAddr  string
	// Peers is the initial configuration, identical on every node: a node
	// with no raft state bootstraps it once. Every node forwards to the
	// RPC addresses listed here (and those its own AddVoter added), so a
	// member added later should be listed in the Peers of every node that
	// restarts after it joined.
	Peers []Peer
	// Join starts a node that is not in the initial configuration (Peers
	// then lists the members it knows, itself included): it never
	// bootstraps and waits for the leader's Cluster().AddVoter.
	Join bool
	// Engine is the replication engine running this node (required):
	// &replica.Raft{} for hashicorp/raft with a durable log in the
	// store's journal over TCP; its fields carry the engine's own
	// settings (TLS for the peer traffic, overriding log stores, test
	// transports).
	Engine consensus.Engine

	// Timeouts; zero fields take the engine's defaults (replica.Raft:
	// 300 ms heartbeat and election, 150 ms leader lease, 2 ms commit).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many entries may follow the last raft
	// snapshot before another; 0 is raft's default.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a raft snapshot leaves in the log;
	// 0 is raft's default (10,240).
	TrailingLogs uint64
	// LeaderlessAfter is how long a node may hear from no leader before it
	// closes its watches with UNAVAILABLE and refuses writes,
	// linearizable reads and new watches (cluster_leaderless.go); 0 is
	// DefaultLeaderlessAfter, negative is refused.
	LeaderlessAfter time.Duration
}

// Member is one server of a cluster's configuration.
type Member = consensus.Member

// OpenCluster opens the store in opts.Dir/state-store as one node of a
// raft cluster. The *Store serves every call as Open's does, on any node.
// Settings-backed namespaces (Options.Settings) are refused: config.toml
// belongs to one machine. Restore is refused until a replicated restore
// exists; Checkpoint takes a raft snapshot.
func OpenCluster(opts Options, co ClusterOptions) (*Store, error) {
	if opts.Settings != "" {
		return nil, newErr(InvalidArgument, "Settings", "settings-backed namespaces live in one server's config.toml and are refused in cluster mode")
	}
	if co.Engine == nil {
		return nil, newErr(InvalidArgument, "Engine", "a cluster node needs a replication engine (replica.Raft)")
	}
	if co.RPCAddr == "" {
		return nil, newErr(InvalidArgument, "RPCAddr", "a cluster node needs an address for forwarded calls")
	}
	if co.LeaderlessAfter < 0 {
		return nil, newErr(InvalidArgument, "LeaderlessAfter", "%v is negative (0 means %v)", co.LeaderlessAfter, DefaultLeaderlessAfter)
	}
	rpcs := map[string]string{}
	for i, p := range co.Peers {
		if p.RPCAddr == "" {
			return nil, newErr(InvalidArgument, fmt.Sprintf("Peers[%d].RPCAddr", i), "peer %q has no RPC address", p.ID)
		}
		rpcs[p.ID] = p.RPCAddr
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	c := &clusterNode{s: s, rpcs: rpcs, self: co.NodeID, quit: make(chan struct{}), ready: make(chan struct{}), started: make(chan struct{}), done: make(chan struct{})}
	c.less.bound = cmp.Or(co.LeaderlessAfter, DefaultLeaderlessAfter)
	c.prog.peers, c.prog.kick = map[string]peerProgress{}, make(chan struct{}, 1)
	if err := openCluster(s, c, co); err != nil {
		c.shutdown()
		ferr := s.openFailed(err)
		// A refusal of the options (a peer's limits or schemas differ)
		// keeps its code: retrying the same options cannot help.
		if se := (*Error)(nil); errors.As(err, &se) && se.Code == InvalidArgument {
			return nil, err
		}
		return nil, ferr
	}
	return s, nil
}

// openCluster is open for a cluster node: the LOCK, an empty view that
// raft fills (its snapshot, then its log), the pipeline proposing to raft.
func openCluster(s *Store, c *clusterNode, co ClusterOptions) error {
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return err
	}
	lock, err := disk.LockFile(filepath.Join(s.root, "LOCK"))
	if err != nil {
		return err
	}
	s.lock = lock
	// The engine's durable log, in the store's journal directory where
	// the engine keeps it there (replica.Raft's default: one fdatasync per
	// committed batch, the commit index persisted with it).
	logs, err := co.Engine.OpenLog(consensus.LogOptions{
		JournalDir: filepath.Join(s.root, "journal"), StableFile: filepath.Join(s.root, StableFileName),
		SegmentSize: s.opts.SegmentSize, NoSync: s.opts.NoSync, NoPrewrite: s.opts.NoPrewrite,
		DirectSync: s.opts.DirectSync, Faults: s.opts.Faults,
		// A node with at most one write in flight has nobody for a
		// parked fdatasync to leave its processor to.
		Contended: func() bool { return c.writing.Load() > 1 },
	})
	if logs != nil {
		c.logs, s.jnl = logs, logs.Journal()
	}
	if err != nil {
		var ce *consensus.ConfigError
		if errors.As(err, &ce) {
			return &Error{Code: InvalidArgument, Field: ce.Field, Message: ce.Reason, Err: err}
		}
		return err
	}
	if cut := logs.TailCut(); cut != nil {
		s.openReport.TailCut = cut
		s.log.Warn("state store: " + cut.String())
	}
	if s.jnl == nil {
		// The store's own journal stays empty with a log kept elsewhere;
		// it is open so the journal's statistics and Close behave as in
		// a single store.
		if s.jnl, _, err = journal.Open(filepath.Join(s.root, "journal"), journal.Options{
			Limits: s.chk.JournalLimits(), NoPrewrite: true, ReserveBytes: -1, NoSync: s.opts.NoSync, Faults: s.opts.Faults,
		}); err != nil {
			return err
		}
	}
	c.fsm = &fsm{s: s, changed: make(chan struct{})}
	c.log = &raftLog{c: c, futures: map[uint64]consensus.Future{}, outcomes: map[uint64]error{}}
	s.cluster = c
	assemble(s, &recovery.State{View: materialize.New()}, c)
	s.watches = watch.NewRegistry(watch.LimitsFrom(s.limits), s.clock)
	s.home.watches = s.watches

	cfg := consensus.Config{NodeID: co.NodeID, Addr: co.RaftAddr, Join: co.Join,
		HeartbeatTimeout: co.HeartbeatTimeout, ElectionTimeout: co.ElectionTimeout, LeaderLeaseTimeout: co.LeaderLeaseTimeout,
		CommitTimeout: co.CommitTimeout, SnapshotThreshold: co.SnapshotThreshold, TrailingLogs: co.TrailingLogs,
		SnapshotDir: filepath.Join(s.root, "raft-snapshots")}
	for _, p := range co.Peers {
		if !co.Join || p.ID != co.NodeID {
			cfg.Peers = append(cfg.Peers, consensus.Peer{ID: p.ID, Addr: p.RaftAddr})
		}
	}
	if co.Join {
		cfg.Peers = append(cfg.Peers, consensus.Peer{ID: co.NodeID, Addr: co.RaftAddr})
	}
	rpc, err := co.Engine.ServeRPC(co.RPCAddr, c.handle)
	if err != nil {
		return err
	}
	c.caller = rpc
	c.unregister = func() { _ = rpc.Close() }
	// Limits and schemas agree with every peer that answers, before this
	// node takes part in raft (cluster_agree.go).
	if err := c.agreeWithPeers(2 * co.Engine.ElectionTimeout(co.ElectionTimeout)); err != nil {
		return err
	}
	if c.node, err = co.Engine.Start(cfg, logs, c.fsm); err != nil {
		var ce *consensus.ConfigError
		if errors.As(err, &ce) {
			return wrapErr(InvalidArgument, ce.Field, err)
		}
		return err
	}
	c.wait = 2 * c.node.ElectionTimeout()
	c.prog.live.Store(true)
	close(c.started)
	s.pipe.start()
	go s.leases.run()
	go c.leaderLoop()
	go c.awaitReady()
	c.less.heard.Store(time.Now().UnixNano())
	c.less.done = make(chan struct{})
	go c.watchLeaderless()
	c.prog.done = make(chan struct{})
	go c.pollProgress()
	return nil
}

// StableFileName is the file, in Dir/state-store, holding a cluster node's
// raft term and vote (consensus.LogOptions.StableFile; replica.Raft keeps
// raftlog's StableStore there).
const StableFileName = "raft-stable"

// closeLog closes the durable log, once raft has stopped, handing it the
// applied index (every applied entry is committed), so the next open
// replays every entry this node applied, the last batch's included,
// before any leader is known.
func (c *clusterNode) closeLog() error {
	return c.logs.Close(c.fsm.appliedIndex())
}

// clusterNode is a store's side of its raft node.
type clusterNode struct {
	s          *Store
	node       consensus.Node
	fsm        *fsm
	log        *raftLog
	logs       consensus.Log // the engine's log; its Journal is nil when kept elsewhere
	self       string
	rpcMu      sync.Mutex
	rpcs       map[string]string // node ID -> RPC address
	caller     consensus.Caller
	unregister func()
	wait       time.Duration // how long a call waits for a leader: two election timeouts

	// leading is set once this node leads and its term's Barrier has
	// applied everything before it and its pending view was rebuilt; term
	// is that term.
	leading atomic.Bool
	term    atomic.Uint64
	// acked is the highest leader's applied index that a forwarded write
	// this node answered carried: this node's operator views (Namespace,
	// Usage) and stale reads wait until it applied that much (caughtUp),
	// so a caller reads its own write here without the write's answer
	// waiting for this node's apply.
	acked atomic.Uint64
	// lastStamp is the latest time a batch was stamped with here.
	lastStamp atomic.Int64
	// writing counts the writes in flight on this node (write's calls:
	// local, forwarded here, forwarded from here), for the raft log's
	// choice between parking its fdatasync and holding a processor.
	writing atomic.Int64
	// less is when a leader was last heard (cluster_leaderless.go).
	less leaderless
	// prog is the node's snapshot counters and, on the leader, its
	// followers' progress (cluster_stats.go).
	prog progress

	quit  chan struct{}
	done  chan struct{}
	ready chan struct{}
	// started is closed once raft runs here (node and wait are set):
	// forwarded calls that arrive before are refused as not applied.
	started  chan struct{}
	stopOnce sync.Once
}

// leaderReady reports whether this node may admit writes now.
func (c *clusterNode) leaderReady() bool {
	return c.leading.Load() && c.node.State() == consensus.Leader && c.node.CurrentTerm() == c.term.Load()
}

// leaderLoop follows leadership: on gaining it, it waits for the term's
// Barrier (so the state machine holds every committed entry), rebuilds
// the pipeline's pending view from the applied state, purges the leases
// that lapsed meanwhile, and only then admits writes.
func (c *clusterNode) leaderLoop() {
	defer close(c.done)
	r := c.node
	for {
		select {
		case <-c.quit:
			return
		case leader := <-r.LeaderCh():
			c.leading.Store(false)
			if !leader {
				continue
			}
			if !c.takeOver() {
				return
			}
		}
	}
}

// takeOver makes this new leader ready to admit: its Barrier, the pending
// view rebuilt, the overdue leases purged. A step that fails while this
// node still leads the same term (an enqueue timeout under load) is tried
// again, since raft signals leadership once per term. It returns false
// once the store closes.
func (c *clusterNode) takeOver() bool {
	r := c.node
	term := r.CurrentTerm()
	for r.State() == consensus.Leader && r.CurrentTerm() == term {
		select {
		case <-c.quit:
			return false
		default:
		}
		if err := r.Barrier(c.wait); err != nil {
			continue
		}
		// Nothing is admitted while leading is false; exclusive waits for
		// what an earlier term left in flight and rebuilds pending.
		if err := c.s.pipe.exclusive(func() error { return nil }); err != nil {
			return false
		}
		// Overdue leases first, as Open does, before any write.
		if _, err := c.s.pipe.submit(&op{kind: opExpire}); err != nil {
			if c.s.pipe.isClosed() {
				return false
			}
			continue
		}
		c.term.Store(term)
		c.leading.Store(true)
		c.s.leases.poke()
		c.kickProgress()
		return true
	}
	return true
}

// awaitReady closes ready once a leader is known and this node's state has
// caught up with the leader's read index.
func (c *clusterNode) awaitReady() {
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := c.linearize(ctx)
		cancel()
		if err == nil {
			close(c.ready)
			return
		}
		// A leaderless node refuses at once: wait before asking again.
		if c.pause(context.Background()) != nil {
			return
		}
	}
}

// stamp is the leader's time for the next batch: its clock, never below
// the time of the last applied record or of an earlier batch.
func (c *clusterNode) stamp() int64 {
	now := c.s.clock.Now().UnixMilli()
	for {
		last := max(c.lastStamp.Load(), c.fsm.lastTime())
		if now < last {
			now = last
		}
		if cur := c.lastStamp.Load(); cur <= now && c.lastStamp.CompareAndSwap(cur, now) {
			return now
		}
	}
}

// errNotApplied marks an answer given for a batch raft never applied
// (this node was not the leader, or the entry was refused): the call may
// be retried, at the leader.
var errNotApplied = errors.New("not applied")

// retryable reports whether err says the op was applied nowhere.
func retryable(err error) bool { return errors.Is(err, errNotApplied) }

func notApplied(format string, args ...any) *Error {
	return &Error{Code: Unavailable, Field: "leader", Message: "not applied: " + fmt.Sprintf(format, args...), Err: errNotApplied}
}

// noLeader is UNAVAILABLE after two election timeouts without a leader
// able to take the call.
func (c *clusterNode) noLeader(what string) error {
	id, _ := c.node.Leader()
	if id == "" {
		return newErr(Unavailable, "leader", "no leader within %v for %s (none known)", c.wait, what)
	}
	return newErr(Unavailable, "leader", "no leader within %v for %s (last known leader %q)", c.wait, what, id)
}

// retryPause is how long a call waits before it looks for the leader
// again.
const retryPause = 10 * time.Millisecond

// pause waits retryPause, or returns ctx's error.
func (c *clusterNode) pause(ctx context.Context) error {
	t := time.NewTimer(retryPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return wrapErr(Unavailable, "context", ctx.Err())
	case <-c.quit:
		return c.s.errClosed()
	case <-t.C:
		return nil
	}
}

type forwardedKey struct{}

// isForwarded reports whether ctx is a call a follower forwarded here:
// it is served here or not at all, never forwarded again.
func isForwarded(ctx context.Context) bool { return ctx.Value(forwardedKey{}) != nil }

// write runs a mutation: local at the leader; forwarded otherwise, and
// then answered once this node has applied it. A call nobody could take
// for two election timeouts is UNAVAILABLE naming the leader if known.
//
// A call forwarded here is tried here once and answered not applied if
// this node cannot take it: the forwarder retries wherever the leader is
// now. Waiting here instead held the call (and its writer) for the whole
// wait when leadership moved on while it was in flight, since this node
// would never lead again that term. Only a node that raft already made
// leader, and that is still taking over, keeps it until it is ready.
func (c *clusterNode) write(ctx context.Context, local func() (Entry, error), req *fwdRequest) (Entry, error) {
	c.writing.Add(1)
	defer c.writing.Add(-1)
	deadline := time.Now().Add(c.wait)
	forwarded := isForwarded(ctx)
	for {
		if err := c.refuseLeaderless(); err != nil {
			return Entry{}, err
		}
		if c.leaderReady() {
			e, err := local()
			if !retryable(err) || forwarded {
				return e, err
			}
		} else if forwarded {
			if c.node.State() != consensus.Leader {
				return Entry{}, notApplied("%s is not the leader", c.self)
			}
		} else if id, _ := c.node.Leader(); id != "" && id != c.self {
			resp, sent, err := c.forward(ctx, id, req)
			switch {
			case err != nil && sent:
				return Entry{}, err
			case err == nil && !retryable(resp.err()):
				// The answer does not wait for this node to apply the
				// write: its reads that could miss it wait instead. A
				// linearizable read (Get, Watch) asks the leader's read
				// index, which covers it; Namespace, Usage and stale
				// reads wait for acked (caughtUp). An EXPIRE waits here:
				// the expiring Get re-reads this node's state at once.
				if req.Verb == verbExpire {
					if werr := c.waitApplied(ctx, resp.Index); werr != nil && resp.Err == nil {
						return Entry{}, werr
					}
				} else {
					c.noteAcked(resp.Index)
				}
				return resp.entry(), resp.err()
			}
		}
		if time.Now().After(deadline) {
			if forwarded {
				return Entry{}, notApplied("%s did not finish taking over within %v", c.self, c.wait)
			}
			return Entry{}, c.noLeader(req.Verb)
		}
		if err := c.pause(ctx); err != nil {
			return Entry{}, err
		}
	}
}

// expire commits the EXPIRE of every lease due at the leader's clock.
func (c *clusterNode) expire() error {
	_, err := c.write(context.Background(), func() (Entry, error) { return c.s.home.pipe.submit(&op{kind: opExpire}) }, &fwdRequest{Verb: verbExpire})
	return err
}

// expireIfLeader is the expiry loop's commit: only the leader expires.
// Elsewhere it answers a STORAGE-coded refusal, which makes the loop try
// again later (a follower whose leader does not expire a lease it sees due
// keeps serving it, as the leader's clock rules).
func (c *clusterNode) expireIfLeader() error {
	if c.s.shut.Load() {
		return c.s.errClosed()
	}
	if !c.leaderReady() {
		return newErr(Storage, "leader", "only the leader expires leases")
	}
	_, err := c.s.home.pipe.submit(&op{kind: opExpire})
	return err
}

// linearize returns once this node's state holds every write acknowledged
// before the call (the leader's read index).
func (c *clusterNode) linearize(ctx context.Context) error {
	deadline := time.Now().Add(c.wait)
	for {
		if err := c.refuseLeaderless(); err != nil {
			return err
		}
		if c.leaderReady() {
			if idx, err := c.localReadIndex(); err == nil {
				return c.waitApplied(ctx, idx)
			}
		} else if id, _ := c.node.Leader(); id != "" && id != c.self && !isForwarded(ctx) {
			resp, _, err := c.forward(ctx, id, &fwdRequest{Verb: verbReadIndex})
			if err == nil && resp.Err == nil {
				return c.waitApplied(ctx, resp.Index)
			}
		}
		if time.Now().After(deadline) {
			return c.noLeader("a linearizable read")
		}
		if err := c.pause(ctx); err != nil {
			return err
		}
	}
}

// localReadIndex is the leader's read index: the state it has applied
// (everything it acknowledged, and by its Barrier everything earlier
// leaders did), once VerifyLeader confirms no newer leader existed.
func (c *clusterNode) localReadIndex() (uint64, error) {
	term := c.term.Load()
	idx := c.fsm.appliedIndex()
	if err := c.node.VerifyLeader(); err != nil {
		return 0, notApplied("leadership not verified: %v", err)
	}
	if !c.leaderReady() || c.node.CurrentTerm() != term {
		return 0, notApplied("leadership changed during the read")
	}
	return idx, nil
}

// noteAcked raises acked to idx.
func (c *clusterNode) noteAcked(idx uint64) {
	for {
		cur := c.acked.Load()
		if idx <= cur || c.acked.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// caughtUp waits, at most the leader wait, until this node has applied
// every forwarded write it answered (acked). It does not fail: the views
// it guards answer from what this node holds either way, and only a node
// cut off from its leader for that long can reach the bound.
func (c *clusterNode) caughtUp() {
	if idx := c.acked.Load(); idx > c.fsm.appliedIndex() {
		_ = c.waitApplied(context.Background(), idx)
	}
}

// waitApplied waits until this node's state machine has applied idx.
func (c *clusterNode) waitApplied(ctx context.Context, idx uint64) error {
	t := time.NewTimer(c.wait)
	defer t.Stop()
	for {
		applied, ch := c.fsm.progress()
		if applied >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return wrapErr(Unavailable, "context", ctx.Err())
		case <-c.quit:
			return c.s.errClosed()
		case <-t.C:
			return newErr(Unavailable, "applied_index", "this node applied index %d, not %d, within %v", applied, idx, c.wait)
		}
	}
}

// shutdown stops raft and the node's goroutines; safe on a node that
// did not finish starting.
func (c *clusterNode) shutdown() error {
	var err error
	c.stopOnce.Do(func() {
		if c.node != nil && c.leaderReady() {
			// Hand leadership on first: a transfer stalls writes for
			// milliseconds where an election takes two timeouts.
			c.leading.Store(false)
			_ = c.node.TransferLeadership("")
		}
		close(c.quit)
		if c.less.done != nil {
			<-c.less.done
		}
		if c.prog.done != nil {
			<-c.prog.done
		}
		if c.node != nil {
			err = c.node.Shutdown()
			<-c.done
		}
		if c.unregister != nil {
			c.unregister()
		}
	})
	return err
}

// Cluster is a store's cluster membership and leadership, for a store
// opened with OpenCluster.
type Cluster struct{ c *clusterNode }

// Cluster returns the store's cluster, nil for a store opened with Open.
func (s *Store) Cluster() *Cluster {
	if s.cluster == nil {
		return nil
	}
	return &Cluster{c: s.cluster}
}

// Leader returns the leader's ID and raft address, "" when none is known.
func (cl *Cluster) Leader() (id, addr string) { return cl.c.node.Leader() }

// IsLeader reports whether this node leads and admits writes.
func (cl *Cluster) IsLeader() bool { return cl.c.leaderReady() }

// NodeID is this node's ID.
func (cl *Cluster) NodeID() string { return cl.c.self }

// AppliedIndex is the raft index of the last entry this node's state
// machine applied.
func (cl *Cluster) AppliedIndex() uint64 { return cl.c.fsm.appliedIndex() }

// Members returns the current configuration.
func (cl *Cluster) Members() ([]Member, error) { return cl.c.node.Members() }

// AddVoter adds a voter (at the leader). Its RPC address is known to this
// node from here on; the other nodes learn it from their own Peers.
func (cl *Cluster) AddVoter(p Peer) error {
	if p.ID == "" || p.RaftAddr == "" || p.RPCAddr == "" {
		return newErr(InvalidArgument, "peer", "a voter needs an ID, a raft address and an RPC address")
	}
	if err := cl.c.agreeWithJoiner(p.ID, p.RPCAddr); err != nil {
		return err
	}
	if err := cl.c.node.AddVoter(p.ID, p.RaftAddr, cl.c.wait); err != nil {
		return wrapErr(Unavailable, "leader", err)
	}
	cl.c.rpcMu.Lock()
	cl.c.rpcs[p.ID] = p.RPCAddr
	cl.c.rpcMu.Unlock()
	return nil
}

// RemoveServer removes a server from the configuration (at the leader).
func (cl *Cluster) RemoveServer(id string) error {
	if err := cl.c.node.RemoveServer(id, cl.c.wait); err != nil {
		return wrapErr(Unavailable, "leader", err)
	}
	return nil
}

// TransferLeadership hands leadership to id ("" : the most caught-up
// follower). Only the leader can.
func (cl *Cluster) TransferLeadership(id string) error {
	if err := cl.c.node.TransferLeadership(id); err != nil {
		return wrapErr(Unavailable, "leader", err)
	}
	return nil
}

// Ready is closed once a leader is known and this node's state has caught
// up with the leader's read index.
func (cl *Cluster) Ready() <-chan struct{} { return cl.c.ready }

type staleKey struct{}

// StaleOK returns a context under which Get serves this node's applied
// state without asking the leader for its read index: faster, and possibly
// behind writes acknowledged elsewhere. It is served on a leaderless node
// too, where every other read is refused.
func StaleOK(ctx context.Context) context.Context { return context.WithValue(ctx, staleKey{}, true) }

func isStale(ctx context.Context) bool { return ctx.Value(staleKey{}) != nil }
