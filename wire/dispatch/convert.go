package dispatch

import (
	"errors"
	"fmt"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// The one place where the store's codes, update kinds and close reasons
// meet their wire enums. TestEveryValueMaps checks that every value has an
// entry and that the spellings agree.
var (
	wireCodes = [...]pb.StateStoreErrorCode{
		statestore.NotFound:         pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND,
		statestore.Conflict:         pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_CONFLICT,
		statestore.TTLInvalid:       pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_TTL_INVALID,
		statestore.PermissionDenied: pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_PERMISSION_DENIED,
		statestore.InvalidArgument:  pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_INVALID_ARGUMENT,
		statestore.SchemaInvalid:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_SCHEMA_INVALID,
		statestore.ValueTooLarge:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_VALUE_TOO_LARGE,
		statestore.QuotaExceeded:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_QUOTA_EXCEEDED,
		statestore.WatchTooBroad:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_TOO_BROAD,
		statestore.WatchLimit:       pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_LIMIT,
		statestore.Storage:          pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_STORAGE,
		statestore.Unavailable:      pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE,
	}
	wireKinds = [...]pb.StateStoreWatchUpdateKind{
		watch.Put:    pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_PUT,
		watch.Delete: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_DELETE,
		watch.Expire: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_EXPIRE,
	}
	wireReasons = [...]pb.StateStoreWatchCloseReason{
		watch.BufferOverflow:         pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW,
		watch.AckTimeout:             pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_ACK_TIMEOUT,
		watch.AuthorizationLost:      pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_AUTHORIZATION_LOST,
		watch.SnapshotDeliveryFailed: pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_SNAPSHOT_DELIVERY_FAILED,
		watch.StoreClosed:            pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_STORE_CLOSED,
		watch.Restored:               pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_RESTORED,
	}
)

// lookup returns table[i], or the zero value when i is outside the table.
func lookup[K ~int | ~uint8, V any](table []V, i K) V {
	var zero V
	if int(i) < 0 || int(i) >= len(table) {
		return zero
	}
	return table[i]
}

// WireCode returns the wire spelling of a store code. OK and unknown values
// have none (UNSPECIFIED).
func WireCode(c statestore.Code) pb.StateStoreErrorCode { return lookup(wireCodes[:], c) }

// WireKind returns the wire spelling of an update kind (UNSPECIFIED for an
// invalid one).
func WireKind(k watch.Kind) pb.StateStoreWatchUpdateKind { return lookup(wireKinds[:], k) }

// WireReason returns the wire spelling of a close reason (UNSPECIFIED for an
// invalid one).
func WireReason(r watch.Reason) pb.StateStoreWatchCloseReason { return lookup(wireReasons[:], r) }

func resultMessage(r *pb.StateStoreResult) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: r}}
}

// errorMessage answers requestID with err. An error that is not the
// store's (which the store never returns) is UNAVAILABLE, as CodeOf has it.
func errorMessage(requestID uint64, err error) *pb.ServerMessage {
	e := &pb.StateStoreError{Code: WireCode(statestore.CodeOf(err)), Message: err.Error()}
	var se *statestore.Error
	if errors.As(err, &se) {
		e.Field, e.CurrentRevision = se.Field, se.CurrentRevision
		if se.Message != "" {
			e.Message = se.Message
		}
	}
	if e.Code == pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNSPECIFIED {
		e.Code = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE
	}
	return resultMessage(&pb.StateStoreResult{RequestId: requestID, Result: &pb.StateStoreResult_Error{Error: e}})
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
	snap := &pb.StateStoreWatchSnapshot{WatchId: s.WatchID, SnapshotRevision: s.SnapshotRevision,
		Entries: make([]*pb.StateEntry, len(s.Entries))}
	for i, e := range s.Entries {
		snap.Entries[i] = wire.Entry(e)
	}
	return resultMessage(&pb.StateStoreResult{RequestId: s.RequestID, Result: &pb.StateStoreResult_Watch{Watch: snap}})
}

// UpdateMessage is the StateStoreWatchUpdate of u: the entry for PUT, the
// key for DELETE and EXPIRE.
func UpdateMessage(u *watch.Update) *pb.ServerMessage {
	m := &pb.StateStoreWatchUpdate{WatchId: u.WatchID, WatchSequence: u.Sequence, Revision: u.Revision, Kind: WireKind(u.Kind)}
	if u.Kind == watch.Put && u.Entry != nil {
		m.Entry = wire.Entry(u.Entry)
	} else {
		m.Key = u.Key
	}
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: m}}
}

// ClosedMessage is the StateStoreWatchClosed of c.
func ClosedMessage(c *watch.Closed) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchClosed{WatchClosed: &pb.StateStoreWatchClosed{
		WatchId: c.WatchID, Reason: WireReason(c.Reason), Message: c.Message}}}
}
