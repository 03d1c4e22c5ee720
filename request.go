package statestore

import (
	"time"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// The values the facade takes and gives: the specification's requests
// and what the store answers them with.

// Entry is one complete state document with the metadata the store
// assigned. Entries returned by the store are copies the caller may keep.
type Entry = materialize.Entry

// NamespaceInfo is a namespace's counters.
type NamespaceInfo = materialize.Namespace

// NamespaceListing is one namespace of Namespaces: its name and counters.
type NamespaceListing struct {
	Name string
	NamespaceInfo
}

// Expect is a write's expected_revision: the zero value is a blind write
// (absent), CreateOnly is 0, IfRevision(n) is n.
type Expect struct {
	set bool
	rev uint64
}

// CreateOnly is expected_revision 0: the key must not exist.
var CreateOnly = Expect{set: true}

// IfRevision is expected_revision n: the key's revision must be n. n = 0 is
// CreateOnly.
func IfRevision(n uint64) Expect { return Expect{set: true, rev: n} }

// Revision returns the expected revision and whether one is set.
func (x Expect) Revision() (uint64, bool) { return x.rev, x.set }

// PutRequest is a PutState.
type PutRequest struct {
	Namespace string
	Key       string
	Schema    string
	Document  []byte // a JSON object valid against Schema
	Expect    Expect
	// TTL requests a lease: 0 means none; below the minimum (1 s) is
	// TTL_INVALID; above the maximum (24 h) is clamped.
	TTL time.Duration
}

// DeleteRequest is a DeleteState.
type DeleteRequest struct {
	Namespace string
	Key       string
	Expect    Expect
}

// WatchRequest is a WatchState.
type WatchRequest struct {
	RequestID uint64 // echoed in the snapshot message
	WatchID   string // unique within the session
	Namespace string
	KeyPrefix string // "" watches the whole namespace
}

// WatchResult is the StateStoreResult of a WatchState: the complete
// snapshot as it stood at SnapshotRevision. The same snapshot is also the
// first message delivered to the session's sink for this watch.
type WatchResult struct {
	SnapshotRevision uint64
	Entries          []Entry
}

// OpenReport tells what Open had to do besides replaying.
type OpenReport struct {
	// TailCut is set when a torn final journal record was cut off.
	TailCut *journal.TailCut
	// Replayed is how many journal records were replayed.
	Replayed int
	// Expired is how many overdue leases were purged before serving.
	Expired int
	// Checkpoint says which image replay started from.
	Checkpoint CheckpointReport
}

// CheckpointReport says which image Open started from: its path and index
// ("" and 0 when none was used), and the newer images that failed to load,
// with why.
type CheckpointReport = recovery.CheckpointReport

func copyEntry(e *Entry) Entry {
	c := *e
	c.Document = append([]byte(nil), e.Document...)
	return c
}
