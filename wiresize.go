package statestore

import (
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/wire"
)

// snapshotBound applies the watch snapshot bounds (Limits) while a
// snapshot is captured: at most MaxSnapshotEntries entries, and an answer
// (the whole encoded ServerMessage carrying StateStoreResult.watch) of at
// most MaxSnapshotBytes bytes, measured exactly by package wire.
type snapshotBound struct {
	maxEntries, maxBytes int
	n                    int
	size                 wire.SnapshotSize
}

// add counts e and reports whether capturing should go on: it stops as soon
// as a bound is already broken, since more entries only grow the answer.
func (b *snapshotBound) add(e *materialize.Entry) bool {
	b.n++
	b.size.Add(e)
	return b.n <= b.maxEntries && b.size.Entries() <= b.maxBytes
}

// check returns WATCH_TOO_BROAD naming the bound the answer to req at
// snapshot revision rev breaks, or nil.
func (b *snapshotBound) check(req WatchRequest, rev uint64) error {
	if b.n > b.maxEntries {
		return newErr(WatchTooBroad, "watch snapshot entries", "more than %d entries match namespace %q prefix %q; narrow the prefix", b.maxEntries, req.Namespace, req.KeyPrefix)
	}
	if size := b.size.Total(req.RequestID, req.WatchID, rev); size > b.maxBytes {
		return newErr(WatchTooBroad, "watch snapshot bytes", "the snapshot answer for namespace %q prefix %q encodes to %d bytes, over the %d-byte bound; narrow the prefix", req.Namespace, req.KeyPrefix, size, b.maxBytes)
	}
	return nil
}
