package statestore

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/replica"
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

// fakeFuture is a finished raft.ApplyFuture.
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
		{name: "not leader", f: fakeFuture{err: raft.ErrNotLeader}, code: Unavailable, field: "leader", retry: true},
		{name: "enqueue timeout", f: fakeFuture{err: raft.ErrEnqueueTimeout}, code: Unavailable, field: "leader", retry: true},
		{name: "transfer", f: fakeFuture{err: raft.ErrLeadershipTransferInProgress}, code: Unavailable, field: "leader", retry: true},
		{name: "leadership lost", f: fakeFuture{err: raft.ErrLeadershipLost}, code: Unavailable, field: "commit"},
		{name: "shutdown", f: fakeFuture{err: raft.ErrRaftShutdown}, code: Unavailable, field: "commit"},
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
	network, lb := replica.NewInmemNetwork(), replica.NewLoopback()
	var peers []Peer
	for _, id := range []string{"a", "b", "c"} {
		peers = append(peers, Peer{ID: id, RaftAddr: "raft-" + id, RPCAddr: "rpc-" + id})
	}
	var nodes []*Store
	for _, p := range peers {
		s, err := OpenCluster(Options{Dir: t.TempDir()}, ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr,
			Peers: peers, Transport: network.Transport(p.RaftAddr), Loopback: lb})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		nodes = append(nodes, s)
	}
	for _, s := range nodes {
		<-s.Cluster().Ready()
	}
	var l *Store
	for deadline := time.Now().Add(20 * time.Second); l == nil; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		for _, s := range nodes {
			if s.Cluster().IsLeader() {
				l = s
			}
		}
	}
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
	f := l.cluster.node.Raft().Apply(bad, time.Second)
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
