package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// testCluster is three nodes in one process: an in-memory raft network,
// in-process forwarding and one fake clock, as replica's package
// documentation describes.
type testCluster struct {
	t     testing.TB
	clock *clock.Fake
	net   *replica.InmemNetwork
	lb    *replica.Loopback
	peers []statestore.Peer
	dirs  map[string]string
	nodes map[string]*statestore.Store
	mu    sync.Mutex
}

func newTestCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: clock.NewFake(t0), net: replica.NewInmemNetwork(), lb: replica.NewLoopback(),
		dirs: map[string]string{}, nodes: map[string]*statestore.Store{}}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.peers = append(c.peers, statestore.Peer{ID: id, RaftAddr: "raft-" + id, RPCAddr: "rpc-" + id})
		c.dirs[id] = t.TempDir()
	}
	for _, p := range c.peers {
		c.start(p)
	}
	t.Cleanup(func() {
		for _, s := range c.all() {
			s.Close()
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

func (c *testCluster) start(p statestore.Peer) {
	c.t.Helper()
	s, err := statestore.OpenCluster(statestore.Options{Dir: c.dirs[p.ID], Clock: c.clock, Schemas: schema.NewRegistry()},
		statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: c.peers,
			Transport: c.net.Transport(p.RaftAddr), Loopback: c.lb})
	if err != nil {
		c.t.Fatalf("open %s: %v", p.ID, err)
	}
	c.mu.Lock()
	c.nodes[p.ID] = s
	c.mu.Unlock()
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
	acked := map[string]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				key := fmt.Sprintf("w%d-%d", w, i)
				for _, s := range c.all() {
					if e, err := clusterPut(s, key, i, statestore.Expect{}); err == nil {
						mu.Lock()
						acked[key] = e.Revision
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	old := c.leader()
	oldRev := old.Namespace("group/g").Revision
	c.stop(old)
	l := c.leader()
	if l == old {
		t.Fatal("the closed node still leads")
	}
	e, err := clusterPut(c.follower(), "after", 1, statestore.Expect{})
	if err != nil {
		t.Fatalf("a write after the failover: %v", err)
	}
	if e.Revision <= oldRev {
		t.Fatalf("revision went back: %d after %d", e.Revision, oldRev)
	}
	for _, s := range c.all() {
		for key, rev := range acked {
			got, err := s.Get(ctx, admin, "group/g", key)
			if err != nil || got.Revision != rev {
				t.Fatalf("%s: acknowledged %s at revision %d reads %+v, %v", s.Cluster().NodeID(), key, rev, got, err)
			}
		}
	}
	if len(acked) != 30 {
		t.Fatalf("%d of 30 writes acknowledged before the failover", len(acked))
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
		{"no rpc address", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", Peers: peers}, "RPCAddr"},
		{"peer without rpc", statestore.Options{}, statestore.ClusterOptions{NodeID: "a", RaftAddr: "ra", RPCAddr: "pa", Peers: []statestore.Peer{{ID: "a", RaftAddr: "ra"}}}, "Peers[0].RPCAddr"},
		{"not among peers", statestore.Options{}, statestore.ClusterOptions{NodeID: "b", RaftAddr: "rb", RPCAddr: "pb", Peers: peers,
			Loopback: replica.NewLoopback(), Transport: replica.NewInmemNetwork().Transport("rb")}, "Peers"},
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
// the TCP forwarder, a write at a follower answered and visible.
func TestClusterOverTCP(t *testing.T) {
	t.Parallel()
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
			statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: peers})
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
