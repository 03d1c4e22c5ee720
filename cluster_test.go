package statestore_test

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testtls"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// testCluster is three nodes in one process: an in-memory raft network,
// in-process forwarding and one fake clock, as replica's package
// documentation describes.
type testCluster struct {
	t      testing.TB
	clock  *clock.Fake
	net    *replica.InmemNetwork
	lb     *replica.Loopback
	peers  []statestore.Peer
	dirs   map[string]string
	nodes  map[string]*statestore.Store
	mod    []func(*statestore.ClusterOptions)
	clocks map[string]*clock.Fake
	// opts, when set, adjusts each node's Options (its Faults, segment
	// size) before it opens.
	opts func(id string, o *statestore.Options)
	mu   sync.Mutex
}

func newTestCluster(t testing.TB, n int, mod ...func(*statestore.ClusterOptions)) *testCluster {
	t.Helper()
	return newTestClusterClocks(t, n, nil, mod...)
}

// newTestClusterClocks is newTestCluster with a clock of its own for each
// node ID that clocks names.
func newTestClusterClocks(t testing.TB, n int, clocks map[string]*clock.Fake, mod ...func(*statestore.ClusterOptions)) *testCluster {
	t.Helper()
	return newTestClusterOpts(t, n, clocks, nil, mod...)
}

// newTestClusterWith is newTestClusterClocks with optMod applied to every
// node's Options.
func newTestClusterWith(t testing.TB, n int, clocks map[string]*clock.Fake, optMod []func(*statestore.Options), mod ...func(*statestore.ClusterOptions)) *testCluster {
	t.Helper()
	return newTestClusterOpts(t, n, clocks, func(_ string, o *statestore.Options) {
		for _, m := range optMod {
			m(o)
		}
	}, mod...)
}

// newTestClusterOpts is newTestClusterClocks with opts adjusting each
// node's Options.
func newTestClusterOpts(t testing.TB, n int, clocks map[string]*clock.Fake, opts func(string, *statestore.Options), mod ...func(*statestore.ClusterOptions)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: clock.NewFake(t0), net: replica.NewInmemNetwork(), lb: replica.NewLoopback(),
		dirs: map[string]string{}, nodes: map[string]*statestore.Store{}, mod: mod, clocks: clocks, opts: opts}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.peers = append(c.peers, statestore.Peer{ID: id, RaftAddr: "raft-" + id, RPCAddr: "rpc-" + id})
		c.dirs[id] = t.TempDir()
	}
	for _, p := range c.peers {
		c.start(p)
	}
	t.Cleanup(func() {
		// Each node closed is cut off too: a raft call to a closed
		// in-memory transport waits out its 500 ms timeout, one to a cut
		// link fails at once (the last node's leadership transfer made
		// every cluster's cleanup take a second), and the leader goes
		// last, when its transfer finds nobody.
		nodes := c.all()
		slices.SortStableFunc(nodes, func(a, b *statestore.Store) int {
			return cmp.Compare(b2i(a.Cluster().IsLeader()), b2i(b.Cluster().IsLeader()))
		})
		for _, s := range nodes {
			s.Close()
			c.net.Isolate(raftAddrOf(c, s))
		}
	})
	for _, s := range c.all() {
		select {
		case <-s.Cluster().Ready():
		case <-time.After(20 * time.Second):
			t.Fatal("cluster not ready")
		}
	}
	return c
}

// raftOf is co's engine, for a test's mod to set its stores.
func raftOf(co *statestore.ClusterOptions) *replica.Raft { return co.Engine.(*replica.Raft) }

func (c *testCluster) start(p statestore.Peer) {
	c.t.Helper()
	co := statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: c.peers,
		Engine: &replica.Raft{Transport: c.net.Transport(p.RaftAddr), Loopback: c.lb}}
	for _, m := range c.mod {
		m(&co)
	}
	var clk clock.Clock = c.clock
	if own, ok := c.clocks[p.ID]; ok {
		clk = own
	}
	if c.dirs[p.ID] == "" {
		c.dirs[p.ID] = c.t.TempDir()
	}
	s, err := c.open(p, co, clk)
	if err != nil {
		c.t.Fatalf("open %s: %v", p.ID, err)
	}
	c.mu.Lock()
	c.nodes[p.ID] = s
	c.mu.Unlock()
}

// open opens node p on its directory, unregistered.
func (c *testCluster) open(p statestore.Peer, co statestore.ClusterOptions, clk clock.Clock) (*statestore.Store, error) {
	o := statestore.Options{Dir: c.dirs[p.ID], Clock: clk, Schemas: schema.NewRegistry()}
	if c.opts != nil {
		c.opts(p.ID, &o)
	}
	return statestore.OpenCluster(o, co)
}

func (c *testCluster) all() []*statestore.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*statestore.Store
	for _, p := range c.peers {
		if s := c.nodes[p.ID]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// leader waits for a node that leads and admits writes.
func (c *testCluster) leader() *statestore.Store {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.all() {
			if s.Cluster().IsLeader() {
				return s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

func (c *testCluster) follower() *statestore.Store {
	l := c.leader()
	for _, s := range c.all() {
		if s != l {
			return s
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// stop closes node s and forgets it.
func (c *testCluster) stop(s *statestore.Store) {
	id := s.Cluster().NodeID()
	s.Close()
	c.mu.Lock()
	delete(c.nodes, id)
	c.mu.Unlock()
}

// quiesce waits until every node has applied the same index and returns it.
func (c *testCluster) quiesce() uint64 {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var idx []uint64
		for _, s := range c.all() {
			idx = append(idx, s.Cluster().AppliedIndex())
		}
		same := true
		for _, i := range idx {
			same = same && i == idx[0]
		}
		if same && idx[0] > 0 {
			// Stable across a commit timeout: nothing was in flight.
			time.Sleep(20 * time.Millisecond)
			if c.all()[0].Cluster().AppliedIndex() == idx[0] {
				return idx[0]
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Fatal("the nodes did not converge")
	return 0
}

func clusterPut(s *statestore.Store, key string, n int, x statestore.Expect) (statestore.Entry, error) {
	return s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: key, Schema: schema.MediaIntentV1, Document: docN(n), Expect: x})
}

func TestClusterWritesAtLeaderAndFollowerVisibleEverywhere(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	el, err := clusterPut(l, "at-leader", 1, statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	ef, err := clusterPut(f, "at-follower", 2, statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	if ef.Revision != el.Revision+1 || ef.Owner != admin.ID {
		t.Fatalf("follower's write answered %+v after the leader's revision %d", ef, el.Revision)
	}
	// A linearizable Get on every node sees both, right after the answers.
	for _, s := range c.all() {
		for key, want := range map[string]uint64{"at-leader": el.Revision, "at-follower": ef.Revision} {
			e, err := s.Get(ctx, admin, "group/g", key)
			if err != nil || e.Revision != want || !bytes.Equal(e.Document, map[string][]byte{"at-leader": docN(1), "at-follower": docN(2)}[key]) {
				t.Fatalf("%s: Get %s = %+v, %v; want revision %d", s.Cluster().NodeID(), key, e, err, want)
			}
		}
	}
	// A delete forwarded from a follower, then NOT_FOUND everywhere.
	rev, err := f.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/g", Key: "at-leader"})
	if err != nil || rev != ef.Revision+1 {
		t.Fatalf("delete at follower = %d, %v", rev, err)
	}
	for _, s := range c.all() {
		if _, err := s.Get(ctx, admin, "group/g", "at-leader"); statestore.CodeOf(err) != statestore.NotFound {
			t.Fatalf("%s: deleted key reads %v", s.Cluster().NodeID(), err)
		}
	}
	// The policy is the leader's and the follower's alike: alice may not
	// write group/.
	_, err = f.Put(ctx, alice, statestore.PutRequest{Namespace: "group/g", Key: "x", Schema: schema.MediaIntentV1, Document: docN(3)})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
}

func TestClusterCompareAndSet(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	e, err := clusterPut(f, "k", 1, statestore.CreateOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*statestore.Store{l, f} {
		_, err = clusterPut(s, "k", 2, statestore.CreateOnly)
		if se := wantCode(t, err, statestore.Conflict, "expected_revision"); se.CurrentRevision != e.Revision {
			t.Fatalf("create-only conflict names revision %d, want %d", se.CurrentRevision, e.Revision)
		}
		_, err = clusterPut(s, "k", 2, statestore.IfRevision(e.Revision+7))
		wantCode(t, err, statestore.Conflict, "expected_revision")
	}
	e2, err := clusterPut(f, "k", 3, statestore.IfRevision(e.Revision))
	if err != nil || e2.Revision != e.Revision+1 {
		t.Fatalf("CAS at the right revision = %+v, %v", e2, err)
	}
	_, err = f.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/g", Key: "k", Expect: statestore.IfRevision(e.Revision)})
	wantCode(t, err, statestore.Conflict, "expected_revision")
}

func TestClusterFollowerWatchSeesEveryUpdateOnceInOrder(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	sink := newSink()
	ss, err := f.OpenSession(admin, sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := sink.next(t).(*watch.Snapshot); !ok {
		t.Fatal("first message is not the snapshot")
	}
	const n = 24
	for i := range n {
		at := l
		if i%2 == 1 {
			at = f
		}
		if _, err := clusterPut(at, fmt.Sprintf("k%d", i%5), i, statestore.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
	var lastRev uint64
	for i := range n {
		u := sink.nextUpdate(t)
		if u.Sequence != uint64(i+1) || u.Revision <= lastRev || u.Key != fmt.Sprintf("k%d", i%5) || !bytes.Equal(u.Entry.Document, docN(i)) {
			t.Fatalf("update %d = %+v after revision %d", i, u, lastRev)
		}
		lastRev = u.Revision
		if err := f.Ack(ss, "w", u.Sequence); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case m := <-sink.ch:
		t.Fatalf("an extra message: %#v", m)
	default:
	}
}

func TestClusterLeaderLossKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	old := c.leader()
	var (
		mu      sync.Mutex
		acked   = map[string]uint64{}
		unknown int
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		written atomic.Int64
	)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := c.all()[(w+i)%3]
				key := fmt.Sprintf("w%d-%d", w, i)
				e, err := clusterPut(s, key, i, statestore.Expect{})
				mu.Lock()
				switch {
				case err == nil:
					acked[key] = e.Revision
				case statestore.CodeOf(err) == statestore.Unavailable:
					unknown++
				default:
					t.Errorf("put %s: %v", key, err)
				}
				mu.Unlock()
				written.Add(1)
			}
		}()
	}
	// Some writes, then the leader is cut off mid-stream (a crash: no
	// transfer), then more writes at the new leader.
	for written.Load() < 30 {
		runtime.Gosched()
	}
	c.net.Isolate(raftAddrOf(c, old))
	var l *statestore.Store
	deadline := time.Now().Add(20 * time.Second)
	for l == nil && time.Now().Before(deadline) {
		for _, s := range c.all() {
			if s != old && s.Cluster().IsLeader() {
				l = s
			}
		}
		runtime.Gosched()
	}
	if l == nil {
		t.Fatal("no new leader")
	}
	at := written.Load()
	for written.Load() < at+30 {
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	c.net.Heal(raftAddrOf(c, old))
	c.quiesce()
	var lastRev uint64
	for _, s := range c.all() {
		for key, rev := range acked {
			got, err := s.Get(ctx, admin, "group/g", key)
			if err != nil || got.Revision != rev {
				t.Fatalf("%s: acknowledged %s at revision %d reads %+v, %v", s.Cluster().NodeID(), key, rev, got, err)
			}
			lastRev = max(lastRev, rev)
		}
		if r := s.Namespace("group/g").Revision; r < lastRev {
			t.Fatalf("%s: namespace revision %d below acknowledged %d", s.Cluster().NodeID(), r, lastRev)
		}
	}
	e, err := clusterPut(old, "after", 1, statestore.Expect{})
	if err != nil || e.Revision <= lastRev {
		t.Fatalf("a write at the old leader after healing = %+v, %v (last acknowledged revision %d)", e, err, lastRev)
	}
	t.Logf("%d acknowledged, %d unavailable", len(acked), unknown)
}

func raftAddrOf(c *testCluster, s *statestore.Store) string {
	for _, p := range c.peers {
		if p.ID == s.Cluster().NodeID() {
			return p.RaftAddr
		}
	}
	return ""
}

// TestClusterWithoutQuorum: a node alone answers writes and linearizable
// reads UNAVAILABLE naming the leader field within two election timeouts,
// and serves its own state under StaleOK.
func TestClusterWithoutQuorum(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	e, err := clusterPut(c.leader(), "k", 1, statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	f := c.follower()
	// f applied k before it is left alone (a linearizable read waits).
	if _, err := f.Get(ctx, admin, "group/g", "k"); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.all() {
		if s != f {
			c.stop(s)
		}
	}
	// Closing a leader hands leadership on, possibly to f, which then
	// leads no quorum: its write's outcome is unknown (field commit) until
	// it steps down; after that, no leader (field leader).
	_, err = clusterPut(f, "k2", 2, statestore.Expect{})
	if se := wantCode(t, err, statestore.Unavailable, ""); se.Field != "leader" && se.Field != "commit" {
		t.Fatalf("write without quorum: %v", err)
	}
	_, err = clusterPut(f, "k3", 3, statestore.Expect{})
	wantCode(t, err, statestore.Unavailable, "leader")
	_, err = f.Get(ctx, admin, "group/g", "k")
	wantCode(t, err, statestore.Unavailable, "leader")
	got, err := f.Get(statestore.StaleOK(ctx), admin, "group/g", "k")
	if err != nil || got.Revision != e.Revision {
		t.Fatalf("stale read = %+v, %v", got, err)
	}
}

// TestClusterSnapshotInstallClosesWatches: a follower cut off while the
// leader compacts its log behind a raft snapshot catches up by installing
// it, which closes its watches with RESTORED; its state is then current.
func TestClusterSnapshotInstallClosesWatches(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, func(co *statestore.ClusterOptions) { co.TrailingLogs = 1 })
	l, f := c.leader(), c.follower()
	sink := newSink()
	ss, err := f.OpenSession(admin, sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
		t.Fatal(err)
	}
	sink.next(t)
	c.net.Isolate(raftAddrOf(c, f))
	var last statestore.Entry
	for i := range 10 {
		if last, err = clusterPut(l, fmt.Sprintf("k%d", i), i, statestore.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	installed := f.Cluster().Stats().SnapshotsInstalled
	c.net.Heal(raftAddrOf(c, f))
	m := sink.next(t)
	if cl, ok := m.(*watch.Closed); !ok || cl.Reason != watch.Restored {
		t.Fatalf("follower's watch got %#v, want a RESTORED closure", m)
	}
	// The install counts on the follower (Restore had returned before
	// the watch closed), the checkpoint on the leader.
	if st := f.Cluster().Stats(); st.SnapshotsInstalled != installed+1 {
		t.Errorf("follower after the install: %v; want %d snapshots installed", st, installed+1)
	}
	if st := l.Cluster().Stats(); st.SnapshotsTaken == 0 || st.SnapshotsInstalled != 0 {
		t.Errorf("leader after its checkpoint: %v; want a snapshot taken, none installed", st)
	}
	if got, err := f.Get(ctx, admin, "group/g", "k9"); err != nil || got.Revision != last.Revision {
		t.Fatalf("after the install the follower reads %+v, %v", got, err)
	}
}

// TestClusterImagesAreByteIdentical: after quiescing, each node's view
// encoded at the same index (a Backup: checkpoint.Encode of the applied
// view at its raft index, on the shared clock) is the same bytes.
func TestClusterImagesAreByteIdentical(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	for i := range 40 {
		s := c.all()[i%3]
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: fmt.Sprintf("group/g%d", i%4), Key: fmt.Sprintf("k%d", i%7),
			Schema: schema.MediaIntentV1, Document: docN(i), TTL: time.Duration(i%2) * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if i%9 == 0 {
			s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: fmt.Sprintf("group/g%d", i%4), Key: fmt.Sprintf("k%d", i%7)})
		}
	}
	idx := c.quiesce()
	var images [][]byte
	for _, s := range c.all() {
		var b bytes.Buffer
		if err := s.Backup(&b); err != nil {
			t.Fatal(err)
		}
		images = append(images, b.Bytes())
	}
	for i, im := range images[1:] {
		if !bytes.Equal(im, images[0]) {
			t.Fatalf("node %d's image at index %d differs from node 1's (%d vs %d bytes)", i+2, idx, len(im), len(images[0]))
		}
	}
}

func TestClusterLeasesExpireOnceAtTheLeader(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	var sinks []*chanSink
	for _, s := range c.all() {
		sink := newSink()
		ss, err := s.OpenSession(admin, sink)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
			t.Fatal(err)
		}
		sink.next(t) // the snapshot
		sinks = append(sinks, sink)
	}
	e, err := f.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "lease", Schema: schema.MediaIntentV1, Document: docN(1), TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if e.ExpiresMs != t0.UnixMilli()+2000 {
		t.Fatalf("lease deadline %d, want the leader's time + 2 s", e.ExpiresMs)
	}
	for _, sink := range sinks {
		if u := sink.nextUpdate(t); u.Kind != watch.Put {
			t.Fatalf("first update %+v", u)
		}
	}
	// Not yet due: nothing expires.
	c.clock.Advance(1999 * time.Millisecond)
	if got, err := f.Get(ctx, admin, "group/g", "lease"); err != nil || got.Revision != e.Revision {
		t.Fatalf("lease before its deadline reads %+v, %v", got, err)
	}
	c.clock.Advance(time.Millisecond)
	for _, sink := range sinks {
		u := sink.nextUpdate(t)
		if u.Kind != watch.Expire || u.Key != "lease" || u.Revision != e.Revision+1 {
			t.Fatalf("want one EXPIRE of the lease, got %+v", u)
		}
	}
	for _, s := range c.all() {
		if _, err := s.Get(ctx, admin, "group/g", "lease"); statestore.CodeOf(err) != statestore.NotFound {
			t.Fatalf("%s: expired lease reads %v", s.Cluster().NodeID(), err)
		}
	}
	// Exactly once: a later write's revision follows the EXPIRE's directly,
	// and no other update was published anywhere.
	e2, err := clusterPut(l, "after", 2, statestore.Expect{})
	if err != nil || e2.Revision != e.Revision+2 {
		t.Fatalf("write after the expiry = %+v, %v; want revision %d", e2, err, e.Revision+2)
	}
	for _, sink := range sinks {
		if u := sink.nextUpdate(t); u.Kind != watch.Put || u.Key != "after" {
			t.Fatalf("after the EXPIRE: %+v", u)
		}
	}
}

func TestOpenClusterRefusals(t *testing.T) {
	t.Parallel()
	peers := []statestore.Peer{{ID: "a", RaftAddr: "ra", RPCAddr: "pa"}}
	for _, tc := range []struct {
		name  string
		opts  statestore.Options
		co    statestore.ClusterOptions
		field string
	}{
		{"settings", statestore.Options{Settings: "config.toml"}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa", Peers: peers}, "Settings"},
		{"no engine", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa", Peers: peers}, "Engine"},
		{"no rpc address", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", Peers: peers, Engine: &replica.Raft{}}, "RPCAddr"},
		{"peer without rpc", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa",
			Peers: []statestore.Peer{{ID: "a", RaftAddr: "ra"}}, Engine: &replica.Raft{}}, "Peers[0].RPCAddr"},
		{"not among peers", statestore.Options{}, statestore.ClusterOptions{NodeID: "b", RaftAddr: "rb", RPCAddr: "pb", Peers: peers,
			Engine: &replica.Raft{Loopback: replica.NewLoopback(), Transport: replica.NewInmemNetwork().Transport("rb")}}, "Peers"},
		{"half a log override", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa", Peers: peers,
			Engine: &replica.Raft{LogStore: raft.NewInmemStore(), Loopback: replica.NewLoopback(), Transport: replica.NewInmemNetwork().Transport("ra")}}, "LogStore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Dir = t.TempDir()
			_, err := statestore.OpenCluster(tc.opts, tc.co)
			var se *statestore.Error
			if !errors.As(err, &se) {
				t.Fatalf("want an error, got %v", err)
			}
			if se.Field != tc.field && !errors.As(err, new(*replica.ConfigError)) {
				t.Fatalf("error %v names %q, want %q", err, se.Field, tc.field)
			}
		})
	}
}

// TestClusterOverTCP runs three nodes on 127.0.0.1: raft's TCP transport and
// the TCP forwarder, a write at a follower answered and visible; in the
// clear and over TLS (the test CA's 127.0.0.1 certificate on every node,
// verified by every dialer).
func TestClusterOverTCP(t *testing.T) {
	t.Parallel()
	ca := testtls.New(t, "cluster")
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{
		{"clear", nil},
		{"tls", &tls.Config{Certificates: ca.Server.Certificates, RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testClusterOverTCP(t, tc.tls)
		})
	}
}

func testClusterOverTCP(t *testing.T, tc *tls.Config) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	var peers []statestore.Peer
	for i := range 3 {
		peers = append(peers, statestore.Peer{ID: fmt.Sprintf("t%d", i), RaftAddr: free(), RPCAddr: free()})
	}
	fc := clock.NewFake(t0)
	var nodes []*statestore.Store
	for _, p := range peers {
		s, err := statestore.OpenCluster(statestore.Options{Dir: t.TempDir(), Clock: fc},
			statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: peers, Engine: &replica.Raft{TLS: tc}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		nodes = append(nodes, s)
	}
	for _, s := range nodes {
		select {
		case <-s.Cluster().Ready():
		case <-time.After(20 * time.Second):
			t.Fatal("not ready")
		}
	}
	var f *statestore.Store
	for _, s := range nodes {
		if !s.Cluster().IsLeader() {
			f = s
			break
		}
	}
	e, err := clusterPut(f, "tcp", 1, statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nodes {
		if got, err := s.Get(ctx, admin, "group/g", "tcp"); err != nil || got.Revision != e.Revision {
			t.Fatalf("%s reads %+v, %v", s.Cluster().NodeID(), got, err)
		}
	}
	_, err = clusterPut(f, "tcp", 2, statestore.CreateOnly)
	if se := wantCode(t, err, statestore.Conflict, "expected_revision"); se.CurrentRevision != e.Revision {
		t.Fatalf("relayed conflict names %d", se.CurrentRevision)
	}
}

// failingLog is raft's in-memory log whose StoreLogs fails on demand.
type failingLog struct {
	*raft.InmemStore
	fail atomic.Bool
}

func (l *failingLog) StoreLogs(logs []*raft.Log) error {
	if l.fail.Load() {
		return errors.New("injected: no space left on device")
	}
	return l.InmemStore.StoreLogs(logs)
}

func (l *failingLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// TestClusterLeaderLogFailureIsStorage: the leader's own log refusing a
// batch answers STORAGE (nothing was replicated), and the cluster goes on
// under another leader.
func TestClusterLeaderLogFailureIsStorage(t *testing.T) {
	t.Parallel()
	logs := map[string]*failingLog{}
	var mu sync.Mutex
	c := newTestCluster(t, 3, func(co *statestore.ClusterOptions) {
		l := &failingLog{InmemStore: raft.NewInmemStore()}
		mu.Lock()
		logs[co.NodeID] = l
		mu.Unlock()
		e := raftOf(co)
		e.LogStore, e.StableStore = l, l.InmemStore
	})
	l := c.leader()
	if _, err := clusterPut(l, "before", 1, statestore.Expect{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	logs[l.Cluster().NodeID()].fail.Store(true)
	mu.Unlock()
	_, err := l.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "k", Schema: schema.MediaIntentV1, Document: docN(2)})
	wantCode(t, err, statestore.Storage, "raft log")
	mu.Lock()
	logs[l.Cluster().NodeID()].fail.Store(false)
	mu.Unlock()
	// The failed leader stepped down; once a leader is elected again (a
	// read during the election may be UNAVAILABLE) the refused write is
	// nowhere and writes go on.
	retry := func(what string, fn func() error) {
		t.Helper()
		for i := 0; ; i++ {
			err := fn()
			if statestore.CodeOf(err) != statestore.Unavailable || i == 20 {
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return
			}
		}
	}
	for _, s := range c.all() {
		retry("get", func() error {
			_, err := s.Get(ctx, admin, "group/g", "k")
			if statestore.CodeOf(err) == statestore.NotFound {
				return nil
			}
			if err == nil {
				return errors.New("the refused write is present")
			}
			return err
		})
	}
	retry("put after the failure", func() error { _, err := clusterPut(l, "after", 3, statestore.Expect{}); return err })
}

// TestClusterLeaseLapsedDuringFailoverExpiresOnce: a lease that lapses
// while its leader is cut off is expired once, by the new leader (its
// purge after the Barrier, or its expiry loop), never extended; every
// node's watch sees that one EXPIRE.
func TestClusterLeaseLapsedDuringFailoverExpiresOnce(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	old := c.leader()
	e, err := old.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "lease", Schema: schema.MediaIntentV1, Document: docN(1), TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var sinks []*chanSink
	for _, s := range c.all() {
		if s == old {
			continue
		}
		// A linearizable watch: its snapshot holds the lease.
		sink := newSink()
		ss, err := s.OpenSession(admin, sink)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
			t.Fatal(err)
		}
		if snap := sink.next(t).(*watch.Snapshot); len(snap.Entries) != 1 {
			t.Fatalf("snapshot holds %d entries", len(snap.Entries))
		}
		sinks = append(sinks, sink)
	}
	c.net.Isolate(raftAddrOf(c, old))
	c.clock.Advance(3 * time.Second)
	for _, sink := range sinks {
		u := sink.nextUpdate(t)
		if u.Kind != watch.Expire || u.Key != "lease" || u.Revision != e.Revision+1 {
			t.Fatalf("want the lease's EXPIRE, got %+v", u)
		}
	}
	c.net.Heal(raftAddrOf(c, old))
	var l *statestore.Store
	for _, s := range c.all() {
		if s != old {
			l = s
		}
	}
	e2, err := clusterPut(l, "after", 2, statestore.Expect{})
	if err != nil || e2.Revision != e.Revision+2 {
		t.Fatalf("write after the expiry = %+v, %v; want revision %d (one EXPIRE between)", e2, err, e.Revision+2)
	}
	for _, sink := range sinks {
		if u := sink.nextUpdate(t); u.Kind != watch.Put || u.Key != "after" {
			t.Fatalf("after the EXPIRE: %+v", u)
		}
	}
	c.quiesce()
	for _, s := range c.all() {
		if _, err := s.Get(ctx, admin, "group/g", "lease"); statestore.CodeOf(err) != statestore.NotFound {
			t.Fatalf("%s: the lapsed lease reads %v", s.Cluster().NodeID(), err)
		}
	}
}

// TestClusterMembership: Members, TransferLeadership to a named node,
// RemoveServer, and a node that joins (never bootstrapping) through
// AddVoter, catches up and serves reads and writes.
func TestClusterMembership(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	members, err := f.Cluster().Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members = %+v, %v", members, err)
	}
	if err := l.Cluster().TransferLeadership(f.Cluster().NodeID()); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(); got != f {
		t.Fatalf("leadership went to %s, asked for %s", got.Cluster().NodeID(), f.Cluster().NodeID())
	}
	if id, _ := l.Cluster().Leader(); id != f.Cluster().NodeID() && id != "" {
		t.Fatalf("the old leader sees %q lead", id)
	}
	e, err := clusterPut(l, "k", 1, statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	// Remove the third node, then bring a new one in.
	var third *statestore.Store
	for _, s := range c.all() {
		if s != l && s != f {
			third = s
		}
	}
	if err := f.Cluster().RemoveServer(third.Cluster().NodeID()); err != nil {
		t.Fatal(err)
	}
	c.stop(third)
	if members, _ := f.Cluster().Members(); len(members) != 2 {
		t.Fatalf("after the removal: %+v", members)
	}
	p4 := statestore.Peer{ID: "n4", RaftAddr: "raft-n4", RPCAddr: "rpc-n4"}
	c.mu.Lock()
	c.peers = append(c.peers, p4)
	c.mu.Unlock()
	c.mod = append(c.mod, func(co *statestore.ClusterOptions) { co.Join = co.NodeID == "n4" })
	c.start(p4)
	if err := f.Cluster().AddVoter(p4); err != nil {
		t.Fatal(err)
	}
	n4 := c.nodes["n4"]
	select {
	case <-n4.Cluster().Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the joined node is not ready")
	}
	if got, err := n4.Get(ctx, admin, "group/g", "k"); err != nil || got.Revision != e.Revision {
		t.Fatalf("the joined node reads %+v, %v", got, err)
	}
	if _, err := clusterPut(n4, "from-n4", 2, statestore.Expect{}); err != nil {
		t.Fatalf("write at the joined node: %v", err)
	}
	if members, _ := n4.Cluster().Members(); len(members) != 3 {
		t.Fatalf("after the join: %+v", members)
	}
	if err := f.Cluster().AddVoter(statestore.Peer{ID: "x"}); statestore.CodeOf(err) != statestore.InvalidArgument {
		t.Fatalf("a voter without addresses: %v", err)
	}
}

// TestClusterTimeNeverGoesBack: a new leader whose clock is behind the
// last applied record stamps its batches with that record's time, not its
// own: no entry's time moves back, and no lease is lengthened by the skew.
func TestClusterTimeNeverGoesBack(t *testing.T) {
	t.Parallel()
	ahead, behind := clock.NewFake(t0.Add(10*time.Second)), clock.NewFake(t0)
	c := newTestClusterClocks(t, 3, map[string]*clock.Fake{"n1": ahead, "n2": ahead, "n3": behind})
	var slow *statestore.Store
	for _, s := range c.all() {
		if s.Cluster().NodeID() == "n3" {
			slow = s
		}
	}
	l := c.leader()
	if l == slow {
		if err := l.Cluster().TransferLeadership("n1"); err != nil {
			t.Fatal(err)
		}
		for c.leader() == slow {
			runtime.Gosched()
		}
		l = c.leader()
	}
	e1, err := clusterPut(l, "k", 1, statestore.Expect{})
	if err != nil || e1.UpdatedMs != t0.UnixMilli()+10_000 {
		t.Fatalf("write at the leader ahead = %+v, %v", e1, err)
	}
	if err := l.Cluster().TransferLeadership("n3"); err != nil {
		t.Fatal(err)
	}
	for c.leader() != slow {
		runtime.Gosched()
	}
	e2, err := clusterPut(slow, "k", 2, statestore.Expect{})
	if err != nil || e2.UpdatedMs < e1.UpdatedMs {
		t.Fatalf("write at the leader behind = %+v, %v; its time went below %d", e2, err, e1.UpdatedMs)
	}
	e3, err := slow.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "lease", Schema: schema.MediaIntentV1, Document: docN(3), TTL: 2 * time.Second})
	if err != nil || e3.ExpiresMs != e1.UpdatedMs+2000 {
		t.Fatalf("lease at the leader behind = %+v, %v", e3, err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
