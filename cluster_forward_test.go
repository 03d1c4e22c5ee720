package statestore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

// TestClusterForwardedWritesBatch: writes queued at a follower while its
// calls to the leader are held go to the leader together, in a few calls,
// and each keeps its own outcome: of two create-only writes racing on a
// key one wins and the other is a CONFLICT naming the winner's revision,
// a write its principal may not make is refused alone, and a write whose
// context ended while it was queued was never sent nor applied.
func TestClusterForwardedWritesBatch(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	var leaderRPC string
	for _, p := range c.peers {
		if p.ID == l.Cluster().NodeID() {
			leaderRPC = p.RPCAddr
		}
	}
	h := c.lb.Handler(leaderRPC)
	gate := make(chan struct{})
	c.lb.Register(leaderRPC, func(ctx context.Context, req []byte) ([]byte, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return h(ctx, req)
	})
	calls0, writes0 := statestore.ForwardCalls(f)

	const keys = 20
	type result struct {
		e   statestore.Entry
		err error
	}
	results := make([][2]result, keys)
	waitPending := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for statestore.ForwardPending(f) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d writes pending at the follower, want %d", statestore.ForwardPending(f), want)
			}
			runtime.Gosched()
		}
	}
	var wg sync.WaitGroup
	put := func(k, j int) {
		wg.Go(func() {
			e, err := clusterPut(f, fmt.Sprintf("k%d", k), 10*k+j, statestore.CreateOnly)
			results[k][j] = result{e, err}
		})
	}
	// The first two writes each start a call of their own, held: every
	// later write waits in the queue.
	put(0, 0)
	waitPending(1)
	put(0, 1)
	waitPending(2)
	for k := range keys {
		for j := range 2 {
			if k > 0 {
				put(k, j)
			}
		}
	}
	// Refused at the follower already: it never joins the queue.
	_, denied := f.Put(ctx, alice, statestore.PutRequest{Namespace: "group/g", Key: "alice", Schema: schema.MediaIntentV1, Document: docN(1)})
	wantCode(t, denied, statestore.PermissionDenied, "namespace")
	actx, cancel := context.WithCancel(ctx)
	var abandoned error
	left := make(chan struct{})
	go func() {
		defer close(left)
		_, abandoned = f.Put(actx, admin, statestore.PutRequest{Namespace: "group/g", Key: "abandoned", Schema: schema.MediaIntentV1, Document: docN(2)})
	}()
	waitPending(2*keys + 1)
	cancel()
	<-left
	if statestore.CodeOf(abandoned) != statestore.Unavailable {
		t.Fatalf("the write whose context ended while queued = %v, want UNAVAILABLE", abandoned)
	}
	close(gate)
	wg.Wait()

	calls, writes := statestore.ForwardCalls(f)
	calls, writes = calls-calls0, writes-writes0
	// The two held calls, then the first of their senders free takes
	// every queued write but the abandoned one.
	if writes != 2*keys || calls != 3 {
		t.Fatalf("%d writes forwarded in %d calls; want %d in 3", writes, calls, 2*keys)
	}
	revs := map[uint64]bool{}
	for k, rs := range results {
		win, lose := rs[0], rs[1]
		if win.err != nil {
			win, lose = lose, win
		}
		if win.err != nil || revs[win.e.Revision] {
			t.Fatalf("k%d: winner %+v, %v (revision seen before: %v)", k, win.e, win.err, revs[win.e.Revision])
		}
		revs[win.e.Revision] = true
		if se := wantCode(t, lose.err, statestore.Conflict, "expected_revision"); se.CurrentRevision != win.e.Revision {
			t.Fatalf("k%d: the losing create-only names revision %d, the winner has %d", k, se.CurrentRevision, win.e.Revision)
		}
		for _, s := range []*statestore.Store{l, f} {
			got, err := s.Get(ctx, admin, "group/g", fmt.Sprintf("k%d", k))
			if err != nil || got.Revision != win.e.Revision || string(got.Document) != string(win.e.Document) {
				t.Fatalf("%s: k%d reads %+v, %v; want the winner's revision %d", s.Cluster().NodeID(), k, got, err, win.e.Revision)
			}
		}
	}
	for _, s := range []*statestore.Store{l, f} {
		if _, err := s.Get(ctx, admin, "group/g", "abandoned"); statestore.CodeOf(err) != statestore.NotFound {
			t.Fatalf("%s: the abandoned write reads %v, want NOT_FOUND", s.Cluster().NodeID(), err)
		}
	}
}
