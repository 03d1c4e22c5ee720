package dispatch_test

import (
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// openFaultyStore is openStore giving the store fault seams of its own,
// which it returns for stallNextSync.
func openFaultyStore(t *testing.T, clk clock.Clock) (*statestore.Store, *fault.Hooks) {
	t.Helper()
	faults := &fault.Hooks{}
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), Clock: clk, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, faults
}

// stallNextSync makes the next journal sync of the store whose seams are
// faults block until release is called, and returns a channel closed once
// that sync has begun.
func stallNextSync(t *testing.T, faults *fault.Hooks) (entered <-chan struct{}, release func()) {
	t.Helper()
	entered, release, restore := faults.StallNextSync()
	t.Cleanup(func() {
		release()
		restore()
	})
	return entered, release
}

// TestRequestsAnsweredWhileAPutWaitsForSync holds a PutState in its
// fdatasync and sends an ack, a get and an unwatch of another watch on the
// same session: each is answered while the put still waits, because the
// goroutine that read the put runs it and another one goes on reading.
// The put is answered once its sync returns, and its update follows the
// acknowledged one.
func TestRequestsAnsweredWhileAPutWaitsForSync(t *testing.T) {
	t.Parallel()
	s, faults := openFaultyStore(t, clock.NewFake(start))
	c := dial(t, dispatch.New(s, dispatch.Options{}), alice)
	const ns = "user/alice"
	wantSnapshot(t, c.call(watchReq(1, "w", ns, "")), 1, "w")
	wantSnapshot(t, c.call(watchReq(2, "other", ns, "elsewhere/")), 2, "other")
	c.send(putReq(3, ns, "k", doc("a"), nil, 0))
	answer, update := c.answerAndUpdate()
	wantEntry(t, answer, 3)
	wantUpdate(t, update, "w", 1, kindPut)

	entered, release := stallNextSync(t, faults)
	c.send(putReq(4, ns, "k", doc("b"), rev(1), 0))
	<-entered
	if ack := c.call(ackReq(5, "w", 1)).GetAckResult(); ack.GetRequestId() != 5 || ack.GetAppliedSequence() != 1 {
		t.Fatalf("the ack sent during the put's sync was answered %v", ack)
	}
	if e := wantEntry(t, c.call(getReq(6, ns, "k")), 6); e.GetRevision() != 1 {
		t.Fatalf("get during the put's sync read revision %d, want the published 1", e.GetRevision())
	}
	if ok := c.call(unwatchReq(7, "other")).GetResult(); ok.GetRequestId() != 7 || ok.GetOk() == nil {
		t.Fatalf("the unwatch sent during the put's sync was answered %v", ok)
	}
	release()
	answer, update = c.answerAndUpdate()
	if e := wantEntry(t, answer, 4); e.GetRevision() != 2 {
		t.Fatalf("the stalled put committed revision %d, want 2", e.GetRevision())
	}
	wantUpdate(t, update, "w", 2, kindPut)
}

// TestMaxInFlightStopsTheReading holds a PutState in its fdatasync on a
// session that runs one request at a time: a get sent meanwhile is not
// read until the put is answered, so the answers come in that order. With
// room for two, the get overtakes the put.
func TestMaxInFlightStopsTheReading(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxInFlight int
		first       uint64
	}{{1, 1}, {2, 2}} {
		s, faults := openFaultyStore(t, clock.NewFake(start))
		c := dial(t, dispatch.New(s, dispatch.Options{MaxInFlight: tc.maxInFlight}), alice)
		entered, release := stallNextSync(t, faults)
		c.send(putReq(1, "user/alice", "k", doc("a"), nil, 0))
		<-entered
		c.send(getReq(2, "user/alice", "k"))
		if tc.first == 2 {
			wantError(t, c.next(), 2, codeNotFound, "key")
		}
		release()
		wantEntry(t, c.next(), 1)
		if tc.first == 1 {
			// Read only after the put was answered, the get finds it.
			wantEntry(t, c.next(), 2)
		}
		if err := c.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPeerThatWritesBeforeReading writes many requests and bad frames on
// an unbuffered pipe before reading anything: the reading goroutine only
// queues answers (the writer goroutine sends them), so it never blocks on
// the peer's reading while the peer blocks on its writing, and every frame
// is answered once the peer reads.
func TestPeerThatWritesBeforeReading(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	conn, _ := rawSession(t, dispatch.New(s, dispatch.Options{}), alice, 0)
	c := framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](conn, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	const frames = 64
	wrote := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= frames; i++ {
			m := getReq(i, "user/alice", "k")
			if i%2 == 0 {
				m = getReq(0, "user/alice", "k") // answered by the reading goroutine
			}
			if err := c.Send(m); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the dispatcher stopped reading while nobody read its answers")
	}
	refused, notFound := 0, 0
	for range frames {
		m, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch e := m.GetResult().GetError(); {
		case m.GetResult().GetRequestId() == 0 && e.GetField() == "request_id":
			refused++
		case e.GetCode() == codeNotFound:
			notFound++
		default:
			t.Fatalf("unexpected answer %v", m)
		}
	}
	if refused != frames/2 || notFound != frames/2 {
		t.Fatalf("%d refusals and %d gets answered, want %d each", refused, notFound, frames/2)
	}
}
