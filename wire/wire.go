// Package wire converts between the store's values and their
// keeppeek.statestore.v1 messages, both ways: entries (StateEntry), update
// kinds and close reasons, and the watch messages (snapshot, update,
// closure). It also measures, exactly, how many bytes a watch snapshot
// answer encodes to.
//
// The store's own types (result codes, errors, requests) are converted by
// wire/wirestore: the store imports this package for SnapshotSize, so only
// a package above the store can name them.
//
// # Invariants
//
//  1. Entry carries every field of a store entry, and nothing else, and
//     StoreEntry reverses it; the document bytes are shared, never copied,
//     so the caller must not modify them.
//     Code: Entry, StoreEntry.
//     Tests: TestEntryCarriesEveryField, TestEveryValueRoundTrips.
//  2. SnapshotSize.Total equals len(proto.Marshal(m)) of the ServerMessage
//     m that answers the WatchState: ServerMessage.result ->
//     StateStoreResult{request_id, watch: StateStoreWatchSnapshot{watch_id,
//     snapshot_revision, entries}}. The store enforces its 65,536-byte
//     snapshot bound against this number, so the bound is exact rather
//     than an estimate.
//     Code: SnapshotSize.Add, SnapshotSize.Total, statestore.snapshotBound.check.
//     Tests: TestSnapshotSizeIsExact, dispatch.TestSnapshotBoundIsExact.
//  3. Every update kind and close reason maps to the wire value of the same
//     spelling and back, every wire value but UNSPECIFIED is reached, and
//     UNSPECIFIED or an unknown wire value maps to the invalid zero value
//     (reported as not found), never to a valid one. Snapshot, update and
//     closure messages round-trip through Snapshot/StoreSnapshot,
//     Update/StoreUpdate and Closed/StoreClosed.
//     Code: Kind, StoreKind, Reason, StoreReason, Snapshot, StoreSnapshot, Update, StoreUpdate,
//     Closed, StoreClosed.
//     Tests: TestEveryValueRoundTrips, TestWatchMessagesRoundTrip.
package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keeppeek/statestore/materialize"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// Entry returns e as a StateEntry. The document is shared with e.
func Entry(e *materialize.Entry) *pb.StateEntry {
	return &pb.StateEntry{
		Namespace:   e.Namespace,
		Key:         e.Key,
		Schema:      e.Schema,
		Owner:       e.Owner,
		Revision:    e.Revision,
		CreatedAtMs: e.CreatedMs,
		UpdatedAtMs: e.UpdatedMs,
		ExpiresAtMs: e.ExpiresMs,
		Document:    e.Document,
	}
}

// Field numbers of the snapshot answer's envelope, read from the generated
// descriptors so that a renumbering in the .proto cannot leave the size
// computation behind.
var (
	fieldServerResult    = fieldNumber(&pb.ServerMessage{}, "result")
	fieldResultWatch     = fieldNumber(&pb.StateStoreResult{}, "watch")
	fieldSnapshotEntries = fieldNumber(&pb.StateStoreWatchSnapshot{}, "entries")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if fd == nil {
		panic("wire: the generated descriptor lost field " + string(name))
	}
	return fd.Number()
}

// SnapshotSize accumulates the encoded size of a watch snapshot answer one
// entry at a time, so a capture can stop as soon as the entries alone pass
// the bound. The zero value is an empty snapshot.
type SnapshotSize struct {
	entries int // encoded bytes of the repeated entries field
}

// Add counts one more entry of the snapshot.
func (z *SnapshotSize) Add(e *materialize.Entry) {
	z.entries += protowire.SizeTag(fieldSnapshotEntries) + protowire.SizeBytes(proto.Size(Entry(e)))
}

// Entries returns the bytes the entries counted so far encode to: a lower
// bound of Total whatever the envelope holds.
func (z *SnapshotSize) Entries() int { return z.entries }

// Total returns the exact encoded size of the ServerMessage answering a
// WatchState with requestID and watchID by the counted entries at
// snapshotRevision.
func (z *SnapshotSize) Total(requestID uint64, watchID string, snapshotRevision uint64) int {
	snap := proto.Size(&pb.StateStoreWatchSnapshot{WatchId: watchID, SnapshotRevision: snapshotRevision}) + z.entries
	// A set oneof field is encoded even when its message is empty.
	result := proto.Size(&pb.StateStoreResult{RequestId: requestID}) +
		protowire.SizeTag(fieldResultWatch) + protowire.SizeBytes(snap)
	return protowire.SizeTag(fieldServerResult) + protowire.SizeBytes(result)
}
