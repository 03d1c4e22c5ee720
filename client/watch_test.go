package client_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestWatchFollowsUpdatesInOrder: a reader that keeps calling Next sees
// every kind of update in order, and its acknowledgements (each Next
// acknowledges the update before) keep the watch open far past the
// server's bound of unacknowledged updates.
func TestWatchFollowsUpdatesInOrder(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	const bound = 4
	s := startServer(t, serverOptions{clock: clk, limits: quota.Limits{MaxUnackedUpdates: bound}})
	logs := newLogRecorder()
	c := dial(t, func(c *client.Config) { c.Logger = slogOf(logs) }, s.url)
	const ns = "service/order"
	s.put(t, ns, "in/old", 0)
	s.put(t, ns, "out/x", 0)
	w, err := c.Watch(ctx, ns, "in/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ev := next(t, w); ev.Kind != client.EventSnapshot || len(ev.Entries) != 1 || ev.Entries[0].Key != "in/old" || ev.Revision != 2 {
		t.Fatalf("snapshot %+v, want in/old alone at revision 2", ev)
	}
	seq := uint64(0)
	want := func(kind watch.Kind, key string, rev uint64) {
		t.Helper()
		seq++
		ev := next(t, w)
		if ev.Kind != client.EventUpdate || ev.Sequence != seq || ev.Update != kind || ev.Key != key || ev.Revision != rev ||
			(kind == watch.Put) != (ev.Entry != nil) {
			t.Fatalf("got %+v, want update %d: %v %s at revision %d", ev, seq, kind, key, rev)
		}
	}
	// Rounds of bound-1 writes, each read in full; before the next round
	// the server has applied the acknowledgements of all but the round's
	// last update (the client logs each at Debug). So the server holds
	// exactly bound unacknowledged updates at the end of a round when Next
	// acknowledges, and overflows in the second round otherwise.
	for round := range 5 {
		var revs []uint64
		for i := range bound - 1 {
			revs = append(revs, s.put(t, ns, fmt.Sprintf("in/%d-%d", round, i), i).Revision)
			s.put(t, ns, "out/x", i) // outside the prefix: a revision skip, no update
		}
		for i, rev := range revs {
			want(watch.Put, fmt.Sprintf("in/%d-%d", round, i), rev)
		}
		for acked := uint64(1); acked < seq; acked++ {
			logs.waitFor(t, 0, fmt.Sprintf("the acknowledgement of %d applied", acked),
				func(r string) bool { return strings.HasSuffix(r, fmt.Sprintf(" up to %d", acked)) })
		}
	}
	del, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: ns, Key: "in/old"})
	if err != nil {
		t.Fatal(err)
	}
	want(watch.Delete, "in/old", del)
	leased := mustPut(t, c, withTTL(putReq(ns, "in/lease", 1), 2*time.Second))
	want(watch.Put, "in/lease", leased.Revision)
	clk.Advance(2 * time.Second)
	want(watch.Expire, "in/lease", leased.Revision+1)
	if n := s.store.Stats().Watches.Open; n != 1 {
		t.Fatalf("%d watches open, want the one followed all along", n)
	}
}

// TestStalledReaderIsClosedAndResnapshots: a reader that stops calling
// Next acknowledges nothing, so the server closes its watch at the bound
// (BUFFER_OVERFLOW); the next Next re-snapshots with that cause, holding
// every write, and the watch goes on.
func TestStalledReaderIsClosedAndResnapshots(t *testing.T) {
	t.Parallel()
	const bound = 4
	s := startServer(t, serverOptions{limits: quota.Limits{MaxUnackedUpdates: bound}})
	c := dial(t, nil, s.url)
	const ns = "service/stall"
	w, err := c.Watch(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next(t, w) // the snapshot; from here on the reader stalls
	for i := range bound + 2 {
		s.put(t, ns, fmt.Sprintf("k%d", i), i)
	}
	// A write returns after its publication, so the watch is closed now.
	if n := s.store.Stats().Watches.Open; n != 0 {
		t.Fatalf("%d watches open after %d unacknowledged updates", n, bound+2)
	}
	var ev client.WatchEvent
	// Updates the client received before the closure may come first, in
	// order; then the replacement.
	for seq := uint64(1); ; seq++ {
		ev = next(t, w)
		if ev.Kind != client.EventUpdate {
			break
		}
		if ev.Sequence != seq || seq > bound {
			t.Fatalf("update %+v before the re-snapshot, want sequence %d of at most %d", ev, seq, bound)
		}
	}
	if ev.Kind != client.EventResnapshot || !strings.HasPrefix(ev.Cause, "closed BUFFER_OVERFLOW: ") || len(ev.Entries) != bound+2 {
		t.Fatalf("got %+v, want an EventResnapshot of %d entries caused by BUFFER_OVERFLOW", ev, bound+2)
	}
	e := s.put(t, ns, "after", 9)
	if u := next(t, w); u.Kind != client.EventUpdate || u.Sequence != 1 || u.Revision != e.Revision {
		t.Fatalf("after the re-snapshot: %+v, want update 1 at %d", u, e.Revision)
	}
}

// TestUnacknowledgedUpdateTimesOutAndResnapshots: the update Next returned
// is not acknowledged until Next is called again, so a reader that holds
// on to it past the ack deadline loses the watch (ACK_TIMEOUT) and
// re-snapshots.
func TestUnacknowledgedUpdateTimesOutAndResnapshots(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	s := startServer(t, serverOptions{clock: clk, limits: quota.Limits{AckDeadline: 5 * time.Second}})
	c := dial(t, nil, s.url)
	w, err := c.Watch(ctx, "service/slow", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next(t, w)
	s.put(t, "service/slow", "k", 1)
	if u := next(t, w); u.Sequence != 1 {
		t.Fatalf("got %+v, want update 1", u)
	}
	clk.Advance(5 * time.Second) // the reader is still applying update 1
	// The registry's timer fires on its own goroutine; the ack the next
	// Next sends must not overtake it.
	eventually(t, "the server closes the watch", func() bool { return s.store.Stats().Watches.Open == 0 })
	ev := next(t, w)
	if ev.Kind != client.EventResnapshot || !strings.HasPrefix(ev.Cause, "closed ACK_TIMEOUT: ") || len(ev.Entries) != 1 {
		t.Fatalf("got %+v, want an EventResnapshot caused by ACK_TIMEOUT", ev)
	}
}

// TestSequenceGapResnapshots (against a scripted server, since a real one
// never skips): a gap replaces the watch, the old one is unwatched, its
// late messages are never delivered, and the replacement's snapshot comes
// as an EventResnapshot naming the gap.
func TestSequenceGapResnapshots(t *testing.T) {
	t.Parallel()
	s := startScripted(t)
	c := dial(t, nil, s.url)
	sc := s.accept(t)
	opened := make(chan *client.Watch, 1)
	go func() {
		w, err := c.Watch(ctx, "service/gap", "")
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	first := sc.recv().GetWatchState()
	sc.send(snapshotAnswer(first, 10))
	w := <-opened
	if w == nil {
		t.FailNow()
	}
	defer w.Close()
	if ev := next(t, w); ev.Kind != client.EventSnapshot || ev.Revision != 10 {
		t.Fatalf("snapshot %+v", ev)
	}
	old := first.GetWatchId()
	sc.send(deleteUpdate(old, 1, 11, "a"))
	if ev := next(t, w); ev.Sequence != 1 || ev.Key != "a" {
		t.Fatalf("update %+v, want sequence 1", ev)
	}
	sc.send(deleteUpdate(old, 3, 13, "c")) // 2 is missing
	results := make(chan client.WatchEvent, 1)
	go func() {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		results <- ev
	}()
	// The client unwatches the old watch and opens a new one; it
	// acknowledges 1 first if Next began before the gap arrived.
	var got []string
	var replacement *pb.WatchState
	for replacement == nil {
		m := sc.recv()
		switch {
		case m.GetWatchStateAck() != nil:
			got = append(got, fmt.Sprintf("ack %s %d", m.GetWatchStateAck().GetWatchId(), m.GetWatchStateAck().GetAppliedSequence()))
		case m.GetUnwatchState() != nil:
			got = append(got, "unwatch "+m.GetUnwatchState().GetWatchId())
		case m.GetWatchState() != nil:
			replacement = m.GetWatchState()
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if s := strings.Join(got, "; "); s != "unwatch "+old && s != "ack "+old+" 1; unwatch "+old {
		t.Fatalf("before the replacement the client sent %v, want the old watch unwatched (after acknowledging 1)", got)
	}
	if replacement.GetWatchId() == old || replacement.GetNamespace() != "service/gap" {
		t.Fatalf("replacement %v reuses the watch id or changed the watch", replacement)
	}
	sc.send(deleteUpdate(old, 2, 12, "b")) // late, of the replaced watch
	sc.send(snapshotAnswer(replacement, 20))
	sc.send(deleteUpdate(old, 4, 14, "d")) // later still
	sc.send(deleteUpdate(replacement.GetWatchId(), 1, 21, "e"))
	var ev client.WatchEvent
	select {
	case ev = <-results:
	case <-time.After(hangGuard):
		t.Fatal("no re-snapshot")
	}
	if ev.Kind != client.EventResnapshot || ev.Revision != 20 || !strings.HasPrefix(ev.Cause, "sequence gap: watch_sequence 3 arrived when 2 was due") {
		t.Fatalf("got %+v, want the replacement's snapshot naming the gap", ev)
	}
	if u := next(t, w); u.Sequence != 1 || u.Key != "e" || u.Revision != 21 {
		t.Fatalf("after the re-snapshot: %+v, want only the replacement's update", u)
	}
}

// TestClientBufferIsBounded: a Watch holds at most Config.WatchBuffer
// updates Next has not returned; past that it re-snapshots instead of
// growing, whatever the server sends.
func TestClientBufferIsBounded(t *testing.T) {
	t.Parallel()
	s := startScripted(t)
	const buffer = 3
	c := dial(t, func(c *client.Config) { c.WatchBuffer = buffer }, s.url)
	sc := s.accept(t)
	opened := make(chan *client.Watch, 1)
	go func() {
		w, err := c.Watch(ctx, "service/flood", "")
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	ws := sc.recv().GetWatchState()
	sc.send(snapshotAnswer(ws, 1))
	for seq := uint64(1); seq <= buffer+5; seq++ {
		sc.send(deleteUpdate(ws.GetWatchId(), seq, seq+1, fmt.Sprintf("k%d", seq)))
	}
	w := <-opened
	if w == nil {
		t.FailNow()
	}
	defer w.Close()
	// An answer sent after the flood arrives after it: once Get returns,
	// the client has routed every update.
	got := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "service/flood", "k")
		got <- err
	}()
	g := sc.recv().GetGetState()
	sc.send(&pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: g.GetRequestId(),
		Result: &pb.StateStoreResult_Error{Error: &pb.StateStoreError{Code: pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND}}}}})
	<-got
	if ev := next(t, w); ev.Kind != client.EventSnapshot {
		t.Fatalf("first event %+v", ev)
	}
	resnap := make(chan client.WatchEvent, 1)
	go func() {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		resnap <- ev
	}()
	if m := sc.recv(); m.GetUnwatchState().GetWatchId() != ws.GetWatchId() {
		t.Fatalf("got %v, want the overflowing watch unwatched", m)
	}
	again := sc.recv().GetWatchState()
	sc.send(snapshotAnswer(again, 99))
	ev := <-resnap
	if ev.Kind != client.EventResnapshot || ev.Revision != 99 || !strings.HasPrefix(ev.Cause, "client buffer full: 3 updates") {
		t.Fatalf("got %+v, want a re-snapshot caused by the full buffer", ev)
	}
}

// TestDefaultWatchBufferIsTheStoresBound: by default a Watch buffers
// exactly what a server with the store's default limits may send it
// unacknowledged.
func TestDefaultWatchBufferIsTheStoresBound(t *testing.T) {
	t.Parallel()
	if d := quota.Default().MaxUnackedUpdates; client.DefaultWatchBuffer != d {
		t.Fatalf("DefaultWatchBuffer is %d, the store's default MaxUnackedUpdates %d", client.DefaultWatchBuffer, d)
	}
}
