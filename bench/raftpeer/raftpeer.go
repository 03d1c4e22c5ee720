// Package raftpeer is the floor of the replicated store's engine for the
// statestore qualification benchmarks: three github.com/hashicorp/raft
// nodes in this process over raft's TCP transport on loopback, each with
// github.com/hashicorp/raft-wal as its log and stable store and a state
// machine that does nothing. An operation appends one entry of a given
// size at the leader and returns once raft committed it (a quorum's WALs
// fsynced it, raft-wal syncing every appended batch) and the leader's
// no-op FSM applied it: what the store's cluster costs with no admission,
// no schema, no view and no forwarding.
//
// OpenLog runs the same nodes over another log: Raftlog is the store's own
// (replica/raftlog on its journal), so the two floors, alternated in one
// run, split what the store's log costs from what raft costs.
//
// The raft timeouts are package replica's defaults (300 ms heartbeat and
// election, 150 ms leader lease, 2 ms commit, 64 entries per
// AppendEntries), the transport raft's own defaults.
//
// # Invariants
//
//  1. An Append returns nil only after the leader's raft committed the
//     entry: a quorum stored it in raft-wal, which syncs every batch.
//     Code: Cluster.Append, Open.
//     Tests: TestAppendCommitsOnAQuorum.
//  2. Open returns once one node leads and every node knows it; Append
//     goes to that leader, and to the next one once leadership moved (a
//     refusal as not the leader, or leadership lost mid-commit), within
//     startTimeout; any other failure is returned at once.
//     Code: Open, Cluster.awaitLeader, Cluster.Append.
//     Tests: TestAppendCommitsOnAQuorum, TestOpenRefusesBadSizes,
//     TestAppendFollowsANewLeader.
package raftpeer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/keeppeek/statestore/internal/loopback"
	"github.com/keeppeek/statestore/replica/raftlog"
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameFloor           = "raftwal_cluster_floor"
	NameFloorConcurrent = "raftwal_cluster_floor_concurrent"
	// NameRaftlogFloor is the same floor over replica/raftlog.
	NameRaftlogFloor = "raftlog_cluster_floor"
)

// Log names the log and stable store a floor's nodes keep.
type Log int

// The logs a floor runs on.
const (
	// RaftWAL is hashicorp/raft-wal as log and stable store.
	RaftWAL Log = iota
	// Raftlog is the store's: replica/raftlog's LogStore on a journal,
	// opened as a cluster node opens it (its defaults, and its fdatasync
	// parked only while more than one Append is in flight, as a node
	// parks only while it has more than one write in flight), and its
	// StableStore.
	Raftlog
)

// The raft settings: package replica's defaults, so the floor runs the
// store's election and commit timing.
const (
	heartbeatTimeout   = 300 * time.Millisecond
	electionTimeout    = 300 * time.Millisecond
	leaderLeaseTimeout = 150 * time.Millisecond
	commitTimeout      = 2 * time.Millisecond
	maxAppendEntries   = 64
)

// startTimeout bounds Open's wait for a leader; applyTimeout bounds one
// Append's wait to enqueue.
const (
	startTimeout = 30 * time.Second
	applyTimeout = 10 * time.Second
)

// ErrNoLeader is returned by Open when no node led within its bound.
var ErrNoLeader = errors.New("raftpeer: no leader")

// node is one raft member and what it owns.
type node struct {
	raft      *raft.Raft
	logs      raft.LogStore
	closeLogs func() error // the log's and the stable store's
	trans     *raft.NetworkTransport
}

// Cluster is the three (or n) nodes and the leader Append writes to.
type Cluster struct {
	nodes []*node
	// leader is the node Append writes to: the one that led when the
	// cluster started, or that Append found leading after a refusal.
	leader atomic.Pointer[raft.Raft]
	entry  []byte
	// applied counts the FSM calls on every node, for the tests.
	applied atomic.Int64
	// appending counts the Appends in flight (the raftlog floor's
	// contention signal).
	appending atomic.Int64
}

// fsm applies nothing: the floor measures raft and its log alone.
type fsm struct{ applied *atomic.Int64 }

func (f fsm) Apply(*raft.Log) any {
	f.applied.Add(1)
	return nil
}

func (fsm) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }
func (fsm) Restore(r io.ReadCloser) error       { return r.Close() }

// noSnapshot is the empty state's snapshot.
type noSnapshot struct{}

func (noSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noSnapshot) Release()                             {}

// Open starts n nodes with their WALs in dir/node-i, bootstraps them as
// one cluster, waits for a leader and returns the cluster appending
// entries of entrySize bytes.
func Open(dir string, n, entrySize int) (*Cluster, error) { return OpenLog(dir, n, entrySize, RaftWAL) }

// OpenLog is Open with each node's log and stable store of kind log.
func OpenLog(dir string, n, entrySize int, log Log) (*Cluster, error) {
	if log != RaftWAL && log != Raftlog {
		return nil, fmt.Errorf("raftpeer: unknown log %d", log)
	}
	if n <= 0 || entrySize <= 0 {
		return nil, fmt.Errorf("raftpeer: nodes %d and entrySize %d must be positive", n, entrySize)
	}
	addrs, err := loopback.FreeAddrs(n)
	if err != nil {
		return nil, err
	}
	var conf raft.Configuration
	for i, a := range addrs {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("node-%d", i)), Address: raft.ServerAddress(a)})
	}
	c := &Cluster{entry: make([]byte, entrySize)}
	for i := range c.entry {
		c.entry[i] = byte('a' + i%26)
	}
	for i, a := range addrs {
		nd, err := startNode(filepath.Join(dir, fmt.Sprintf("node-%d", i)), conf.Servers[i].ID, a, conf, fsm{&c.applied}, log,
			func() bool { return c.appending.Load() > 1 })
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.nodes = append(c.nodes, nd)
	}
	leader, err := c.awaitLeader()
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	c.leader.Store(leader)
	return c, nil
}

// openStores opens the log and stable store of kind log in dir;
// contended is raftlog's Options.Contended.
func openStores(dir string, log Log, contended func() bool) (raft.LogStore, raft.StableStore, func() error, error) {
	if log == RaftWAL {
		w, err := wal.Open(dir)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("raft-wal: %w", err)
		}
		return w, w, w.Close, nil
	}
	ls, err := raftlog.Open(filepath.Join(dir, "journal"), raftlog.Options{Contended: contended})
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := raftlog.OpenStable(filepath.Join(dir, "raft-stable"), nil)
	if err != nil {
		return nil, nil, nil, errors.Join(err, ls.Close())
	}
	return ls, st, ls.Close, nil
}

// startNode starts one member on addr with its log of kind log in dir.
func startNode(dir string, id raft.ServerID, addr string, conf raft.Configuration, f raft.FSM, log Log, contended func() bool) (*node, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftpeer: %s: %w", id, err)
	}
	logs, stable, closeLogs, err := openStores(dir, log, contended)
	if err != nil {
		return nil, fmt.Errorf("raftpeer: %s: %w", id, err)
	}
	trans, err := raft.NewTCPTransportWithLogger(addr, nil, 3, 10*time.Second, hclog.NewNullLogger())
	if err != nil {
		closeLogs()
		return nil, fmt.Errorf("raftpeer: %s: transport on %s: %w", id, addr, err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = id
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout = heartbeatTimeout, electionTimeout, leaderLeaseTimeout, commitTimeout
	rc.MaxAppendEntries = maxAppendEntries
	rc.Logger = hclog.NewNullLogger()
	r, err := raft.NewRaft(rc, f, logs, stable, raft.NewDiscardSnapshotStore(), trans)
	if err != nil {
		trans.Close()
		closeLogs()
		return nil, fmt.Errorf("raftpeer: %s: %w", id, err)
	}
	nd := &node{raft: r, logs: logs, closeLogs: closeLogs, trans: trans}
	if err := r.BootstrapCluster(conf).Error(); err != nil {
		return nil, errors.Join(fmt.Errorf("raftpeer: %s: bootstrap: %w", id, err), nd.close())
	}
	return nd, nil
}

// awaitLeader waits, bounded by startTimeout, until one node leads and
// every node names it.
func (c *Cluster) awaitLeader() (*raft.Raft, error) {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		var leader *raft.Raft
		agreed := true
		for _, nd := range c.nodes {
			if nd.raft.State() == raft.Leader {
				leader = nd.raft
			}
			if _, id := nd.raft.LeaderWithID(); id == "" {
				agreed = false
			}
		}
		if leader != nil && agreed {
			// The leader's first entry of its term is committed before
			// it serves: a barrier waits for it.
			if err := leader.Barrier(applyTimeout).Error(); err == nil {
				return leader, nil
			}
		}
		time.Sleep(10 * time.Millisecond) // polling raft's state: bounded by deadline
	}
	return nil, fmt.Errorf("%w among %d nodes within %v", ErrNoLeader, len(c.nodes), startTimeout)
}

// Append appends one entry at the leader and returns once it is committed
// and applied there.
//
// An entry refused because leadership moved (a loaded machine can miss a
// heartbeat) goes to the new leader, as a client of a raft service would
// send it; one whose leadership was lost mid-commit may then be applied
// twice, which costs the floor nothing it measures.
func (c *Cluster) Append() error {
	c.appending.Add(1)
	defer c.appending.Add(-1)
	for deadline := time.Now().Add(startTimeout); ; {
		leader := c.leader.Load()
		err := leader.Apply(c.entry, applyTimeout).Error()
		if err == nil || !(errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost)) || time.Now().After(deadline) {
			return err
		}
		next, aerr := c.awaitLeader()
		if aerr != nil {
			return errors.Join(err, aerr)
		}
		c.leader.CompareAndSwap(leader, next)
	}
}

// CAS is Append, for the benchmark's peer interface: the floor has no
// documents, so key is not used.
func (c *Cluster) CAS(int) error { return c.Append() }

// Applied returns how many entries the nodes' FSMs applied, all nodes
// together.
func (c *Cluster) Applied() int64 { return c.applied.Load() }

// Close shuts every node down and closes its WAL and transport.
func (c *Cluster) Close() error {
	var errs []error
	for _, nd := range c.nodes {
		errs = append(errs, nd.close())
	}
	c.nodes = nil
	return errors.Join(errs...)
}

func (nd *node) close() error {
	err := nd.raft.Shutdown().Error()
	return errors.Join(err, nd.trans.Close(), nd.closeLogs())
}

// Nodes returns the number of nodes the cluster runs.
func (c *Cluster) Nodes() int { return len(c.nodes) }
