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

// entryAnswer is the envelope of an entry's answer (a Get's or a Put's):
// the four messages entryMessage nests around the StateEntry, in one
// allocation instead of four. Each answer has its own; nothing is pooled,
// so an answer queued or being sent is never overwritten.
type entryAnswer struct {
	msg    pb.ServerMessage
	result pb.ServerMessage_Result
	res    pb.StateStoreResult
	entry  pb.StateStoreResult_Entry
}

func entryMessage(requestID uint64, e *statestore.Entry) *pb.ServerMessage {
	a := &entryAnswer{}
	a.res.RequestId = requestID
	a.entry.Entry = wire.Entry(e)
	a.res.Result = &a.entry
	a.result.Result = &a.res
	a.msg.Message = &a.result
	return &a.msg
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
