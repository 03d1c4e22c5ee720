package stats

import (
	"fmt"
	"sync/atomic"
	"time"
)

// BoundsError reports unusable histogram bounds, naming the offending one.
type BoundsError struct {
	Index  int   // position of the bad bound
	Bound  int64 // its value
	Reason string
}

// Error names the bound, its position and what is wrong with it.
func (e *BoundsError) Error() string {
	return fmt.Sprintf("histogram bound %d (index %d): %s", e.Bound, e.Index, e.Reason)
}

// Histogram counts observations into buckets with fixed upper bounds
// (inclusive, as Prometheus' "le"), plus one overflow bucket above the
// last bound. All methods are safe for concurrent use.
type Histogram struct {
	bounds  []int64
	buckets []atomic.Uint64 // len(bounds)+1; the last one is the overflow
	sum     atomic.Int64
}

// NewHistogram returns a histogram with the given upper bounds, which must
// be strictly increasing and non-empty. The slice is copied.
func NewHistogram(bounds []int64) (*Histogram, error) {
	if len(bounds) == 0 {
		return nil, &BoundsError{Index: 0, Reason: "a histogram needs at least one bound"}
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] {
			return nil, &BoundsError{Index: i, Bound: bounds[i], Reason: fmt.Sprintf("not above the previous bound %d", bounds[i-1])}
		}
	}
	return &Histogram{bounds: append([]int64(nil), bounds...), buckets: make([]atomic.Uint64, len(bounds)+1)}, nil
}

// MustHistogram is NewHistogram for bounds fixed in the program text; it
// panics on bounds NewHistogram refuses, which is a programming error.
func MustHistogram(bounds []int64) *Histogram {
	h, err := NewHistogram(bounds)
	if err != nil {
		panic(err)
	}
	return h
}

// Observe counts v in the first bucket whose bound is at least v.
func (h *Histogram) Observe(v int64) {
	// A linear scan: the bound lists are short (under 20), and the
	// common values sit in the first buckets.
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(v)
}

// ObserveDuration counts d in nanoseconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(int64(d)) }

// Snapshot returns the histogram's counts so far.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Counts: make([]uint64, len(h.buckets))}
	for i := range h.buckets {
		s.Counts[i] = h.buckets[i].Load()
		s.Count += s.Counts[i]
	}
	s.Sum = h.sum.Load()
	return s
}

// Snapshot is a histogram's state at one reading.
type Snapshot struct {
	// Bounds are the buckets' inclusive upper bounds; shared with the
	// histogram, never to be modified.
	Bounds []int64
	// Counts[i] is how many observations fell in bucket i (not cumulative):
	// above Bounds[i-1] and at most Bounds[i]. Counts[len(Bounds)] counts
	// those above the last bound.
	Counts []uint64
	Count  uint64 // observations in all buckets
	Sum    int64  // sum of the observed values
}

// Cumulative returns, for each bound, how many observations were at most
// that bound (the form Prometheus histograms carry; the +Inf bucket is
// Count).
func (s Snapshot) Cumulative() []uint64 {
	out := make([]uint64, len(s.Bounds))
	var acc uint64
	for i := range s.Bounds {
		acc += s.Counts[i]
		out[i] = acc
	}
	return out
}
