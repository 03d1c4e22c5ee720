// Package wire converts between the store's values and their
// keeppeek.statestore.v1 messages, both ways: entries (StateEntry), update
// kinds and close reasons, and the watch messages (snapshot, update,
// closure). It also measures, exactly, how many bytes a watch snapshot
// answer encodes to, and writes a watch update's message without building
// it, from the bytes every watch of its commit shares (AppendUpdate).
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
//  2. SnapshotSize (wiresize.SnapshotSize, by protowire arithmetic alone)
//     Total equals len(proto.Marshal(m)) of the ServerMessage m that
//     answers the WatchState: ServerMessage.result ->
//     StateStoreResult{request_id, watch: StateStoreWatchSnapshot{watch_id,
//     snapshot_revision, entries}}, with the generated descriptors' field
//     numbers. The store enforces its 65,536-byte snapshot bound against
//     this number, so the bound is exact rather than an estimate.
//     Code: wiresize.SnapshotSize.Add, wiresize.SnapshotSize.Total, wiresize.EntrySize, statestore.snapshotBound.check.
//     Tests: TestSnapshotSizeIsExact, TestEntrySizeIsProtoSize, TestWireSizeFieldNumbers, dispatch.TestSnapshotBoundIsExact.
//  3. Every update kind and close reason maps to the wire value of the same
//     spelling and back, every wire value but UNSPECIFIED is reached, and
//     UNSPECIFIED or an unknown wire value maps to the invalid zero value
//     (reported as not found), never to a valid one. Snapshot, update and
//     closure messages round-trip through Snapshot/StoreSnapshot,
//     Update/StoreUpdate and Closed/StoreClosed.
//     Code: Kind, StoreKind, Reason, StoreReason, Snapshot, StoreSnapshot, Update, StoreUpdate,
//     Closed, StoreClosed.
//     Tests: TestEveryValueRoundTrips, TestWatchMessagesRoundTrip.
//  4. AppendUpdate writes, and UpdateSize counts, exactly proto.Marshal's
//     bytes of the ServerMessage whose watch_update is Update(u), with the
//     generated descriptors' field numbers in their order, and they decode
//     back to it; with a Memo, the event's part (revision, kind, entry or
//     key) is encoded once and spliced unchanged after each watch's
//     watch_id and watch_sequence. A string proto3 would refuse (not
//     UTF-8) is an *InvalidUTF8Error, never bytes a peer cannot decode.
//     Code: AppendUpdate, UpdateSize, updateTail, appendUpdateTail, appendEntry, checkUpdateTail.
//     Tests: TestAppendUpdateIsProtoMarshal, TestAppendUpdateRandom, FuzzAppendUpdate, TestMemoEncodesOncePerEvent,
//     TestAppendUpdateRefusesInvalidUTF8, TestEncodeFieldNumbers.
package wire

import (
	"github.com/keeppeek/statestore/materialize"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wiresize"
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

// SnapshotSize accumulates the encoded size of a watch snapshot answer one
// entry at a time (wiresize.SnapshotSize, which the root package uses
// without linking the generated messages).
type SnapshotSize = wiresize.SnapshotSize
