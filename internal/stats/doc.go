// Package stats holds the lock-free instruments the store counts its work
// with: fixed-bucket histograms kept in atomic counters, read as plain
// snapshots.
//
// Values are int64 in whatever unit the caller chooses (nanoseconds for
// durations, items or bytes for sizes); the exporter scales them.
//
// # Invariants
//
//  1. Recording never takes a lock and never allocates: Observe is a bucket
//     search over a few bounds and two atomic adds, so the commit path can
//     record every operation.
//     Code: Histogram.Observe.
//     Tests: TestObserveDoesNotAllocate, TestConcurrentObserve.
//  2. Bounds are fixed when the histogram is built and never change, so a
//     snapshot's buckets line up with every earlier snapshot's.
//     Code: NewHistogram, Histogram.Snapshot.
//     Tests: TestNewHistogramCopiesBounds, TestObserveBuckets.
//  3. Every count only grows. A Snapshot reads each bucket and the sum
//     atomically but not all of them at one instant: an Observe running
//     meanwhile may show in some fields and not yet in others, and shows in
//     all of them in the next snapshot.
//     Code: Histogram.Observe, Histogram.Snapshot.
//     Tests: TestConcurrentObserve, TestCumulative.
package stats
