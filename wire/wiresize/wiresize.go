// Package wiresize computes, exactly, how many bytes a watch snapshot answer
// of the keeppeek.statestore.v1 protocol encodes to, by protobuf's size
// arithmetic (varints, tags, length prefixes) over the store's own entries,
// without building a message.
//
// It exists apart from package wire so that the root package, which
// enforces the 65,536-byte snapshot bound, links no generated code and no
// protobuf registry: their initialisation is resident in every process
// that embeds the store, whether it serves the wire protocol or not.
// Package wire, which has the generated descriptors, keeps this package's
// field numbers and arithmetic honest in its tests.
//
// # Invariants
//
//   - SnapshotSize.Total equals len(proto.Marshal(m)) of the ServerMessage
//     m that answers the WatchState: ServerMessage.result ->
//     StateStoreResult{request_id, watch: StateStoreWatchSnapshot{watch_id,
//     snapshot_revision, entries}}, and EntrySize equals proto.Size of the
//     entry's StateEntry. The store enforces its snapshot bound against
//     this number, so the bound is exact rather than an estimate.
//     Code: SnapshotSize.Add, SnapshotSize.Total, EntrySize.
//     Tests: wire.TestSnapshotSizeIsExact, wire.TestWireSizeFieldNumbers, wire.TestEntrySizeIsProtoSize.
package wiresize

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore/materialize"
)

// Field numbers of state_store.proto that the sizes depend on. A
// renumbering there fails wire.TestWireSizeFieldNumbers, which reads them
// from the generated descriptors.
const (
	FieldServerResult     protowire.Number = 1 // ServerMessage.result
	FieldResultRequestID  protowire.Number = 1 // StateStoreResult.request_id
	FieldResultWatch      protowire.Number = 4 // StateStoreResult.watch
	FieldSnapshotWatchID  protowire.Number = 1 // StateStoreWatchSnapshot.watch_id
	FieldSnapshotRevision protowire.Number = 2 // StateStoreWatchSnapshot.snapshot_revision
	FieldSnapshotEntries  protowire.Number = 3 // StateStoreWatchSnapshot.entries
	FieldEntryNamespace   protowire.Number = 1 // StateEntry.namespace
	FieldEntryKey         protowire.Number = 2
	FieldEntrySchema      protowire.Number = 3
	FieldEntryOwner       protowire.Number = 4
	FieldEntryRevision    protowire.Number = 5
	FieldEntryCreatedAtMs protowire.Number = 6
	FieldEntryUpdatedAtMs protowire.Number = 7
	FieldEntryExpiresAtMs protowire.Number = 8
	FieldEntryDocument    protowire.Number = 9
)

// A proto3 field without presence is not encoded at its zero value.

// StringSize is the encoded size of string field n holding s: nothing
// for "", as proto3 leaves it out (wire's update encoding sizes with it
// too, so both count the same bytes).
func StringSize(n protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(n) + protowire.SizeBytes(len(s))
}

func sizeBytes(n protowire.Number, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return protowire.SizeTag(n) + protowire.SizeBytes(len(b))
}

// UintSize is the encoded size of varint field n holding v: nothing for 0.
func UintSize(n protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(n) + protowire.SizeVarint(v)
}

// sizeInt is an int64 field: a negative value is its two's complement, a
// ten-byte varint.
func sizeInt(n protowire.Number, v int64) int { return UintSize(n, uint64(v)) }

// EntrySize is the encoded size of e as a StateEntry (wire.Entry(e)).
func EntrySize(e *materialize.Entry) int {
	return StringSize(FieldEntryNamespace, e.Namespace) + StringSize(FieldEntryKey, e.Key) +
		StringSize(FieldEntrySchema, e.Schema) + StringSize(FieldEntryOwner, e.Owner) +
		UintSize(FieldEntryRevision, e.Revision) + sizeInt(FieldEntryCreatedAtMs, e.CreatedMs) +
		sizeInt(FieldEntryUpdatedAtMs, e.UpdatedMs) + sizeInt(FieldEntryExpiresAtMs, e.ExpiresMs) +
		sizeBytes(FieldEntryDocument, e.Document)
}

// SnapshotSize accumulates the encoded size of a watch snapshot answer one
// entry at a time, so a capture can stop as soon as the entries alone pass
// the bound. The zero value is an empty snapshot.
type SnapshotSize struct {
	entries int // encoded bytes of the repeated entries field
}

// Add counts one more entry of the snapshot.
func (z *SnapshotSize) Add(e *materialize.Entry) {
	z.entries += protowire.SizeTag(FieldSnapshotEntries) + protowire.SizeBytes(EntrySize(e))
}

// Entries returns the bytes the entries counted so far encode to: a lower
// bound of Total whatever the envelope holds.
func (z *SnapshotSize) Entries() int { return z.entries }

// Total returns the exact encoded size of the ServerMessage answering a
// WatchState with requestID and watchID by the counted entries at
// snapshotRevision.
func (z *SnapshotSize) Total(requestID uint64, watchID string, snapshotRevision uint64) int {
	snap := StringSize(FieldSnapshotWatchID, watchID) + UintSize(FieldSnapshotRevision, snapshotRevision) + z.entries
	// A set oneof field is encoded even when its message is empty.
	result := UintSize(FieldResultRequestID, requestID) +
		protowire.SizeTag(FieldResultWatch) + protowire.SizeBytes(snap)
	return protowire.SizeTag(FieldServerResult) + protowire.SizeBytes(result)
}
