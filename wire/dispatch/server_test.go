package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestEveryRequestIsAnswered runs each request kind through the wire, in
// its successful and a failing form, and checks the answer's shape and
// request_id.
func TestEveryRequestIsAnswered(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	c := dial(t, dispatch.New(s, dispatch.Options{}), alice)
	const ns = "user/alice"

	wantError(t, c.call(getReq(1, ns, "k")), 1, codeNotFound, "key")
	e := wantEntry(t, c.call(putReq(2, ns, "k", doc("a"), rev(0), 0)), 2)
	if e.GetRevision() != 1 || e.GetOwner() != "alice" || !bytes.Equal(e.GetDocument(), doc("a")) {
		t.Fatalf("put answered %v", e)
	}
	ce := wantError(t, c.call(putReq(3, ns, "k", doc("b"), rev(0), 0)), 3, codeConflict, "expected_revision")
	if ce.GetCurrentRevision() != 1 {
		t.Fatalf("conflict carries current revision %d, want 1", ce.GetCurrentRevision())
	}
	// Absent expected_revision is a blind write, unlike 0.
	if e := wantEntry(t, c.call(putReq(4, ns, "k", doc("b"), nil, 0)), 4); e.GetRevision() != 2 {
		t.Fatalf("blind put: revision %d, want 2", e.GetRevision())
	}
	wantError(t, c.call(putReq(5, ns, "k", doc("b"), nil, 999)), 5, pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_TTL_INVALID, "ttl")
	// A TTL past time.Duration's range is clamped, not wrapped negative.
	if e := wantEntry(t, c.call(putReq(6, ns, "lease", doc("c"), nil, 1<<63)), 6); e.GetExpiresAtMs() != start.UnixMilli()+24*3600*1000 {
		t.Fatalf("huge ttl: expires_at_ms %d, want now + 24 h", e.GetExpiresAtMs())
	}
	if e := wantEntry(t, c.call(getReq(7, ns, "k")), 7); !bytes.Equal(e.GetDocument(), doc("b")) {
		t.Fatalf("get answered %v", e)
	}
	wantError(t, c.call(putReq(8, "user/bob", "k", doc("a"), nil, 0)), 8, pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_PERMISSION_DENIED, "namespace")

	w := wantSnapshot(t, c.call(watchReq(10, "w", ns, "")), 10, "w")
	if w.GetSnapshotRevision() != 3 || len(w.GetEntries()) != 2 {
		t.Fatalf("snapshot %v, want revision 3 with 2 entries", w)
	}
	wantError(t, c.call(watchReq(11, "w", ns, "")), 11, codeInvalidArgument, "watch_id")

	c.send(deleteReq(12, ns, "k", rev(2)))
	m, um := c.answerAndUpdate()
	if r := m.GetResult(); r.GetRequestId() != 12 || r.GetDeletedRevision() != 4 {
		t.Fatalf("delete answered %v, want deleted_revision 4", m)
	}
	u := wantUpdate(t, um, "w", 1, kindDelete)
	if u.GetKey() != "k" || u.GetRevision() != 4 || u.GetEntry() != nil {
		t.Fatalf("delete update %v", u)
	}
	wantError(t, c.call(deleteReq(13, ns, "k", nil)), 13, codeNotFound, "key")

	ack := c.call(ackReq(14, "w", 1)).GetAckResult()
	if ack.GetRequestId() != 14 || ack.GetWatchId() != "w" || ack.GetAppliedSequence() != 1 {
		t.Fatalf("ack answered %v", ack)
	}
	wantError(t, c.call(ackReq(15, "w", 9)), 15, codeInvalidArgument, "applied_sequence")
	if ok := c.call(unwatchReq(16, "w")).GetResult(); ok.GetRequestId() != 16 || ok.GetOk() == nil {
		t.Fatalf("unwatch answered %v", ok)
	}
	wantError(t, c.call(unwatchReq(17, "w")), 17, codeNotFound, "watch_id")
	wantError(t, c.call(ackReq(18, "w", 1)), 18, codeNotFound, "watch_id")
	if err := c.close(); err != nil {
		t.Fatalf("Serve after a clean close: %v", err)
	}
}

// rawSession serves p on one end of a pipe and returns the other end, for
// tests that write bytes a well-behaved client would not.
func rawSession(t *testing.T, srv *dispatch.Server, p statestore.Principal, maxFrame int) (net.Conn, chan error) {
	srvSide, cliSide := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), p, dispatch.NewStreamConn(srvSide, maxFrame)) }()
	t.Cleanup(func() { cliSide.Close() })
	return cliSide, served
}

func rawFrame(payload []byte) []byte {
	return append(protowire.AppendVarint(nil, uint64(len(payload))), payload...)
}

// TestBadInputGetsItsDocumentedAnswer writes each kind of bad input on a
// session that also holds a watch, and checks the answer, that the session
// goes on (or ends, where documented), and that the watch still works.
func TestBadInputGetsItsDocumentedAnswer(t *testing.T) {
	t.Parallel()
	const maxFrame = 1024
	noRequest, _ := protoMarshal(&pb.ClientMessage{})
	unknownKind := protowire.AppendTag(nil, 99, protowire.BytesType)
	unknownKind = protowire.AppendBytes(unknownKind, []byte{0x08, 0x05})
	zeroID, _ := protoMarshal(getReq(0, "user/alice", "k"))
	tests := []struct {
		name  string
		input []byte
		field string
		ends  bool
	}{
		{"not a ClientMessage", rawFrame([]byte{0xff, 0xff, 0xff}), "frame", false},
		{"wrong wire type for a request", rawFrame([]byte{0x0a, 0x02, 0x08}), "frame", false},
		{"empty oneof", rawFrame(noRequest), "message", false},
		{"unknown request kind", rawFrame(unknownKind), "message", false},
		{"request_id 0", rawFrame(zeroID), "request_id", false},
		{"frame over the maximum", rawFrame(make([]byte, maxFrame+1)), "frame", true},
		{"malformed length prefix", bytes.Repeat([]byte{0xff}, 11), "frame", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, clock.NewFake(start))
			srv := dispatch.New(s, dispatch.Options{})
			bystander := dial(t, srv, alice)
			wantSnapshot(t, bystander.call(watchReq(1, "w", "user/alice", "")), 1, "w")

			conn, served := rawSession(t, srv, alice, maxFrame)
			c := framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](conn, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
			if err := c.Send(watchReq(1, "mine", "user/alice", "")); err != nil {
				t.Fatal(err)
			}
			if m, err := c.Recv(); err != nil || m.GetResult().GetWatch() == nil {
				t.Fatalf("watch before the bad input: %v %v", m, err)
			}
			go conn.Write(tc.input)
			m, err := c.Recv()
			if err != nil {
				t.Fatalf("no answer to the bad input: %v", err)
			}
			e := wantError(t, m, 0, codeInvalidArgument, tc.field)
			if e.GetMessage() == "" {
				t.Fatal("the answer does not say what was wrong")
			}
			if tc.ends {
				if _, err := c.Recv(); err == nil {
					t.Fatal("the session went on after a framing violation")
				}
				var pe *dispatch.ProtocolError
				if err := <-served; !errors.As(err, &pe) {
					t.Fatalf("Serve returned %v, want a ProtocolError", err)
				}
			} else {
				if err := c.Send(getReq(2, "user/alice", "nothing")); err != nil {
					t.Fatal(err)
				}
				m, err := c.Recv()
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, m, 2, codeNotFound, "key")
			}
			// The other session's watch is untouched.
			bystander.send(putReq(2, "user/alice", "k", doc("a"), nil, 0))
			answer, update := bystander.answerAndUpdate()
			wantEntry(t, answer, 2)
			wantUpdate(t, update, "w", 1, kindPut)
		})
	}
}

// TestReusedInFlightRequestID holds a PutState in its fdatasync and sends
// another request with the same id: the second is refused with request_id
// 0 naming the id, the first is answered normally.
func TestReusedInFlightRequestID(t *testing.T) {
	t.Parallel()
	s, faults := openFaultyStore(t, clock.NewFake(start))
	c := dial(t, dispatch.New(s, dispatch.Options{}), alice)
	wantEntry(t, c.call(putReq(1, "user/alice", "k", doc("a"), nil, 0)), 1)

	entered, release := stallNextSync(t, faults)
	c.send(putReq(7, "user/alice", "k", doc("b"), nil, 0))
	<-entered
	e := wantError(t, c.call(getReq(7, "user/alice", "k")), 0, codeInvalidArgument, "request_id")
	if !strings.Contains(e.GetMessage(), "7") {
		t.Fatalf("the refusal %q does not name the id", e.GetMessage())
	}
	release()
	if got := wantEntry(t, c.next(), 7); !bytes.Equal(got.GetDocument(), doc("b")) {
		t.Fatalf("the first request 7 was answered with %v", got)
	}
	// Answered, the id is free again.
	wantEntry(t, c.call(getReq(7, "user/alice", "k")), 7)
}

func TestCapabilityOnlyWhileTheStoreIsOpen(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := dispatch.New(s, dispatch.Options{})
	if got := srv.Capabilities(); !slices.Equal(got, []string{"keeppeek.state-store.v1"}) {
		t.Fatalf("open store advertises %q", got)
	}
	s.Close()
	if got := srv.Capabilities(); len(got) != 0 {
		t.Fatalf("closed store advertises %q", got)
	}
	c := dial(t, srv, alice)
	wantError(t, c.call(getReq(1, "user/alice", "k")), 1, codeUnavailable, "store")
}

// TestDisconnectRemovesTheSessionsWatches fills the per-session watch
// limit, disconnects, and checks a new session of the same principal can
// open as many again while the store counts none of the old ones.
func TestDisconnectRemovesTheSessionsWatches(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	srv := dispatch.New(s, dispatch.Options{})
	limit := s.Limits().MaxWatchesPerSession
	for round := 0; round < 2; round++ {
		c := dial(t, srv, admin)
		for i := 0; i < limit; i++ {
			wantSnapshot(t, c.call(watchReq(uint64(i+1), "w"+string(rune('a'+i)), "service/a", "")), uint64(i+1), "w"+string(rune('a'+i)))
		}
		wantError(t, c.call(watchReq(99, "one-more", "service/a", "")), 99, pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_LIMIT, "watches per session")
		if err := c.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStalledPeerIsBounded never reads from a session holding a watch
// while updates keep coming: the watch is closed (BUFFER_OVERFLOW), the
// writer never blocks, and when the peer reads again it finds the
// snapshot, contiguous updates and the closure last.
func TestStalledPeerIsBounded(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	srv := dispatch.New(s, dispatch.Options{MaxQueued: 4})
	conn, _ := rawSession(t, srv, admin, 0)
	c := framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](conn, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	if err := c.Send(watchReq(1, "w", "service/a", "")); err != nil {
		t.Fatal(err)
	}
	// The snapshot is read first: it proves the watch is registered, so
	// every commit below reaches it (puts racing the registration could
	// all precede it, and the loop below would wait for ever).
	m, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantSnapshot(t, m, 1, "w")
	// Then not reading: 40 commits, more than the store's 32-update bound
	// and far more than the 4-message queue.
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "service/a", Key: "k", Schema: "keeppeek.media-intent.v1", Document: doc("a")}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); ; seq++ {
		m, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if cl := m.GetWatchClosed(); cl != nil {
			if cl.GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW || seq > 33 {
				t.Fatalf("closed %v after %d updates", cl, seq-1)
			}
			break
		}
		wantUpdate(t, m, "w", seq, kindPut)
	}
	if err := c.Send(ackReq(2, "w", 1)); err != nil {
		t.Fatal(err)
	}
	m, err = c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, m, 2, codeNotFound, "watch_id")
}

// TestEndedSessionSendsWhatWasQueued revokes a principal, whose watch
// closure is then queued behind a peer that is not reading (net.Pipe
// blocks every write until it is read), and ends its session: for
// ErrEnded the peer still reads the closure before the end; for a plain
// cancellation the queued closure is dropped with the connection.
func TestEndedSessionSendsWhatWasQueued(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		cause       error
		wantClosure bool
	}{
		{"ErrEnded", errors.Join(dispatch.ErrEnded, errors.New("alice was removed")), true},
		{"plain cancellation", context.Canceled, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, clock.NewFake(start))
			srv := dispatch.New(s, dispatch.Options{})
			srvSide, cliSide := net.Pipe()
			t.Cleanup(func() { cliSide.Close() })
			ctx, cancel := context.WithCancelCause(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, alice, dispatch.NewStreamConn(srvSide, 0)) }()
			conn := framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](cliSide, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
			if err := conn.Send(watchReq(1, "own", "user/alice", "")); err != nil {
				t.Fatal(err)
			}
			m, err := conn.Recv()
			if err != nil {
				t.Fatal(err)
			}
			wantSnapshot(t, m, 1, "own")
			if n := s.SetPrincipal(alice.ID, statestore.Principal{}, true); n != 1 {
				t.Fatalf("SetPrincipal closed %d watches, want 1", n)
			}
			cancel(c.cause)
			m, err = conn.Recv()
			switch {
			case c.wantClosure && (err != nil || m.GetWatchClosed().GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_AUTHORIZATION_LOST):
				t.Fatalf("after the end the peer read %v, %v; want the AUTHORIZATION_LOST closure", m, err)
			case !c.wantClosure && err == nil && m.GetWatchClosed() == nil:
				// A plain cancellation promises nothing about what was
				// queued: the closure may already be on the pipe when the
				// cancellation lands, so only the connection's end is
				// checked, below.
				t.Fatalf("after a plain cancellation the peer read %v; want at most the closure, then the end", m)
			}
			if err == nil {
				if m, err := conn.Recv(); err == nil {
					t.Fatalf("after the closure the peer read %v; want the connection closed", m)
				}
			}
			select {
			case <-served:
			case <-time.After(hangGuard):
				t.Fatal("Serve did not return after the end")
			}
			if n := s.Stats().Watches.Sessions; n != 0 {
				t.Fatalf("%d store sessions open after Serve returned", n)
			}
		})
	}
}
