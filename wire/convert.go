package wire

import (
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// The one place where the watch registry's update kinds and close reasons
// meet their wire enums, in both directions. The store's result codes and
// requests are the root package's types, which import this package (for
// SnapshotSize), so their tables live one level up, in wire/wirestore.
var (
	kinds = [...]pb.StateStoreWatchUpdateKind{
		watch.Put:    pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_PUT,
		watch.Delete: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_DELETE,
		watch.Expire: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_EXPIRE,
	}
	reasons = [...]pb.StateStoreWatchCloseReason{
		watch.BufferOverflow:         pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW,
		watch.AckTimeout:             pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_ACK_TIMEOUT,
		watch.AuthorizationLost:      pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_AUTHORIZATION_LOST,
		watch.SnapshotDeliveryFailed: pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_SNAPSHOT_DELIVERY_FAILED,
		watch.StoreClosed:            pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_STORE_CLOSED,
		watch.Restored:               pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_RESTORED,
		watch.Unavailable:            pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_UNAVAILABLE,
	}
)

// lookup returns table[i], or the zero value (the UNSPECIFIED wire value)
// when i is outside the table.
func lookup[K ~int | ~uint8, V any](table []V, i K) V {
	var zero V
	if int(i) < 0 || int(i) >= len(table) {
		return zero
	}
	return table[i]
}

// reverse returns the index of v in table and true, or the zero index and
// false when no entry holds v. The zero value is UNSPECIFIED on the wire
// and invalid in the store, so it never maps.
func reverse[K ~int | ~uint8, V comparable](table []V, v V) (K, bool) {
	var zero V
	if v == zero {
		return 0, false
	}
	for i, w := range table {
		if w == v {
			return K(i), true
		}
	}
	return 0, false
}

// Kind returns the wire spelling of an update kind (UNSPECIFIED for an
// invalid one).
func Kind(k watch.Kind) pb.StateStoreWatchUpdateKind { return lookup(kinds[:], k) }

// StoreKind returns the update kind a wire kind spells, and false for
// UNSPECIFIED or a value this version does not know (proto3 enums are
// open, so a newer server may send one).
func StoreKind(k pb.StateStoreWatchUpdateKind) (watch.Kind, bool) {
	return reverse[watch.Kind](kinds[:], k)
}

// Reason returns the wire spelling of a close reason (UNSPECIFIED for an
// invalid one).
func Reason(r watch.Reason) pb.StateStoreWatchCloseReason { return lookup(reasons[:], r) }

// StoreReason returns the close reason a wire reason spells, and false for
// UNSPECIFIED or an unknown value.
func StoreReason(r pb.StateStoreWatchCloseReason) (watch.Reason, bool) {
	return reverse[watch.Reason](reasons[:], r)
}

// StoreEntry returns the store entry (statestore.Entry) a StateEntry
// carries. The document is shared with m.
func StoreEntry(m *pb.StateEntry) materialize.Entry {
	return materialize.Entry{
		Namespace: m.GetNamespace(),
		Key:       m.GetKey(),
		Schema:    m.GetSchema(),
		Owner:     m.GetOwner(),
		Revision:  m.GetRevision(),
		CreatedMs: m.GetCreatedAtMs(),
		UpdatedMs: m.GetUpdatedAtMs(),
		ExpiresMs: m.GetExpiresAtMs(),
		Document:  m.GetDocument(),
	}
}

// Snapshot returns the StateStoreWatchSnapshot of s (what answers its
// WatchState, inside a StateStoreResult carrying s.RequestID).
func Snapshot(s *watch.Snapshot) *pb.StateStoreWatchSnapshot {
	m := &pb.StateStoreWatchSnapshot{WatchId: s.WatchID, SnapshotRevision: s.SnapshotRevision,
		Entries: make([]*pb.StateEntry, len(s.Entries))}
	for i, e := range s.Entries {
		m.Entries[i] = Entry(e)
	}
	return m
}

// StoreSnapshot returns the watch.Snapshot that m answers: the request's
// id, namespace and prefix are the request's, which the wire message does
// not repeat.
func StoreSnapshot(m *pb.StateStoreWatchSnapshot, requestID uint64, namespace, prefix string) *watch.Snapshot {
	s := &watch.Snapshot{RequestID: requestID, WatchID: m.GetWatchId(), Namespace: namespace, KeyPrefix: prefix,
		SnapshotRevision: m.GetSnapshotRevision(), Entries: make([]*materialize.Entry, len(m.GetEntries()))}
	for i, e := range m.GetEntries() {
		se := StoreEntry(e)
		s.Entries[i] = &se
	}
	return s
}

// Update returns the StateStoreWatchUpdate of u: the entry for PUT, the
// key for DELETE and EXPIRE.
func Update(u *watch.Update) *pb.StateStoreWatchUpdate {
	m := &pb.StateStoreWatchUpdate{WatchId: u.WatchID, WatchSequence: u.Sequence, Revision: u.Revision, Kind: Kind(u.Kind)}
	if u.Kind == watch.Put && u.Entry != nil {
		m.Entry = Entry(u.Entry)
	} else {
		m.Key = u.Key
	}
	return m
}

// StoreUpdate returns the watch.Update m carries for a watch of namespace
// (the wire message names the namespace only inside a PUT's entry). A PUT's
// key is its entry's. An unknown kind is left as the invalid zero Kind, so
// a follower that checks updates (watchcache) refuses it and re-snapshots.
func StoreUpdate(m *pb.StateStoreWatchUpdate, namespace string) *watch.Update {
	k, _ := StoreKind(m.GetKind())
	u := &watch.Update{WatchID: m.GetWatchId(), Sequence: m.GetWatchSequence(), Revision: m.GetRevision(),
		Kind: k, Namespace: namespace, Key: m.GetKey()}
	if e := m.GetEntry(); e != nil {
		se := StoreEntry(e)
		u.Entry = &se
		if u.Key == "" {
			u.Key = se.Key
		}
	}
	return u
}

// Closed returns the StateStoreWatchClosed of c.
func Closed(c *watch.Closed) *pb.StateStoreWatchClosed {
	return &pb.StateStoreWatchClosed{WatchId: c.WatchID, Reason: Reason(c.Reason), Message: c.Message}
}

// StoreClosed returns the watch.Closed m carries; an unknown reason is
// left as the invalid zero Reason (m.GetReason().String() still names it).
func StoreClosed(m *pb.StateStoreWatchClosed) *watch.Closed {
	r, _ := StoreReason(m.GetReason())
	return &watch.Closed{WatchID: m.GetWatchId(), Reason: r, Message: m.GetMessage()}
}
