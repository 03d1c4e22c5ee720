package attack

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wirestore"
	"github.com/keeppeek/statestore/wire/wstransport"

	"github.com/keeppeek/statestore"
)

// HangGuard bounds every wait of an attack for an answer the server owes:
// far longer than any answer takes, so only a real hang trips it.
const HangGuard = 10 * time.Second

// Session is an authenticated wire session (wstransport.Dial), for the
// attacks that speak the protocol correctly and look at its answers.
type Session struct {
	*wstransport.ClientConn
	msgs chan received
}

type received struct {
	m   *pb.ServerMessage
	err error
}

// DialSession opens a session as principal id.
func (s *Server) DialSession(ctx context.Context, id string) (*Session, error) {
	c, err := wstransport.Dial(ctx, s.WSURL, s.dialOptions(id))
	if err != nil {
		return nil, err
	}
	ss := &Session{ClientConn: c, msgs: make(chan received, 64)}
	go func() {
		for {
			m, err := c.Recv()
			ss.msgs <- received{m, err}
			if err != nil {
				return
			}
		}
	}()
	return ss, nil
}

// Next returns the next server message, or the error that ended the
// connection, within HangGuard.
func (ss *Session) Next() (*pb.ServerMessage, error) {
	select {
	case r := <-ss.msgs:
		return r.m, r.err
	case <-time.After(HangGuard):
		return nil, fmt.Errorf("attack: no server message in %v", HangGuard)
	}
}

// Call sends m and returns the next message, which must be its result.
func (ss *Session) Call(m *pb.ClientMessage) (*pb.StateStoreResult, error) {
	if err := ss.Send(m); err != nil {
		return nil, err
	}
	got, err := ss.Next()
	if err != nil {
		return nil, err
	}
	if got.GetResult() == nil {
		return nil, fmt.Errorf("attack: answered %v, want a StateStoreResult", got)
	}
	return got.GetResult(), nil
}

// Results sends every message, pipelined, and returns their results by
// request_id.
func (ss *Session) Results(ms []*pb.ClientMessage) (map[uint64]*pb.StateStoreResult, error) {
	for _, m := range ms {
		if err := ss.Send(m); err != nil {
			return nil, err
		}
	}
	out := map[uint64]*pb.StateStoreResult{}
	for len(out) < len(ms) {
		got, err := ss.Next()
		if err != nil {
			return out, err
		}
		if r := got.GetResult(); r != nil {
			out[r.GetRequestId()] = r
		}
	}
	return out, nil
}

// GetMsg, PutMsg and WatchMsg build the requests the attacks send.
func GetMsg(id uint64, ns, key string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: ns, Key: key}}}
}

// PutMsg is a blind PutState of a media intent.
func PutMsg(id uint64, ns, key string, doc []byte) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: id, Namespace: ns, Key: key,
		Schema: "keeppeek.media-intent.v1", Document: doc}}}
}

// WatchMsg is a WatchState.
func WatchMsg(id uint64, watchID, ns, prefix string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{RequestId: id, WatchId: watchID, Namespace: ns, KeyPrefix: prefix}}}
}

// WantError checks that r is request id's failure with code, naming
// field; contains, when set, must be in its message.
func WantError(r *pb.StateStoreResult, id uint64, code statestore.Code, field, contains string) error {
	e := r.GetError()
	if e == nil {
		return fmt.Errorf("request %d answered %v, want %v (field %q)", id, r, code, field)
	}
	if r.GetRequestId() != id || e.GetCode() != wirestore.Code(code) || e.GetField() != field || !strings.Contains(e.GetMessage(), contains) {
		return fmt.Errorf("request %d answered request_id %d %v field %q %q, want request_id %d %v field %q containing %q",
			id, r.GetRequestId(), e.GetCode(), e.GetField(), e.GetMessage(), id, wirestore.Code(code), field, contains)
	}
	return nil
}

// WantOK checks that r is request id's success.
func WantOK(r *pb.StateStoreResult, id uint64) error {
	if r.GetRequestId() != id || r.GetError() != nil {
		return fmt.Errorf("request %d answered %v, want success", id, r)
	}
	return nil
}
