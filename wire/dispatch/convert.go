package dispatch

import (
	"fmt"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wirestore"
)

// The envelopes of the session's answers. What they carry is converted by
// package wire (entries, watch messages) and wire/wirestore (errors,
// requests), the one place each conversion is written.

func resultMessage(r *pb.StateStoreResult) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: r}}
}

// errorMessage answers requestID with err. An error that is not the
// store's (which the store never returns) is UNAVAILABLE, as CodeOf has it.
func errorMessage(requestID uint64, err error) *pb.ServerMessage {
	return resultMessage(&pb.StateStoreResult{RequestId: requestID, Result: &pb.StateStoreResult_Error{Error: wirestore.Error(err)}})
}

func invalidArgument(requestID uint64, field, format string, args ...any) *pb.ServerMessage {
	return errorMessage(requestID, &statestore.Error{Code: statestore.InvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)})
}

func entryMessage(requestID uint64, e *statestore.Entry) *pb.ServerMessage {
	return resultMessage(&pb.StateStoreResult{RequestId: requestID, Result: &pb.StateStoreResult_Entry{Entry: wire.Entry(e)}})
}

// SnapshotMessage is the ServerMessage answering a WatchState with its
// snapshot; its encoded size is what the store bounds (package wire).
func SnapshotMessage(s *watch.Snapshot) *pb.ServerMessage {
	return resultMessage(&pb.StateStoreResult{RequestId: s.RequestID, Result: &pb.StateStoreResult_Watch{Watch: wire.Snapshot(s)}})
}

// UpdateMessage is the StateStoreWatchUpdate of u: the entry for PUT, the
// key for DELETE and EXPIRE.
func UpdateMessage(u *watch.Update) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: wire.Update(u)}}
}

// ClosedMessage is the StateStoreWatchClosed of c.
func ClosedMessage(c *watch.Closed) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchClosed{WatchClosed: wire.Closed(c)}}
}
