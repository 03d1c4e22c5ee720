package stats

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestObserveBuckets(t *testing.T) {
	t.Parallel()
	bounds := []int64{10, 100, 1000}
	cases := []struct {
		name   string
		values []int64
		counts []uint64 // per bucket, overflow last
		sum    int64
	}{
		{"empty", nil, []uint64{0, 0, 0, 0}, 0},
		{"bound is inclusive", []int64{10, 100, 1000}, []uint64{1, 1, 1, 0}, 1110},
		{"just above a bound", []int64{11, 101, 1001}, []uint64{0, 1, 1, 1}, 1113},
		{"negative and zero land in the first bucket", []int64{-5, 0}, []uint64{2, 0, 0, 0}, -5},
		{"overflow", []int64{1 << 40}, []uint64{0, 0, 0, 1}, 1 << 40},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := MustHistogram(bounds)
			for _, v := range c.values {
				h.Observe(v)
			}
			s := h.Snapshot()
			if !slices.Equal(s.Counts, c.counts) {
				t.Fatalf("counts %v, want %v", s.Counts, c.counts)
			}
			if s.Count != uint64(len(c.values)) || s.Sum != c.sum {
				t.Fatalf("count %d sum %d, want %d and %d", s.Count, s.Sum, len(c.values), c.sum)
			}
			if !slices.Equal(s.Bounds, bounds) {
				t.Fatalf("bounds %v, want %v", s.Bounds, bounds)
			}
		})
	}
}

func TestCumulative(t *testing.T) {
	t.Parallel()
	h := MustHistogram([]int64{1, 2, 3})
	for _, v := range []int64{1, 1, 2, 3, 3, 3, 9} {
		h.Observe(v)
	}
	if got, want := h.Snapshot().Cumulative(), []uint64{2, 3, 6}; !slices.Equal(got, want) {
		t.Fatalf("cumulative %v, want %v", got, want)
	}
}

func TestObserveDurationIsNanoseconds(t *testing.T) {
	t.Parallel()
	h := MustHistogram([]int64{int64(time.Millisecond), int64(time.Second)})
	h.ObserveDuration(2 * time.Millisecond)
	s := h.Snapshot()
	if s.Counts[1] != 1 || s.Sum != int64(2*time.Millisecond) {
		t.Fatalf("2ms landed as %v, sum %d", s.Counts, s.Sum)
	}
}

func TestBoundsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		bounds []int64
		index  int
	}{
		{"none", nil, 0},
		{"equal", []int64{1, 2, 2}, 2},
		{"decreasing", []int64{5, 4}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewHistogram(c.bounds)
			var be *BoundsError
			if !errors.As(err, &be) || be.Index != c.index {
				t.Fatalf("err %v, want a *BoundsError at index %d", err, c.index)
			}
		})
	}
}

func TestNewHistogramCopiesBounds(t *testing.T) {
	t.Parallel()
	b := []int64{1, 2}
	h := MustHistogram(b)
	b[0] = 100
	h.Observe(1)
	if h.Snapshot().Counts[0] != 1 {
		t.Fatal("changing the caller's slice moved the histogram's bounds")
	}
}

// TestConcurrentObserve checks no observation is lost without a lock
// (run with -race).
func TestConcurrentObserve(t *testing.T) {
	t.Parallel()
	h := MustHistogram([]int64{10, 20})
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h.Observe(int64((w + i) % 30))
			}
		}()
	}
	wg.Wait()
	s := h.Snapshot()
	if s.Count != workers*each {
		t.Fatalf("count %d, want %d", s.Count, workers*each)
	}
	var want int64
	for w := range workers {
		for i := range each {
			want += int64((w + i) % 30)
		}
	}
	if s.Sum != want {
		t.Fatalf("sum %d, want %d", s.Sum, want)
	}
}

// TestObserveDoesNotAllocate holds the commit path's recording to no
// allocation at all, in range and in the overflow bucket.
func TestObserveDoesNotAllocate(t *testing.T) {
	// Serial: testing.AllocsPerRun reads runtime.MemStats, which counts the
	// allocations of the whole process.
	h := MustHistogram([]int64{10, 20})
	if n := testing.AllocsPerRun(1000, func() {
		h.Observe(15)
		h.Observe(1 << 40)
	}); n != 0 {
		t.Fatalf("Observe allocated %v times per call", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	h := MustHistogram([]int64{50e3, 100e3, 250e3, 500e3, 1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6, 1e9})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Observe(800e3)
		}
	})
}
