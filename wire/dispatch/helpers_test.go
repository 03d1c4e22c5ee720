package dispatch_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

var (
	admin = statestore.Principal{ID: "coordinator", Admin: true}
	alice = statestore.Principal{ID: "alice"}
	start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

// hangGuard bounds every wait for a message: far longer than any answer
// takes, so only a real hang (a lost answer) trips it.
const hangGuard = 20 * time.Second

func openStore(t testing.TB, clk clock.Clock) *statestore.Store {
	t.Helper()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is the far end of one session: a dispatcher serving p over the
// framing on net.Pipe, and a reader queueing every ServerMessage.
type client struct {
	t      testing.TB
	conn   *framing.Conn[*pb.ServerMessage, *pb.ClientMessage]
	raw    net.Conn
	msgs   chan *pb.ServerMessage
	served chan error // Serve's result
}

func dial(t testing.TB, srv *dispatch.Server, p statestore.Principal) *client {
	t.Helper()
	srvSide, cliSide := net.Pipe()
	c := &client{t: t, raw: cliSide, msgs: make(chan *pb.ServerMessage, 4096), served: make(chan error, 1),
		conn: framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](cliSide, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })}
	go func() { c.served <- srv.Serve(context.Background(), p, dispatch.NewStreamConn(srvSide, 0)) }()
	go func() {
		defer close(c.msgs)
		for {
			m, err := c.conn.Recv()
			if err != nil {
				return
			}
			c.msgs <- m
		}
	}()
	t.Cleanup(func() { c.raw.Close() })
	return c
}

func (c *client) send(m *pb.ClientMessage) {
	c.t.Helper()
	if err := c.conn.Send(m); err != nil {
		c.t.Fatalf("send %v: %v", m, err)
	}
}

func (c *client) next() *pb.ServerMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("the session ended while a message was awaited")
		}
		return m
	case <-time.After(hangGuard):
		c.t.Fatal("no message from the dispatcher")
	}
	return nil
}

// call sends m and returns the next message, for sessions with no watch
// traffic in between.
func (c *client) call(m *pb.ClientMessage) *pb.ServerMessage {
	c.t.Helper()
	c.send(m)
	return c.next()
}

// answerAndUpdate returns the next two messages: the answer to a mutation
// and the update it caused on one of this session's watches, which may
// come in either order (answers are sent as requests complete, updates as
// commits publish).
func (c *client) answerAndUpdate() (answer, update *pb.ServerMessage) {
	c.t.Helper()
	answer, update = c.next(), c.next()
	if answer.GetWatchUpdate() != nil {
		answer, update = update, answer
	}
	return answer, update
}

// close ends the session from the client side and returns Serve's result.
func (c *client) close() error {
	c.raw.Close()
	select {
	case err := <-c.served:
		return err
	case <-time.After(hangGuard):
		c.t.Fatal("Serve did not return after the client closed")
	}
	return errors.New("unreachable")
}

func getReq(id uint64, ns, key string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: ns, Key: key}}}
}

func putReq(id uint64, ns, key string, doc []byte, expected *uint64, ttlMs uint64) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: id, Namespace: ns, Key: key,
		Schema: schema.MediaIntentV1, Document: doc, ExpectedRevision: expected, TtlMs: ttlMs}}}
}

func deleteReq(id uint64, ns, key string, expected *uint64) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_DeleteState{DeleteState: &pb.DeleteState{RequestId: id, Namespace: ns, Key: key, ExpectedRevision: expected}}}
}

func watchReq(id uint64, watchID, ns, prefix string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{RequestId: id, WatchId: watchID, Namespace: ns, KeyPrefix: prefix}}}
}

func unwatchReq(id uint64, watchID string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_UnwatchState{UnwatchState: &pb.UnwatchState{RequestId: id, WatchId: watchID}}}
}

func ackReq(id uint64, watchID string, applied uint64) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{RequestId: id, WatchId: watchID, AppliedSequence: applied}}}
}

func rev(n uint64) *uint64 { return &n }

func doc(source string) []byte {
	return []byte(`{"role":"publish","desired":true,"source_id":"` + source + `","media_kind":"video","recording_mode":"disabled"}`)
}

// wantError checks m answers id with code naming field.
func wantError(t testing.TB, m *pb.ServerMessage, id uint64, code pb.StateStoreErrorCode, field string) *pb.StateStoreError {
	t.Helper()
	r := m.GetResult()
	e := r.GetError()
	if r == nil || r.GetRequestId() != id || e.GetCode() != code || e.GetField() != field {
		t.Fatalf("got %v; want request_id %d error %v field %q", m, id, code, field)
	}
	return e
}

func wantEntry(t testing.TB, m *pb.ServerMessage, id uint64) *pb.StateEntry {
	t.Helper()
	e := m.GetResult().GetEntry()
	if m.GetResult().GetRequestId() != id || e == nil {
		t.Fatalf("got %v; want an entry answering request %d", m, id)
	}
	return e
}

func wantSnapshot(t testing.TB, m *pb.ServerMessage, id uint64, watchID string) *pb.StateStoreWatchSnapshot {
	t.Helper()
	w := m.GetResult().GetWatch()
	if m.GetResult().GetRequestId() != id || w.GetWatchId() != watchID {
		t.Fatalf("got %v; want the snapshot of %q answering request %d", m, watchID, id)
	}
	return w
}

func wantUpdate(t testing.TB, m *pb.ServerMessage, watchID string, seq uint64, kind pb.StateStoreWatchUpdateKind) *pb.StateStoreWatchUpdate {
	t.Helper()
	u := m.GetWatchUpdate()
	if u.GetWatchId() != watchID || u.GetWatchSequence() != seq || u.GetKind() != kind {
		t.Fatalf("got %v; want %v update %d of %q", m, kind, seq, watchID)
	}
	return u
}

const (
	codeNotFound        = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND
	codeConflict        = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_CONFLICT
	codeInvalidArgument = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_INVALID_ARGUMENT
	codeUnavailable     = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE
	codeTooBroad        = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_TOO_BROAD
	kindPut             = pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_PUT
	kindDelete          = pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_DELETE
	kindExpire          = pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_EXPIRE
)

func protoMarshal(m *pb.ClientMessage) ([]byte, error) { return proto.Marshal(m) }
