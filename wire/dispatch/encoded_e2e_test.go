package dispatch_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// chanConn is a Conn that is no EncodedSender: the dispatcher hands it
// every message built, as before updates were sent in their wire form.
type chanConn struct {
	in  chan *pb.ClientMessage
	out chan *pb.ServerMessage
}

func (c *chanConn) Recv() (*pb.ClientMessage, error) {
	m, ok := <-c.in
	if !ok {
		return nil, io.EOF
	}
	return m, nil
}

func (c *chanConn) Send(m *pb.ServerMessage) error {
	c.out <- m
	return nil
}

func (c *chanConn) Close() error { return nil }

func (c *chanConn) next(t *testing.T) *pb.ServerMessage {
	t.Helper()
	select {
	case m := <-c.out:
		return m
	case <-time.After(hangGuard):
		t.Fatal("no message on the plain Conn")
	}
	return nil
}

// TestEncodedUpdatesDecodeAsTheMessages: a watch over the framing (whose
// Conn sends updates in their wire form, encoded once per commit) and the
// same watch over a Conn that takes built messages receive equal updates
// for a PUT, a PUT with a lease, a large document, a DELETE and an
// EXPIRE (TestEncodedUpdatesAreTheMessages compares the bytes).
func TestEncodedUpdatesDecodeAsTheMessages(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	s := openStore(t, clk)
	srv := dispatch.New(s, dispatch.Options{})
	const ns = "service/transcoder-a"
	stream := dial(t, srv, admin)
	plain := &chanConn{in: make(chan *pb.ClientMessage), out: make(chan *pb.ServerMessage, 64)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), admin, plain) }()
	wantSnapshot(t, stream.call(watchReq(1, "w", ns, "")), 1, "w")
	plain.in <- watchReq(1, "w", ns, "")
	wantSnapshot(t, plain.next(t), 1, "w")

	writer := dial(t, srv, admin)
	wantEntry(t, writer.call(putReq(1, ns, "intents/a", doc("a"), rev(0), 0)), 1)
	wantEntry(t, writer.call(putReq(2, ns, "leases/l", doc("lease"), rev(0), 1000)), 2)
	wantEntry(t, writer.call(putReq(3, ns, "intents/big", testdoc.MediaIntent(16000, 1), rev(0), 0)), 3)
	if m := writer.call(deleteReq(4, ns, "intents/a", nil)); m.GetResult().GetDeletedRevision() == 0 {
		t.Fatalf("delete answered %v", m)
	}
	clk.Advance(time.Second)
	wantError(t, writer.call(getReq(5, ns, "leases/l")), 5, codeNotFound, "key")
	kinds := []pb.StateStoreWatchUpdateKind{kindPut, kindPut, kindPut, kindDelete, kindExpire}
	for i, kind := range kinds {
		got := wantUpdate(t, stream.next(), "w", uint64(i+1), kind)
		want := wantUpdate(t, plain.next(t), "w", uint64(i+1), kind)
		if !proto.Equal(got, want) {
			t.Fatalf("update %d: the stream decoded %v, the plain Conn got %v", i+1, got, want)
		}
	}
	close(plain.in)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
