package dispatch

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// guard bounds every wait of these tests: only a hang trips it.
const guard = 20 * time.Second

// blob is a ServerMessage of about size encoded bytes.
func blob(size int) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: 1,
		Result: &pb.StateStoreResult_Entry{Entry: &pb.StateEntry{Document: make([]byte, size)}}}}}
}

// gate is a send that blocks until opened, as a peer that stopped reading.
type gate struct {
	open chan struct{}
	sent atomic.Int64
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) send(*pb.ServerMessage) error {
	<-g.open
	g.sent.Add(1)
	return nil
}

// returns runs f on a goroutine and reports whether it returns within d.
func returns(f func(), d time.Duration) (done chan struct{}, in bool) {
	done = make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
		return done, true
	case <-time.After(d):
		return done, false
	}
}

// TestByteBudgetAccounting: two sessions share a 256 KiB budget (128 KiB
// each). A stalled one queues answers up to its share, then waits; its
// updates are refused (the registry then closes the watch with
// BUFFER_OVERFLOW); its reader pauses; a session holding nothing still
// queues one message when the budget is spent; snapshots are counted
// beyond it; draining gives everything back.
func TestByteBudgetAccounting(t *testing.T) {
	t.Parallel()
	b := newByteBudget(256 << 10)
	b.join()
	b.join()
	stalled, idle := newGate(), newGate()
	a := newOutbox(1000, 10, b, stalled.send, func() {})
	c := newOutbox(1000, 10, b, idle.send, func() {})
	aDone, cDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.run() }()
	go func() { cDone <- c.run() }()
	m := blob(16 << 10)
	n := int64(proto.Size(m))
	queued := 0
	for a.bytes+n <= 128<<10 {
		if err := a.queue(m, nil); err != nil {
			t.Fatal(err)
		}
		queued++
	}
	if used, _ := b.usage(); used != int64(queued)*n {
		t.Fatalf("%d answers of %d bytes queued, the budget counts %d", queued, n, used)
	}
	if err := a.offer(m); !errors.Is(err, errOutboxFull) {
		t.Fatalf("an update over the share: %v, want errOutboxFull", err)
	}
	ctx := context.Background()
	if _, in := returns(func() { b.waitUnder(ctx, a) }, guard); !in {
		t.Fatal("the reader of a session under its share was paused")
	}
	blocked, in := returns(func() { a.queue(m, nil) }, 50*time.Millisecond)
	if in {
		t.Fatal("an answer over the share was queued")
	}
	// Snapshots counted beyond the share spend the whole budget; the
	// reader then pauses.
	rest := b.max - int64(queued)*n + 1
	b.force(a, rest)
	paused, in := returns(func() { b.waitUnder(ctx, a) }, 50*time.Millisecond)
	if in {
		t.Fatal("the reader of a session over its share was not paused")
	}
	// A session holding nothing always gets one message through.
	if err := c.queue(m, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.offer(m); !errors.Is(err, errOutboxFull) {
		t.Fatalf("an update with the budget spent: %v, want errOutboxFull", err)
	}
	b.release(a, rest)  // those snapshots were sent
	close(stalled.open) // the peer reads again
	select {
	case <-blocked:
	case <-time.After(guard):
		t.Fatal("the waiting answer was not queued once the queue drained")
	}
	select {
	case <-paused:
	case <-time.After(guard):
		t.Fatal("the paused reader did not resume once the queue drained")
	}
	a.close(false)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if a.bytes != 0 || stalled.sent.Load() != int64(queued+1) {
		t.Fatalf("after draining, the outbox holds %d bytes; %d of %d sent", a.bytes, stalled.sent.Load(), queued+1)
	}
	c.close(true) // abandoned: what it queued is dropped, and leave gives it back
	close(idle.open)
	<-cDone
	b.leave(a)
	b.leave(c)
	if used, sessions := b.usage(); used != 0 || sessions != 0 {
		t.Fatalf("after both left: %d bytes, %d sessions", used, sessions)
	}
}

// TestByteBudgetShareFollowsTheSessions: the share is the budget over the
// sessions served, never under minShare.
func TestByteBudgetShareFollowsTheSessions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		max      int64
		sessions int
		want     int64
	}{
		{1 << 20, 0, 1 << 20},
		{1 << 20, 1, 1 << 20},
		{1 << 20, 4, 256 << 10},
		{1 << 20, 100, minShare},
	}
	for _, c := range cases {
		b := newByteBudget(c.max)
		b.sessions = c.sessions
		if got := b.shareLocked(); got != c.want {
			t.Errorf("budget %d over %d sessions: share %d, want %d", c.max, c.sessions, got, c.want)
		}
	}
}

// stallConn is a peer that sends GetState requests and never reads: its
// Send blocks until the connection is closed.
type stallConn struct {
	req    func(id uint64) *pb.ClientMessage
	left   int // requests still to send; then Recv blocks
	id     uint64
	closed chan struct{}
	once   sync.Once
}

func (c *stallConn) Recv() (*pb.ClientMessage, error) {
	if c.left == 0 {
		<-c.closed
		return nil, io.EOF
	}
	c.left--
	c.id++
	return c.req(c.id), nil
}

func (c *stallConn) Send(*pb.ServerMessage) error {
	<-c.closed
	return errors.New("closed")
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// TestStalledSessionsStayWithinTheBudget: 20 sessions asking for a 16 KB
// document and never reading, under a 1 MiB budget: the bytes queued
// never exceed the budget plus one answer per session, the budget is
// spent (the test puts it under pressure), a bystander's requests are
// answered meanwhile, and everything is given back when they end.
func TestStalledSessionsStayWithinTheBudget(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), Clock: clock.NewFake(time.Unix(1_750_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := statestore.Principal{ID: "ops", Admin: true}
	if _, err := s.Put(context.Background(), p, statestore.PutRequest{Namespace: "service/big", Key: "k", Schema: schema.MediaIntentV1,
		Document: testdoc.MediaIntent(16000, 1)}); err != nil {
		t.Fatal(err)
	}
	const budget, stalled = 1 << 20, 20
	srv := New(s, Options{MaxQueuedBytes: budget})
	get := func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: "service/big", Key: "k"}}}
	}
	answer := int64(16000 + 200) // an answer's bytes, with room for its envelope
	var wg sync.WaitGroup
	conns := make([]*stallConn, stalled)
	for i := range conns {
		conns[i] = &stallConn{req: get, left: 1000, closed: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Serve(context.Background(), p, conns[i])
		}()
	}
	// Sample the budget while the stalled sessions fill it, and serve a
	// bystander through it.
	var peak int64
	bound := int64(budget) + stalled*answer
	by := &echoConn{in: make(chan *pb.ClientMessage), out: make(chan *pb.ServerMessage, 1)}
	byDone := make(chan error, 1)
	go func() { byDone <- srv.Serve(context.Background(), p, by) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range 500 {
		<-tick.C
		used, _ := srv.QueuedBytes()
		peak = max(peak, used)
		if used > bound {
			t.Fatalf("%d bytes queued, over the budget %d plus one answer per stalled session", used, budget)
		}
		if i%50 == 0 { // the bystander's request, answered within the guard
			by.in <- get(uint64(i + 1))
			select {
			case m := <-by.out:
				if m.GetResult().GetEntry() == nil {
					t.Fatalf("the bystander got %v", m)
				}
			case <-time.After(guard):
				t.Fatal("the bystander was not answered while the stalled sessions held the budget")
			}
		}
	}
	if peak < budget/2 {
		t.Fatalf("the peak was %d bytes: the stalled sessions never pressed on the %d-byte budget", peak, budget)
	}
	t.Logf("peak %d bytes queued under a %d-byte budget with %d stalled sessions (bound %d)", peak, budget, stalled, bound)
	for _, c := range conns {
		c.Close()
	}
	close(by.in)
	wg.Wait()
	<-byDone
	if used, sessions := srv.QueuedBytes(); used != 0 || sessions != 0 {
		t.Fatalf("after every session ended: %d bytes, %d sessions", used, sessions)
	}
}

// echoConn is a well-behaved peer: requests from in, answers to out.
type echoConn struct {
	in  chan *pb.ClientMessage
	out chan *pb.ServerMessage
}

func (c *echoConn) Recv() (*pb.ClientMessage, error) {
	m, ok := <-c.in
	if !ok {
		return nil, io.EOF
	}
	return m, nil
}

func (c *echoConn) Send(m *pb.ServerMessage) error {
	c.out <- m
	return nil
}

func (c *echoConn) Close() error { return nil }
