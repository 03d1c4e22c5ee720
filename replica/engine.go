package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/replica/consensus"
	"github.com/keeppeek/statestore/replica/raftlog"
)

// Raft is hashicorp/raft as the store's replication engine
// (consensus.Engine): what statestore.ClusterOptions.Engine takes for a
// node. The zero value is the production node: its raft log in the
// store's journal (raftlog.LogStore), its votes in the stable file
// (raftlog.StableStore), its snapshots in a FileSnapshotStore, raft and
// the peer calls over TCP. The fields override one part each.
type Raft struct {
	// TLS, when set, carries raft and forwarded traffic over mutual TLS:
	// it must hold this node's certificate and the cluster CA in both
	// RootCAs and ClientCAs. Without it the peer ports trust their
	// network: a forwarded call names its principal (the server's own
	// included), so anyone who reaches the RPC address can write as
	// anyone. Use it wherever the peers are not on loopback.
	TLS *tls.Config
	// LogStore and StableStore override the raft log and its votes, both
	// or neither (tests give raft.InmemStore, which keeps nothing across
	// a restart). SnapshotStore nil means raft's FileSnapshotStore in
	// the store's snapshot directory whenever the log is not
	// raft.InmemStore, in memory otherwise (a restart must not find
	// snapshots newer than a log it lost).
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
	// Transport is a test hook: an in-memory raft transport
	// (InmemNetwork) or one over a stream of the test's
	// (NewStreamTransport). nil means TCP on the node's raft address.
	Transport raft.Transport
	// Loopback is a test hook: forwarded calls go through it in process,
	// and no RPC listener is opened. nil means TCP on the RPC address.
	Loopback *Loopback
}

var _ consensus.Engine = (*Raft)(nil)

// nodeLog is a node's raft log and votes, as OpenLog opened them.
type nodeLog struct {
	logs    raft.LogStore
	stable  raft.StableStore
	durable *raftlog.LogStore // the journal-backed log, nil when overridden
}

// Journal is the journal holding the raft log, nil when overridden.
func (l *nodeLog) Journal() *journal.Journal {
	if l.durable == nil {
		return nil
	}
	return l.durable.Journal()
}

// TailCut is what opening the journal cut off, nil when overridden.
func (l *nodeLog) TailCut() *journal.TailCut {
	if l.durable == nil {
		return nil
	}
	return l.durable.TailCut()
}

// Close stages applied as the commit index (every applied entry is
// committed), so the next open replays every entry this node applied
// before any leader is known, then closes the journal-backed log.
func (l *nodeLog) Close(applied uint64) error {
	if l.durable == nil {
		return nil
	}
	_ = l.durable.StageCommitIndex(applied)
	return l.durable.Close()
}

// OpenLog opens raftlog's LogStore in opts.JournalDir and its
// StableStore in opts.StableFile, unless LogStore and StableStore are
// given.
func (e *Raft) OpenLog(opts consensus.LogOptions) (consensus.Log, error) {
	switch {
	case e.LogStore == nil && e.StableStore == nil:
	case e.LogStore == nil || e.StableStore == nil:
		return nil, &consensus.ConfigError{Field: "LogStore", Reason: "LogStore and StableStore override the durable pair together: set both or neither"}
	default:
		return &nodeLog{logs: e.LogStore, stable: e.StableStore}, nil
	}
	// One durable log per node: the store's journal holds raft's
	// entries, so the journal's statistics and Close behave as in a
	// single store, and a committed batch costs this node one fdatasync,
	// the log's.
	ls, err := raftlog.Open(opts.JournalDir, raftlog.Options{
		SegmentSize: opts.SegmentSize, NoSync: opts.NoSync, NoPrewrite: opts.NoPrewrite,
		DirectSync: opts.DirectSync, Faults: opts.Faults, Contended: opts.Contended,
	})
	if err != nil {
		return nil, err
	}
	stable, err := raftlog.OpenStable(opts.StableFile, opts.Faults)
	if err != nil {
		// The store closes its journal on a failed open.
		return &nodeLog{durable: ls}, err
	}
	return &nodeLog{logs: ls, stable: stable, durable: ls}, nil
}

// Start starts a raft node (Start) over log, which OpenLog returned.
func (e *Raft) Start(cfg consensus.Config, log consensus.Log, fsm consensus.FSM) (consensus.Node, error) {
	nl, ok := log.(*nodeLog)
	if !ok {
		return nil, fmt.Errorf("replica: the log %T was not opened by replica.Raft", log)
	}
	rc := Config{NodeID: cfg.NodeID, Addr: cfg.Addr, Peers: cfg.Peers, Join: cfg.Join, TLS: e.TLS,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderLeaseTimeout: cfg.LeaderLeaseTimeout,
		CommitTimeout: cfg.CommitTimeout, SnapshotThreshold: cfg.SnapshotThreshold, TrailingLogs: cfg.TrailingLogs,
		LogStore: nl.logs, StableStore: nl.stable, SnapshotStore: e.SnapshotStore, Transport: e.Transport}
	if _, mem := rc.LogStore.(*raft.InmemStore); rc.SnapshotStore == nil && !mem {
		rc.SnapshotDir = cfg.SnapshotDir
	}
	n, err := Start(rc, FSM(fsm))
	if err != nil {
		// A nil *Node must not become a non-nil consensus.Node.
		return nil, err
	}
	return n, nil
}

// ElectionTimeout is configured, or DefaultElectionTimeout for 0.
func (e *Raft) ElectionTimeout(configured time.Duration) time.Duration {
	if configured == 0 {
		return DefaultElectionTimeout
	}
	return configured
}

// ServeRPC registers h on the Loopback when there is one, else serves it
// on addr over TCP (mutual TLS when TLS is set) with a TCPCaller for the
// calls out.
func (e *Raft) ServeRPC(addr string, h consensus.Handler) (consensus.RPC, error) {
	if e.Loopback != nil {
		e.Loopback.Register(addr, h)
		return &loopbackRPC{lb: e.Loopback, addr: addr}, nil
	}
	srv, err := ServeRPC(addr, e.TLS, h)
	if err != nil {
		return nil, err
	}
	return &tcpRPC{TCPCaller: &TCPCaller{TLS: e.TLS}, srv: srv}, nil
}

// loopbackRPC is a node's handler registered on a Loopback.
type loopbackRPC struct {
	lb   *Loopback
	addr string
}

func (l *loopbackRPC) Call(ctx context.Context, addr string, req []byte) ([]byte, error) {
	return l.lb.Call(ctx, addr, req)
}

// Close unregisters the node's handler.
func (l *loopbackRPC) Close() error {
	l.lb.Register(l.addr, nil)
	return nil
}

// tcpRPC is a node's RPCServer and TCPCaller.
type tcpRPC struct {
	*TCPCaller
	srv *RPCServer
}

// Close stops serving and closes the kept connections.
func (t *tcpRPC) Close() error { return errors.Join(t.srv.Close(), t.TCPCaller.Close()) }

// Recover is raft's documented recovery for a lost quorum
// (raft.RecoverCluster) on a stopped node: its log, votes and snapshots
// (raftlog's, and a FileSnapshotStore in cfg.SnapshotDir) with fsm, and
// cfg.Peers as the only configuration: every entry the node holds is
// applied, a snapshot of the result is written carrying the peers, and the
// log is emptied.
func (e *Raft) Recover(cfg consensus.RecoverConfig, fsm consensus.FSM) error {
	if len(cfg.Peers) == 0 {
		return &consensus.ConfigError{Field: "Peers", Reason: "a recovered cluster needs at least one voter"}
	}
	logs, err := raftlog.Open(cfg.Log.JournalDir, raftlog.Options{SegmentSize: cfg.Log.SegmentSize, NoSync: cfg.Log.NoSync})
	if err != nil {
		return &consensus.FileError{File: "journal", Err: err}
	}
	stable, err := raftlog.OpenStable(cfg.Log.StableFile, cfg.Log.Faults)
	if err != nil {
		logs.Close()
		return &consensus.FileError{File: filepath.Base(cfg.Log.StableFile), Err: err}
	}
	snaps, err := raft.NewFileSnapshotStore(cfg.SnapshotDir, DefaultSnapshotRetain, io.Discard)
	if err != nil {
		logs.Close()
		return &consensus.FileError{File: filepath.Base(cfg.SnapshotDir), Err: err}
	}
	conf := raft.DefaultConfig()
	// RecoverCluster only validates the config, which needs some ID; the
	// node's own is not recorded in its directory, and the new
	// configuration is all that the recovered log carries.
	conf.LocalID = raft.ServerID(cfg.Peers[0].ID)
	conf.Logger = nil
	conf.LogOutput = io.Discard
	_, trans := raft.NewInmemTransport("")
	rerr := raft.RecoverCluster(conf, FSM(fsm), logs, stable, snaps, trans, configuration(cfg.Peers))
	if err := logs.Close(); rerr == nil && err != nil {
		rerr = err
	}
	return rerr
}

// EntryOf is a raft log entry as the store's state machine takes it: a
// raft.LogCommand is a consensus.EntryCommand, any other type
// consensus.EntryOther.
func EntryOf(l *raft.Log) *consensus.Entry {
	t := consensus.EntryOther
	if l.Type == raft.LogCommand {
		t = consensus.EntryCommand
	}
	return &consensus.Entry{Index: l.Index, Term: l.Term, Type: t, Data: l.Data}
}

// FSM is f as raft's state machine.
func FSM(f consensus.FSM) raft.FSM { return raftFSM{f} }

type raftFSM struct{ f consensus.FSM }

func (r raftFSM) Apply(l *raft.Log) any { return r.f.Apply(EntryOf(l)) }

func (r raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := r.f.Snapshot()
	if err != nil {
		return nil, err
	}
	return raftSnapshot{sn}, nil
}

func (r raftFSM) Restore(rc io.ReadCloser) error { return r.f.Restore(rc) }

// raftSnapshot is a consensus.Snapshot persisted to a raft sink.
type raftSnapshot struct{ sn consensus.Snapshot }

func (r raftSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := r.sn.Persist(sink); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if n, ok := r.sn.(consensus.PersistNoter); ok {
		n.Persisted()
	}
	return nil
}

func (r raftSnapshot) Release() { r.sn.Release() }

// MapError marks raft's errors with the outcome the store tells apart
// (consensus.Mark): not applied anywhere (not the leader, an enqueue
// timeout, a leadership transfer under way, aborted by a restore), the
// outcome unknown (leadership lost, shut down), and nothing new to
// snapshot. Any other error, and nil, is returned as is.
func MapError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return consensus.Mark(consensus.ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return consensus.Mark(consensus.ErrOutcomeUnknown, err)
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		return consensus.Mark(consensus.ErrNothingNewToSnapshot, err)
	}
	return err
}

// applyFuture is a raft.ApplyFuture with its error mapped (MapError).
type applyFuture struct{ f raft.ApplyFuture }

func (a applyFuture) Error() error  { return MapError(a.f.Error()) }
func (a applyFuture) Index() uint64 { return a.f.Index() }
func (a applyFuture) Response() any { return a.f.Response() }

var _ consensus.Node = (*Node)(nil)

// State is raft's role of this node.
func (n *Node) State() consensus.State {
	switch n.raft.State() {
	case raft.Follower:
		return consensus.Follower
	case raft.Candidate:
		return consensus.Candidate
	case raft.Leader:
		return consensus.Leader
	}
	return consensus.Shutdown
}

// CurrentTerm is raft's current term.
func (n *Node) CurrentTerm() uint64 { return n.raft.CurrentTerm() }

// LastIndex is the last index of raft's log or latest snapshot.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// CommitIndex is raft's commit index.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// LastContact is when raft last heard from a leader.
func (n *Node) LastContact() time.Time { return n.raft.LastContact() }

// LeaderCh is raft's leadership notifications.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// Apply proposes data as one raft entry.
func (n *Node) Apply(data []byte, timeout time.Duration) consensus.Future {
	return applyFuture{n.raft.Apply(data, timeout)}
}

// Barrier is raft's Barrier, waited for.
func (n *Node) Barrier(timeout time.Duration) error { return MapError(n.raft.Barrier(timeout).Error()) }

// VerifyLeader is raft's VerifyLeader, waited for.
func (n *Node) VerifyLeader() error { return MapError(n.raft.VerifyLeader().Error()) }

// Snapshot takes a raft snapshot now, waited for.
func (n *Node) Snapshot() error { return MapError(n.raft.Snapshot().Error()) }
