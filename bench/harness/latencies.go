package harness

import (
	"math"
	"slices"
	"time"
)

// Latencies records operation durations and computes nearest-rank
// percentiles over them. Its zero value is usable, but [NewLatencies]
// pre-sizes it so that [Latencies.Record] never allocates. A Latencies is not
// safe for concurrent use: give each goroutine its own and [Latencies.Merge]
// them afterwards.
type Latencies struct {
	d      []time.Duration
	sorted bool
}

// NewLatencies returns a Latencies with room for n samples.
func NewLatencies(n int) *Latencies {
	if n < 0 {
		n = 0
	}
	return &Latencies{d: make([]time.Duration, 0, n)}
}

// Record adds one sample. It does not allocate while the pre-sized capacity
// lasts.
func (l *Latencies) Record(d time.Duration) {
	l.d = append(l.d, d)
	l.sorted = false
}

// Merge appends all samples of o to l.
func (l *Latencies) Merge(o *Latencies) {
	l.d = append(l.d, o.d...)
	l.sorted = false
}

// Len returns the number of recorded samples.
func (l *Latencies) Len() int { return len(l.d) }

// Reset drops all samples and keeps the capacity.
func (l *Latencies) Reset() {
	l.d = l.d[:0]
	l.sorted = false
}

func (l *Latencies) sort() {
	if !l.sorted {
		slices.Sort(l.d)
		l.sorted = true
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100): the
// smallest sample such that at least p percent of all samples are less than
// or equal to it, i.e. the sample of 1-based rank ceil(p/100 * N) in sorted
// order. p <= 0 yields the minimum. It returns 0 when there are no samples.
// It sorts the samples in place the first time it is called after a change.
func (l *Latencies) Percentile(p float64) time.Duration {
	n := len(l.d)
	if n == 0 {
		return 0
	}
	l.sort()
	rank := NearestRank(p, n)
	return l.d[rank-1]
}

// NearestRank returns the 1-based nearest rank ceil(p/100 * n) of the p-th
// percentile among n sorted samples, clamped to [1, n]. n must be positive.
func NearestRank(p float64, n int) int {
	// Subtracting a tiny epsilon keeps exact products such as 0.95*20=19
	// from rounding up to 20 through floating-point error.
	r := int(math.Ceil(p/100*float64(n) - 1e-9))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return r
}

// Max returns the largest sample, or 0 when there are none.
func (l *Latencies) Max() time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	l.sort()
	return l.d[len(l.d)-1]
}

// Micros converts a duration to (fractional) microseconds.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// QuantilePoints are the percentiles Fill records in Result.Quantiles: the
// shape of a latency distribution, dense near the median and in the tail.
var QuantilePoints = []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.9, 100}

// Fill sets r.P50us, r.P95us, r.MaxUs and r.Quantiles from the recorded
// samples.
func (l *Latencies) Fill(r *Result) {
	r.P50us = Micros(l.Percentile(50))
	r.P95us = Micros(l.Percentile(95))
	r.MaxUs = Micros(l.Max())
	r.Quantiles = r.Quantiles[:0]
	if len(l.d) == 0 {
		return
	}
	for _, p := range QuantilePoints {
		r.Quantiles = append(r.Quantiles, Quantile{P: p, Us: Micros(l.Percentile(p))})
	}
}
