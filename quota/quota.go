// Package quota holds the store's bounds as one configurable struct and the
// checks that enforce them.
//
// # Invariants
//
//  1. Every check is a pure function of the current usage and the proposed
//     change: a rejected write has reserved nothing, because nothing was
//     reserved before the check.
//     Code: Limits.CheckPut, Limits.CheckDocument, Usage.
//     Tests: TestCheckPut, statestore.TestQuotaWorkload.
//  2. The same checks run at admission and at replay, so a store whose files
//     exceed a bound (a restored backup, a hand-edited journal) refuses to
//     open instead of serving state no client could have written.
//     Code: Limits.CheckPut, statestore.batch.admit, recovery.Checker.Check.
//     Tests: statestore.TestReplayRejects, statestore.TestQuotaWorkload.
//  3. A full store fails the write; nothing here ever evicts.
//     Code: Limits.CheckPut, Exceeded.
//     Tests: TestCheckPut, statestore.TestQuotaWorkload, statestore.TestQuotaNamespaceCount.
package quota

import (
	"errors"
	"fmt"
	"time"
)

// The default byte bounds, and the two fixed ones, named once: the
// journal's and the checkpoint's decoders derive their bounds from them
// (journal.DefaultLimits), so a record the store would admit always
// decodes.
const (
	DefaultDocumentBytes  = 16 << 10 // 16,384
	DefaultNamespaceBytes = 128
	DefaultKeyBytes       = 256
	DefaultSnapshotBytes  = 64 << 10 // 65,536
	// SchemaNameBytes bounds a schema name; not configurable, schema
	// names being the store's own (schema.CheckName enforces it).
	SchemaNameBytes = 128
	// OwnerBytes bounds an entry's owner, the writing principal's ID,
	// as records and checkpoint images hold it; not configurable.
	OwnerBytes = 128
)

// Limits are the store's bounds. The zero value of a field means "use the
// default"; use Default() to see them.
type Limits struct {
	MaxNamespaces          int   // namespaces holding at least one entry
	MaxEntriesPerNamespace int   // entries in one namespace
	MaxTotalBytes          int64 // value bytes in the whole store
	MaxDocumentBytes       int   // bytes of one document
	MaxNamespaceBytes      int   // length of a namespace name
	MaxKeyBytes            int   // length of a key
	MaxSnapshotEntries     int   // entries in one watch snapshot
	MaxSnapshotBytes       int   // encoded bytes of one watch snapshot
	MaxUnackedUpdates      int   // unacknowledged updates one watch may hold
	AckDeadline            time.Duration
	MaxWatches             int // watches in the whole store
	MaxWatchesPerSession   int
	// MaxWatchesPerPrincipal bounds the watches of one principal over all
	// its sessions (default a quarter of MaxWatches, at least 1), so one
	// principal's many sessions cannot take every watch of the store.
	MaxWatchesPerPrincipal int
	MinTTL                 time.Duration // shorter is TTL_INVALID
	MaxTTL                 time.Duration // longer is clamped
}

// Default returns the bounds a store uses for every field Options.Limits
// leaves zero.
func Default() Limits {
	return Limits{
		MaxNamespaces:          4096,
		MaxEntriesPerNamespace: 1024,
		MaxTotalBytes:          64 << 20,
		MaxDocumentBytes:       DefaultDocumentBytes,
		MaxNamespaceBytes:      DefaultNamespaceBytes,
		MaxKeyBytes:            DefaultKeyBytes,
		MaxSnapshotEntries:     64,
		MaxSnapshotBytes:       DefaultSnapshotBytes,
		MaxUnackedUpdates:      32,
		AckDeadline:            30 * time.Second,
		MaxWatches:             1024,
		MaxWatchesPerSession:   16,
		MaxWatchesPerPrincipal: 256,
		MinTTL:                 time.Second,
		MaxTTL:                 24 * time.Hour,
	}
}

// WithDefaults returns l with every zero field replaced by its default, and
// an error naming the first negative field.
func (l Limits) WithDefaults() (Limits, error) {
	d := Default()
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxNamespaces", &l.MaxNamespaces, d.MaxNamespaces},
		{"MaxEntriesPerNamespace", &l.MaxEntriesPerNamespace, d.MaxEntriesPerNamespace},
		{"MaxDocumentBytes", &l.MaxDocumentBytes, d.MaxDocumentBytes},
		{"MaxNamespaceBytes", &l.MaxNamespaceBytes, d.MaxNamespaceBytes},
		{"MaxKeyBytes", &l.MaxKeyBytes, d.MaxKeyBytes},
		{"MaxSnapshotEntries", &l.MaxSnapshotEntries, d.MaxSnapshotEntries},
		{"MaxSnapshotBytes", &l.MaxSnapshotBytes, d.MaxSnapshotBytes},
		{"MaxUnackedUpdates", &l.MaxUnackedUpdates, d.MaxUnackedUpdates},
		{"MaxWatches", &l.MaxWatches, d.MaxWatches},
		{"MaxWatchesPerSession", &l.MaxWatchesPerSession, d.MaxWatchesPerSession},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return l, fmt.Errorf("quota limit %s: %d is negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if l.MaxWatchesPerPrincipal < 0 {
		return l, fmt.Errorf("quota limit MaxWatchesPerPrincipal: %d is negative", l.MaxWatchesPerPrincipal)
	}
	if l.MaxWatchesPerPrincipal == 0 {
		l.MaxWatchesPerPrincipal = DefaultWatchesPerPrincipal(l.MaxWatches)
	}
	if l.MaxTotalBytes < 0 {
		return l, fmt.Errorf("quota limit MaxTotalBytes: %d is negative", l.MaxTotalBytes)
	}
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"AckDeadline", &l.AckDeadline, d.AckDeadline},
		{"MinTTL", &l.MinTTL, d.MinTTL},
		{"MaxTTL", &l.MaxTTL, d.MaxTTL},
	}
	for _, f := range durs {
		if *f.v < 0 {
			return l, fmt.Errorf("quota limit %s: %v is negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if l.MinTTL > l.MaxTTL {
		return l, fmt.Errorf("quota limit MinTTL %v exceeds MaxTTL %v", l.MinTTL, l.MaxTTL)
	}
	return l, nil
}

// DefaultWatchesPerPrincipal is MaxWatchesPerPrincipal's default for a
// store of maxWatches watches: a quarter of them, at least 1. Four
// principals at their bound fill the store, so one cannot.
func DefaultWatchesPerPrincipal(maxWatches int) int { return max(1, maxWatches/4) }

// ErrExceeded is wrapped by every bound violation.
var ErrExceeded = errors.New("quota exceeded")

// Bound names used in Exceeded.Bound.
const (
	BoundNamespaces          = "namespaces"
	BoundEntriesPerNamespace = "entries per namespace"
	BoundTotalBytes          = "total value bytes"
	BoundDocumentBytes       = "document bytes"
	BoundSnapshotEntries     = "watch snapshot entries"
	BoundSnapshotBytes       = "watch snapshot bytes"
)

// Exceeded names the bound a change would break, its limit, and the value
// the change would have produced.
type Exceeded struct {
	Bound     string
	Limit     int64
	Value     int64
	Namespace string // set for per-namespace bounds
}

func (e *Exceeded) Error() string {
	if e.Namespace != "" {
		return fmt.Sprintf("%s limit %d exceeded in namespace %q: would be %d", e.Bound, e.Limit, e.Namespace, e.Value)
	}
	return fmt.Sprintf("%s limit %d exceeded: would be %d", e.Bound, e.Limit, e.Value)
}

// Unwrap makes errors.Is(err, ErrExceeded) match.
func (e *Exceeded) Unwrap() error { return ErrExceeded }

// Usage is what the store holds now, as far as a put is concerned.
type Usage struct {
	Namespaces       int   // namespaces holding entries
	NamespaceEntries int   // entries in the target namespace
	TotalBytes       int64 // value bytes in the store
}

// CheckDocument checks one document's size.
func (l Limits) CheckDocument(size int) error {
	if size > l.MaxDocumentBytes {
		return &Exceeded{Bound: BoundDocumentBytes, Limit: int64(l.MaxDocumentBytes), Value: int64(size)}
	}
	return nil
}

// CheckPut checks that putting a document of newSize bytes into namespace,
// replacing an entry of oldSize bytes when replacing is true, keeps every
// store-wide and per-namespace bound.
func (l Limits) CheckPut(u Usage, namespace string, replacing bool, oldSize, newSize int64) error {
	if err := l.CheckDocument(int(newSize)); err != nil {
		return err
	}
	if !replacing {
		if u.NamespaceEntries == 0 && u.Namespaces+1 > l.MaxNamespaces {
			return &Exceeded{Bound: BoundNamespaces, Limit: int64(l.MaxNamespaces), Value: int64(u.Namespaces + 1)}
		}
		if u.NamespaceEntries+1 > l.MaxEntriesPerNamespace {
			return &Exceeded{Bound: BoundEntriesPerNamespace, Limit: int64(l.MaxEntriesPerNamespace), Value: int64(u.NamespaceEntries + 1), Namespace: namespace}
		}
	}
	if total := u.TotalBytes - oldSize + newSize; total > l.MaxTotalBytes {
		return &Exceeded{Bound: BoundTotalBytes, Limit: l.MaxTotalBytes, Value: total}
	}
	return nil
}

// ClampTTL applies the lease rules: a TTL below MinTTL is an error, above
// MaxTTL is clamped. Zero means no lease and is returned unchanged.
func (l Limits) ClampTTL(ttl time.Duration) (time.Duration, error) {
	if ttl == 0 {
		return 0, nil
	}
	if ttl < l.MinTTL {
		return 0, fmt.Errorf("ttl %v is below the %v minimum", ttl, l.MinTTL)
	}
	if ttl > l.MaxTTL {
		return l.MaxTTL, nil
	}
	return ttl, nil
}

// BoundOf returns the bound an error names, or "" if it is not an *Exceeded.
func BoundOf(err error) string {
	if e, ok := err.(*Exceeded); ok {
		return e.Bound
	}
	return ""
}
