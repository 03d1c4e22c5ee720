package replica

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/replica/consensus"
)

// Default timeouts: the measurements (a leader kill stalled writes
// 1.9-2.5 s at raft's defaults and 0.6-0.7 s at 300 ms; a follower applied
// 76 ms after the leader at the default CommitTimeout and 3.6 ms at 2 ms).
const (
	DefaultHeartbeatTimeout   = 300 * time.Millisecond
	DefaultElectionTimeout    = 300 * time.Millisecond
	DefaultLeaderLeaseTimeout = 150 * time.Millisecond
	DefaultCommitTimeout      = 2 * time.Millisecond
	DefaultMaxAppendEntries   = 64
	// DefaultSnapshotRetain is how many raft snapshots the file store keeps.
	DefaultSnapshotRetain = 2
)

// Peer is one member of the initial configuration (consensus.Peer): its
// ID, unique forever, and its raft address.
type Peer = consensus.Peer

// Config configures one node.
type Config struct {
	// NodeID is this node's ID; it must be among Peers.
	NodeID string
	// Addr is the raft address this node listens on (host:port for TCP;
	// any name for an in-memory transport).
	Addr string
	// Peers is the initial configuration, identical on every node: a node
	// with no raft state bootstraps it once.
	Peers []Peer
	// Join starts a node that is not in the initial configuration: it
	// never bootstraps and waits for the leader's AddVoter.
	Join bool
	// TLS, when set, carries the peer traffic over mutual TLS: it must hold
	// this node's certificate and the cluster CA in both RootCAs and
	// ClientCAs.
	TLS *tls.Config

	// Timeouts; zero fields take the defaults above.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	// SnapshotThreshold is how many log entries may follow the last raft
	// snapshot before another is taken; 0 is raft's default.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log, so a
	// follower slightly behind catches up without one; 0 is raft's default.
	TrailingLogs uint64

	// LogStore and StableStore hold the raft log and its terms and votes;
	// nil means one raft.InmemStore for both (nothing survives a
	// restart). replica/raftlog provides the journal-backed ones (the
	// store's default); a LogStore that is a raft.CommitTrackingLogStore
	// turns on the restart replay (restart.go).
	LogStore    raft.LogStore
	StableStore raft.StableStore
	// SnapshotStore holds raft snapshots; nil means a FileSnapshotStore in
	// SnapshotDir keeping DefaultSnapshotRetain, or with no SnapshotDir
	// and the in-memory log, raft.InmemSnapshotStore.
	SnapshotStore raft.SnapshotStore
	SnapshotDir   string
	// Transport is a test hook: an in-memory transport (InmemNetwork);
	// nil means a TCP NetworkTransport on Addr (over TLS when set).
	Transport raft.Transport
}

// withDefaults checks c and fills zero fields in.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID == "" {
		return c, &ConfigError{Field: "NodeID", Reason: "must be set"}
	}
	if c.Addr == "" {
		return c, &ConfigError{Field: "Addr", Reason: "must be set"}
	}
	if len(c.Peers) == 0 {
		return c, &ConfigError{Field: "Peers", Reason: "must list the initial members, this node included"}
	}
	seen := map[string]bool{}
	self := false
	for i, p := range c.Peers {
		switch {
		case p.ID == "" || p.Addr == "":
			return c, &ConfigError{Field: fmt.Sprintf("Peers[%d]", i), Reason: "needs an ID and an Addr"}
		case seen[p.ID]:
			return c, &ConfigError{Field: fmt.Sprintf("Peers[%d]", i), Reason: fmt.Sprintf("the ID %q is listed twice", p.ID)}
		}
		seen[p.ID] = true
		if p.ID == c.NodeID {
			self = true
			if p.Addr != c.Addr {
				return c, &ConfigError{Field: fmt.Sprintf("Peers[%d]", i), Reason: fmt.Sprintf("lists %q at %s, but Addr is %s", p.ID, p.Addr, c.Addr)}
			}
		}
	}
	if !self && !c.Join {
		return c, &ConfigError{Field: "Peers", Reason: fmt.Sprintf("does not list this node (%q)", c.NodeID)}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
		f   string
	}{{&c.HeartbeatTimeout, DefaultHeartbeatTimeout, "HeartbeatTimeout"}, {&c.ElectionTimeout, DefaultElectionTimeout, "ElectionTimeout"},
		{&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout, "LeaderLeaseTimeout"}, {&c.CommitTimeout, DefaultCommitTimeout, "CommitTimeout"}} {
		if *d.v < 0 {
			return c, &ConfigError{Field: d.f, Reason: fmt.Sprintf("%v is negative", *d.v)}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return c, &ConfigError{Field: "LeaderLeaseTimeout", Reason: fmt.Sprintf("%v exceeds HeartbeatTimeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)}
	}
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = DefaultMaxAppendEntries
	}
	if c.SnapshotStore == nil && c.SnapshotDir == "" && c.LogStore != nil {
		return c, &ConfigError{Field: "SnapshotDir", Reason: "must be set when a LogStore but no SnapshotStore is given"}
	}
	return c, nil
}

// ConfigError is a Config that cannot start a node, naming the field
// (consensus.ConfigError).
type ConfigError = consensus.ConfigError

// Node is one started raft node.
type Node struct {
	cfg   Config
	raft  *raft.Raft
	trans raft.Transport
	owned io.Closer // the transport, when Start made it
	// stop ends the goroutine snapshotting after configuration changes
	// (restart.go); wg waits for it.
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	// leaderChanges counts the leaders this node learned of (observe).
	leaderChanges atomic.Uint64
}

// Start starts a node applying to fsm, bootstrapping Peers first when the
// stores hold no raft state (a fresh node: every node of a fresh cluster
// bootstraps the same configuration, which raft accepts once).
func Start(cfg Config, fsm raft.FSM) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg}
	if cfg.LogStore == nil || cfg.StableStore == nil {
		mem := raft.NewInmemStore()
		if cfg.LogStore == nil {
			cfg.LogStore = mem
		}
		if cfg.StableStore == nil {
			cfg.StableStore = mem
		}
	}
	snaps := cfg.SnapshotStore
	if snaps == nil && cfg.SnapshotDir == "" {
		// An in-memory log keeps its snapshots in memory too: a restart
		// must not find snapshots newer than a log it lost.
		snaps = raft.NewInmemSnapshotStore()
	} else if snaps == nil {
		if snaps, err = raft.NewFileSnapshotStore(cfg.SnapshotDir, DefaultSnapshotRetain, io.Discard); err != nil {
			return nil, fmt.Errorf("replica snapshot store in %s: %w", cfg.SnapshotDir, err)
		}
	}
	n.trans = cfg.Transport
	if n.trans == nil {
		nt, err := newNetworkTransport(cfg.Addr, cfg.TLS)
		if err != nil {
			return nil, err
		}
		n.trans, n.owned = nt, nt
	}
	conf := raftConfig(cfg)
	has, err := raft.HasExistingState(cfg.LogStore, cfg.StableStore, snaps)
	if err == nil && !has && !cfg.Join {
		err = raft.BootstrapCluster(conf, cfg.LogStore, cfg.StableStore, snaps, n.trans, configuration(cfg.Peers))
	}
	logs := cfg.LogStore
	var changed chan struct{}
	if track, ok := logs.(raft.CommitTrackingLogStore); ok {
		// The restart replay (restart.go): raft persists its commit
		// index with the log and NewRaft replays to it, capped.
		st := &restart{maxAppend: conf.MaxAppendEntries}
		conf.RestoreCommittedLogs = true
		logs = &startLog{LogStore: logs, track: track, st: st}
		snaps = &startSnapshots{SnapshotStore: snaps, st: st}
		changed = make(chan struct{}, 1)
		fsm = &configFSM{FSM: fsm, st: st, changed: changed}
	}
	if r, ok := cfg.LogStore.(SnapshotRestoreNoter); ok {
		snaps = &restoreNotes{SnapshotStore: snaps, log: r}
	}
	if err == nil {
		n.raft, err = raft.NewRaft(conf, fsm, logs, cfg.StableStore, snaps, n.trans)
	}
	if err != nil {
		n.closeTransport()
		return nil, fmt.Errorf("replica node %s: %w", cfg.NodeID, err)
	}
	n.observe()
	n.stop = make(chan struct{})
	if changed != nil {
		n.wg.Add(1)
		go snapshotAfterChanges(n.raft, changed, n.stop, n.wg.Done)
	}
	return n, nil
}

func raftConfig(cfg Config) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(cfg.NodeID)
	conf.HeartbeatTimeout = cfg.HeartbeatTimeout
	conf.ElectionTimeout = cfg.ElectionTimeout
	conf.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	conf.CommitTimeout = cfg.CommitTimeout
	conf.MaxAppendEntries = cfg.MaxAppendEntries
	if cfg.SnapshotThreshold > 0 {
		conf.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		conf.TrailingLogs = cfg.TrailingLogs
	}
	conf.LogOutput = io.Discard
	return conf
}

func configuration(peers []Peer) raft.Configuration {
	var c raft.Configuration
	for _, p := range peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	return c
}

// observe counts leader changes in a raft observer's filter, which raft
// calls in its own goroutine for every observation: an atomic add there
// costs nothing per write (leader observations come only with elections)
// and, with no channel, nothing can be dropped as a full channel would.
// A leader learned between NewRaft and the registration (raft's goroutines
// already run) is counted by the seed below; one observed meanwhile has
// already counted, so the seed's compare-and-swap finds the count moved.
func (n *Node) observe() {
	n.raft.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
			n.leaderChanges.Add(1)
		}
		return false
	}))
	if _, id := n.raft.LeaderWithID(); id != "" {
		n.leaderChanges.CompareAndSwap(0, 1)
	}
}

// LeaderChanges is how many times this node has learned of a leader since
// it started, after knowing none or another (its own election included):
// a leader re-elected after a vacancy this node saw counts again, one
// re-elected before this node noticed it had gone does not.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// Raft is the node's raft instance, for what Node does not wrap.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID is this node's ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// ElectionTimeout is the election timeout in force: the store waits two of
// them for a leader before it answers UNAVAILABLE.
func (n *Node) ElectionTimeout() time.Duration { return n.cfg.ElectionTimeout }

// Leader returns the current leader's ID and address, "" when none is known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Member is one server of the current configuration (consensus.Member).
type Member = consensus.Member

// Members returns the current configuration.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds (or promotes) a voter; only the leader can.
func (n *Node) AddVoter(id, addr string, timeout time.Duration) error {
	return MapError(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error())
}

// RemoveServer removes a server from the configuration; only the leader can.
func (n *Node) RemoveServer(id string, timeout time.Duration) error {
	return MapError(n.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error())
}

// TransferLeadership hands leadership to id, or to the most caught-up
// follower when id is "".
func (n *Node) TransferLeadership(id string) error {
	if id == "" {
		return MapError(n.raft.LeadershipTransfer().Error())
	}
	for _, m := range mustMembers(n) {
		if m.ID == id {
			return MapError(n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(m.Addr)).Error())
		}
	}
	return fmt.Errorf("replica: no member %q to transfer leadership to", id)
}

func mustMembers(n *Node) []Member {
	m, _ := n.Members()
	return m
}

// Shutdown stops the node and closes a transport Start made.
func (n *Node) Shutdown() error {
	// raft first: a snapshot under way returns ErrRaftShutdown.
	err := n.raft.Shutdown().Error()
	n.stopOnce.Do(func() { close(n.stop) })
	n.wg.Wait()
	return errors.Join(err, n.closeTransport())
}

func (n *Node) closeTransport() error {
	if n.owned == nil {
		return nil
	}
	err := n.owned.Close()
	n.owned = nil
	return err
}

// newNetworkTransport is raft's TCP transport on addr, over mutual TLS
// when tc is set, with pipelined replication (Transport says how its
// pipeline leaves raft's Shutdown free to return).
func newNetworkTransport(addr string, tc *tls.Config) (*Transport, error) {
	conf := transportConfig()
	if tc == nil {
		t, err := raft.NewTCPTransportWithConfig(addr, nil, conf)
		if err != nil {
			return nil, fmt.Errorf("replica transport on %s: %w", addr, err)
		}
		return &Transport{t}, nil
	}
	ln, err := tls.Listen("tcp", addr, tc)
	if err != nil {
		return nil, fmt.Errorf("replica TLS transport on %s: %w", addr, err)
	}
	conf.Stream = &tlsStream{ln: ln, tc: tc}
	return &Transport{raft.NewNetworkTransportWithConfig(conf)}, nil
}

// transportConfig is every Transport's configuration.
func transportConfig() *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{MaxPool: 3, MaxRPCsInFlight: MaxRPCsInFlight, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger()}
}

// NewStreamTransport is raft's network transport over stream, configured
// as the one Start makes on a TCP address (pipelined, as Transport makes
// safe), for a test that routes a node's raft traffic itself
// (internal/clusterkill's dial map): pass it as Config.Transport, and
// close it after the node's Shutdown, which leaves a given transport open.
func NewStreamTransport(stream raft.StreamLayer) *Transport {
	conf := transportConfig()
	conf.Stream = stream
	return &Transport{raft.NewNetworkTransportWithConfig(conf)}
}

// tlsStream is a raft.StreamLayer over mutual TLS.
type tlsStream struct {
	ln net.Listener
	tc *tls.Config
}

func (s *tlsStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tlsStream) Close() error              { return s.ln.Close() }
func (s *tlsStream) Addr() net.Addr            { return s.ln.Addr() }

func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), s.tc)
}

// SnapshotRestoreNoter is a LogStore that wants to know which snapshot
// raft is about to restore. Raft v1.8.0, after installing a leader's
// snapshot on a MonotonicLogStore, deletes the whole log but keeps its own
// last-log index: a log that held entries above the snapshot would then
// take the next entries after that index and leave the ones between the
// snapshot and it in neither (a rejoining follower panicked with "log not
// found"). Told the snapshot's index, the log keeps those entries through
// the deletion instead (raftlog.LogStore.RestoringSnapshot).
type SnapshotRestoreNoter interface {
	RestoringSnapshot(index uint64)
}

// restoreNotes tells log the index of every snapshot raft opens: raft
// opens a snapshot only to restore it (at start, and to install a
// leader's).
type restoreNotes struct {
	raft.SnapshotStore
	log SnapshotRestoreNoter
}

func (r *restoreNotes) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := r.SnapshotStore.Open(id)
	if err == nil {
		r.log.RestoringSnapshot(meta.Index)
	}
	return meta, rc, err
}
