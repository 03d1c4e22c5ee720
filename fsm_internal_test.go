package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// TestEntryCodec: a raft entry round-trips its records, and every kind of
// damage (a flipped bit under a record's CRC, a cut, trailing bytes, a
// foreign entry) is refused naming the raft index.
func TestEntryCodec(t *testing.T) {
	t.Parallel()
	recs := []*journal.Record{
		{Kind: journal.KindPut, Namespace: "group/g", Key: "a", Revision: 1, TimeMs: 5, Schema: "s", Owner: "o", CreatedMs: 5, UpdatedMs: 5, ExpiresMs: 9, Document: []byte(`{"x":1}`)},
		{Kind: journal.KindDelete, Namespace: "group/g", Key: "a", Revision: 2, TimeMs: 6},
		{Kind: journal.KindExpire, Namespace: "group/h", Key: "b", Revision: 7, TimeMs: 6},
	}
	data, err := encodeEntry(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEntry(3, data, journal.DefaultLimits)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("decode = %d records, %v", len(got), err)
	}
	for i := range recs {
		a, _ := recs[i].Encode()
		b, _ := got[i].Encode()
		if !bytes.Equal(a, b) {
			t.Fatalf("record %d changed: %+v", i, got[i])
		}
	}
	flip := bytes.Clone(data)
	flip[len(flip)/2] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"bit flip", flip},
		{"cut", data[:len(data)-3]},
		{"trailing", append(bytes.Clone(data), 0)},
		{"foreign", []byte("not a batch")},
		{"empty", nil},
	} {
		_, err := decodeEntry(42, tc.data, journal.DefaultLimits)
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Index != 42 {
			t.Errorf("%s: %v, want an EntryError at index 42", tc.name, err)
		}
	}
}

// fakeFuture is a finished consensus.Future.
type fakeFuture struct {
	err  error
	resp any
}

func (f fakeFuture) Error() error  { return f.err }
func (f fakeFuture) Response() any { return f.resp }
func (f fakeFuture) Index() uint64 { return 7 }

// TestRaftOutcome pins the answer for each way an Apply ends: applied;
// not applied anywhere (retried at the leader); unknown (UNAVAILABLE, field
// commit, never a success); the leader's own log failing (STORAGE).
func TestRaftOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		f      fakeFuture
		code   Code
		field  string
		retry  bool
		wantOK bool
	}{
		{name: "applied", f: fakeFuture{}, wantOK: true},
		{name: "refused by the state machine", f: fakeFuture{resp: errors.New("revision 3 after 5")}, code: Unavailable, field: "leader", retry: true},
		{name: "not leader", f: fakeFuture{err: replica.MapError(raft.ErrNotLeader)}, code: Unavailable, field: "leader", retry: true},
		{name: "enqueue timeout", f: fakeFuture{err: replica.MapError(raft.ErrEnqueueTimeout)}, code: Unavailable, field: "leader", retry: true},
		{name: "transfer", f: fakeFuture{err: replica.MapError(raft.ErrLeadershipTransferInProgress)}, code: Unavailable, field: "leader", retry: true},
		{name: "leadership lost", f: fakeFuture{err: replica.MapError(raft.ErrLeadershipLost)}, code: Unavailable, field: "commit"},
		{name: "shutdown", f: fakeFuture{err: replica.MapError(raft.ErrRaftShutdown)}, code: Unavailable, field: "commit"},
		{name: "aborted by restore", f: fakeFuture{err: replica.MapError(raft.ErrAbortedByRestore)}, code: Unavailable, field: "leader", retry: true},
		{name: "log failure", f: fakeFuture{err: errors.New("write raft log: no space left on device")}, code: Storage, field: "raft log"},
	} {
		err := raftOutcome(tc.f)
		if tc.wantOK {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.Code != tc.code || se.Field != tc.field || retryable(err) != tc.retry {
			t.Errorf("%s: %v (retryable %v), want %v on %q, retryable %v", tc.name, err, retryable(err), tc.code, tc.field, tc.retry)
		}
	}
}

// TestFSMRefusesABadEntryOnEveryNode: an entry whose record breaks the
// replay checks (here a revision that skips ahead, as a leader admitting
// on a stale pending view would propose) is refused whole by every node's
// state machine, which keep identical state and go on applying.
func TestFSMRefusesABadEntryOnEveryNode(t *testing.T) {
	t.Parallel()
	nodes, l := openInmemCluster(t)
	p := Principal{ID: "ops", Admin: true}
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"cam-1","media_kind":"video","priority":1}`)
	e, err := l.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := encodeEntry([]*journal.Record{{Kind: journal.KindPut, Namespace: "group/g", Key: "k", Revision: e.Revision + 5,
		Schema: "keeppeek.media-intent.v1", Owner: "ops", TimeMs: 1, CreatedMs: 1, UpdatedMs: 1, Document: doc}})
	if err != nil {
		t.Fatal(err)
	}
	f := l.cluster.node.Apply(bad, time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if rerr, ok := f.Response().(error); !ok || rerr == nil {
		t.Fatalf("the leader's state machine took the bad entry: %v", f.Response())
	}
	e2, err := l.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc})
	if err != nil || e2.Revision != e.Revision+1 {
		t.Fatalf("the write after the refused entry = %+v, %v", e2, err)
	}
	for _, s := range nodes {
		got, err := s.Get(context.Background(), p, "group/g", "k")
		if err != nil || got.Revision != e2.Revision {
			t.Fatalf("%s reads %+v, %v", s.Cluster().NodeID(), got, err)
		}
	}
}

// openInmemCluster opens three nodes on an in-memory raft network and
// returns them, once each is ready, with the one that leads.
func openInmemCluster(t *testing.T, opts ...func(id string, o *Options)) (nodes []*Store, leader *Store) {
	t.Helper()
	network, lb := replica.NewInmemNetwork(), replica.NewLoopback()
	var peers []Peer
	for _, id := range []string{"a", "b", "c"} {
		peers = append(peers, Peer{ID: id, RaftAddr: "raft-" + id, RPCAddr: "rpc-" + id})
	}
	for _, p := range peers {
		o := Options{Dir: t.TempDir()}
		for _, f := range opts {
			f(p.ID, &o)
		}
		s, err := OpenCluster(o, ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr,
			Peers: peers, Engine: &replica.Raft{Transport: network.Transport(p.RaftAddr), Loopback: lb}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		nodes = append(nodes, s)
	}
	for _, s := range nodes {
		<-s.Cluster().Ready()
	}
	for deadline := time.Now().Add(20 * time.Second); leader == nil; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		for _, s := range nodes {
			if s.Cluster().IsLeader() {
				leader = s
			}
		}
	}
	return nodes, leader
}

// followerOf returns a node of nodes other than leader.
func followerOf(nodes []*Store, leader *Store) *Store {
	for _, s := range nodes {
		if s != leader {
			return s
		}
	}
	return nil
}

// TestForwardedWriteAtANonLeaderIsNotAppliedAtOnce: a write forwarded to
// a node that does not lead (the leader it was sent to lost leadership
// while it was in flight) is answered not applied at once, naming no
// wait, so the forwarder retries it at the leader. The node used to hold
// it for the whole leader wait and then answer a final UNAVAILABLE,
// which every writer of a planned leadership transfer received.
func TestForwardedWriteAtANonLeaderIsNotAppliedAtOnce(t *testing.T) {
	t.Parallel()
	nodes, l := openInmemCluster(t)
	p := Principal{ID: "ops", Admin: true}
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"cam-1","media_kind":"video","priority":1}`)
	for _, f := range nodes {
		if f == l {
			continue
		}
		for _, req := range []*fwdRequest{
			{Verb: verbPut, Principal: fwdPrincipalOf(p), Namespace: "group/g", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc},
			{Verb: verbDelete, Principal: fwdPrincipalOf(p), Namespace: "group/g", Key: "k"},
		} {
			out, err := f.cluster.handle(context.Background(), encodeForward(req))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := decodeAnswer(out)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Err == nil || !resp.Err.NotApplied || resp.Err.Code != Unavailable || !strings.Contains(resp.Err.Message, "is not the leader") {
				t.Fatalf("%s: a forwarded %s at a follower answered %+v, want not applied: not the leader", f.Cluster().NodeID(), req.Verb, resp.Err)
			}
		}
	}
	if _, err := l.Get(context.Background(), p, "group/g", "k"); CodeOf(err) != NotFound {
		t.Fatalf("after the refused forwards the leader reads %v, want NOT_FOUND", err)
	}
	// The same write through a follower's own door is forwarded and applied.
	f := followerOf(nodes, l)
	if _, err := f.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc}); err != nil {
		t.Fatal(err)
	}
}

// countingSchema accepts every object and counts the documents it walked.
type countingSchema struct{ n *atomic.Int64 }

func (c countingSchema) Validate(map[string]any) error { c.n.Add(1); return nil }

// TestForwardedWriteIsValidatedOnce: a write at a follower has its
// document checked against its schema there, before it is forwarded, and
// not again at the leader's admission; a write at the leader is checked
// there. (Every node's state machine checks it once more as it applies.) A bad
// document at a follower is refused there, naming the field, and nothing
// is forwarded.
func TestForwardedWriteIsValidatedOnce(t *testing.T) {
	t.Parallel()
	walked := map[string]*atomic.Int64{}
	nodes, l := openInmemCluster(t, func(id string, o *Options) {
		n := &atomic.Int64{}
		walked[id] = n
		o.Schemas = schema.NewRegistry()
		if err := o.Schemas.Register("keeppeek.counted.v1", countingSchema{n}); err != nil {
			t.Fatal(err)
		}
	})
	p := Principal{ID: "ops", Admin: true}
	f := followerOf(nodes, l)
	for i, s := range []*Store{f, l} {
		if _, err := s.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: fmt.Sprint("k", i), Schema: "keeppeek.counted.v1", Document: []byte(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		// Every node's state machine checks the record as replay does;
		// a linearizable read returns once this node has applied it.
		for _, n := range nodes {
			if _, err := n.Get(context.Background(), p, "group/g", fmt.Sprint("k", i)); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range nodes {
			want := int64(1)
			if n == s {
				want = 2
			}
			if got := walked[n.Cluster().NodeID()].Swap(0); got != want {
				t.Fatalf("a write at %s: %s walked the document %d times (admission and its apply), want %d", s.Cluster().NodeID(), n.Cluster().NodeID(), got, want)
			}
		}
	}
	_, err := f.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: "bad", Schema: "keeppeek.counted.v1", Document: []byte(`[1]`)})
	if CodeOf(err) != SchemaInvalid {
		t.Fatalf("a bad document at a follower: %v, want SCHEMA_INVALID", err)
	}
	if got := walked[l.Cluster().NodeID()].Load(); got != 0 {
		t.Fatalf("the bad document reached the leader's schema (%d walks)", got)
	}
}

// memSink is a snapshot sink into memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// msgSink hands every watch message to a channel.
type msgSink chan watch.Message

func (c msgSink) Deliver(m watch.Message) error { c <- m; return nil }

// TestFSMNeverGoesBack: raft may give a follower a snapshot older than
// what the follower applied (the leader's newest, when the follower's log
// could not be matched) and then replay the entries after it. The state
// machine keeps its newer state (no RESTORED closure, no re-snapshot at an
// older revision, no update delivered twice: the nemesis saw a watcher get
// an EXPIRE twice that way), skips the replayed entries, and takes no
// snapshot until raft's replay is back at what it applied (raft would
// label the image with the older index). A newer snapshot is restored
// (TestClusterSnapshotInstallClosesWatches).
func TestFSMNeverGoesBack(t *testing.T) {
	t.Parallel()
	network, lb := replica.NewInmemNetwork(), replica.NewLoopback()
	peers := []Peer{{ID: "a", RaftAddr: "raft-a", RPCAddr: "rpc-a"}}
	// The test's own log, to read back the entry raft replays.
	mem := raft.NewInmemStore()
	s, err := OpenCluster(Options{Dir: t.TempDir()}, ClusterOptions{NodeID: "a", RaftAddr: "raft-a", RPCAddr: "rpc-a",
		Peers: peers, Engine: &replica.Raft{LogStore: mem, StableStore: mem, SnapshotStore: raft.NewInmemSnapshotStore(), Transport: network.Transport("raft-a"), Loopback: lb}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.Cluster().Ready()
	p := Principal{ID: "ops", Admin: true}
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"cam-1","media_kind":"video","priority":1}`)
	put := func() Entry {
		t.Helper()
		e, err := s.Put(context.Background(), p, PutRequest{Namespace: "group/g", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	f := s.cluster.fsm
	image := func() []byte {
		t.Helper()
		sn, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var sink memSink
		if err := sn.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()
	}
	put()
	old := image()
	put()
	e3 := put()
	applied := f.appliedIndex()
	var replay raft.Log
	if err := mem.GetLog(applied, &replay); err != nil {
		t.Fatal(err)
	}
	msgs := make(msgSink, 64)
	ss, err := s.OpenSession(p, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(context.Background(), ss, WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
		t.Fatal(err)
	}
	if m, ok := (<-msgs).(*watch.Snapshot); !ok || m.SnapshotRevision != e3.Revision {
		t.Fatalf("watch snapshot %#v, want revision %d", m, e3.Revision)
	}

	if err := f.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a snapshot while raft replays below the applied index: raft would label it with the older index")
	}
	if r := f.Apply(replica.EntryOf(&replay)); r != nil {
		t.Fatalf("the replayed entry %d: %v", replay.Index, r)
	}
	if got, err := s.Get(StaleOK(context.Background()), p, "group/g", "k"); err != nil || got.Revision != e3.Revision {
		t.Fatalf("after the older snapshot and the replay: %+v, %v; want revision %d", got, err, e3.Revision)
	}
	if _, err := f.Snapshot(); err != nil {
		t.Fatalf("a snapshot once the replay reached the applied index: %v", err)
	}
	e4 := put()
	// The next message is e4's update: nothing closed, nothing twice.
	if u, ok := (<-msgs).(*watch.Update); !ok || u.Revision != e4.Revision {
		t.Fatalf("after the older snapshot the watch got %#v, want the update at %d", u, e4.Revision)
	}
}
