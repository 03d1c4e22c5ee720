package statestore_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
)

// The store's own contract and scenario tests run against a 3-node
// cluster in one process too (issue 27's "must show"): against its leader
// and against a follower, on the in-memory transport and one fake clock,
// as replica's package documentation describes. A home here is one node
// of such a cluster; its fixture's s is that node, so every call the test
// makes goes through the node's admission, forwarding, read index and
// watches exactly as an embedder's would.

// clusterHomes are the cluster's two homes of a journal-backed namespace.
var clusterHomes = []home{
	{name: "cluster-leader", cluster: true, open: func(t *testing.T, mod ...func(*statestore.Options)) *fixture {
		return newClusterFixture(t, false, mod...)
	}, files: clusterFiles},
	{name: "cluster-follower", cluster: true, open: func(t *testing.T, mod ...func(*statestore.Options)) *fixture {
		return newClusterFixture(t, true, mod...)
	}, files: clusterFiles},
}

// clusterFiles is what a refused write must leave unchanged in a cluster:
// the raft index the leader and the node under test have applied (a
// refused write never reaches the log), once the node applied every write
// it answered (a follower answers a forwarded write before applying it;
// Usage waits for that, as its reads do).
func clusterFiles(f *fixture) string {
	f.s.Usage()
	l := f.node.c.leader()
	return fmt.Sprint(l.Cluster().AppliedIndex(), " ", f.s.Cluster().AppliedIndex())
}

// clusterHome is the node of a test cluster a fixture talks to, and the
// raft stores every node keeps across a restart: raft's in-memory ones,
// held here, so a node closed and opened again finds its log, votes and
// snapshots as a durable store would (and a test can read the commit
// order from the log).
type clusterHome struct {
	c  *testCluster
	id string

	mu    sync.Mutex
	logs  map[string]*raft.InmemStore
	snaps map[string]*raft.InmemSnapshotStore
}

// stores sets co's raft stores to node co.NodeID's own.
func (h *clusterHome) stores(co *statestore.ClusterOptions) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.logs[co.NodeID] == nil {
		h.logs[co.NodeID], h.snaps[co.NodeID] = raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	}
	e := raftOf(co)
	e.LogStore, e.StableStore, e.SnapshotStore = h.logs[co.NodeID], h.logs[co.NodeID], h.snaps[co.NodeID]
	// No raft snapshot compacts the log: the whole log is the reference
	// history a scenario checks the watches against.
	co.SnapshotThreshold = math.MaxUint32
}

// newClusterFixture starts a 3-node cluster with mod applied to every
// node's Options and returns a fixture on its leader, or on a follower.
func newClusterFixture(t *testing.T, follower bool, mod ...func(*statestore.Options)) *fixture {
	t.Helper()
	h := &clusterHome{logs: map[string]*raft.InmemStore{}, snaps: map[string]*raft.InmemSnapshotStore{}}
	h.c = newTestClusterWith(t, 3, nil, mod, h.stores)
	s := h.c.leader()
	if follower {
		s = h.c.follower()
	}
	h.id = s.Cluster().NodeID()
	return &fixture{t: t, dir: h.c.dirs[h.id], clock: h.c.clock, s: s, node: h}
}

// restart opens the fixture's node again, on the raft stores it had, and
// waits until it has caught up.
func (h *clusterHome) restart(t testing.TB) *statestore.Store {
	t.Helper()
	for _, p := range h.c.peers {
		if p.ID == h.id {
			h.c.start(p)
		}
	}
	h.c.mu.Lock()
	s := h.c.nodes[h.id]
	h.c.mu.Unlock()
	select {
	case <-s.Cluster().Ready():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s not ready after its restart", h.id)
	}
	return s
}

// raftRecords is the cluster's commit order of ns: the records of the
// longest raft log among the nodes (every committed entry is on a
// majority, and the longest log holds every committed one).
func (h *clusterHome) raftRecords(t testing.TB, ns string) []*journal.Record {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var longest *raft.InmemStore
	var last uint64
	for _, l := range h.logs {
		if i, _ := l.LastIndex(); longest == nil || i > last {
			longest, last = l, i
		}
	}
	first, _ := longest.FirstIndex()
	if first > 1 {
		t.Fatalf("the raft log starts at %d: it was compacted", first)
	}
	var recs []*journal.Record
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := longest.GetLog(i, &l); err != nil {
			t.Fatalf("raft log %d: %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		batch, err := statestore.DecodeEntry(i, l.Data, journal.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range batch {
			if r.Namespace == ns {
				recs = append(recs, r)
			}
		}
	}
	return recs
}

// eachStoreHome runs fn as one parallel subtest per home that holds a
// namespace of any name: the journal and the cluster's two (config.toml
// holds only the namespaces it declares).
func eachStoreHome(t *testing.T, fn func(t *testing.T, h home)) {
	t.Helper()
	for _, h := range storeHomes {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			fn(t, h)
		})
	}
}
