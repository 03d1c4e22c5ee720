// Package stats holds the lock-free instruments the store counts its work
// with: fixed-bucket histograms kept in atomic counters, read as plain
// snapshots.
//
// Invariants:
//   - Recording never takes a lock and never allocates: Observe is a bucket
//     search over a few bounds and two atomic adds, so the commit path can
//     record every operation.
//   - Bounds are fixed when the histogram is built and never change, so a
//     snapshot's buckets line up with every earlier snapshot's.
//   - Every count only grows. A Snapshot reads each bucket and the sum
//     atomically but not all of them at one instant: an Observe running
//     meanwhile may show in some fields and not yet in others, and shows in
//     all of them in the next snapshot.
//
// Values are int64 in whatever unit the caller chooses (nanoseconds for
// durations, items or bytes for sizes); the exporter scales them.
package stats
