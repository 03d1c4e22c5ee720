package client

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBackoffDoublesWithFullJitter: the reconnection waits are drawn from
// (0, ceiling], the ceiling starting at MinBackoff and doubling up to
// MaxBackoff; with the real source they spread over that whole range.
func TestBackoffDoublesWithFullJitter(t *testing.T) {
	t.Parallel()
	const lo, hi = 100 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name string
		draw func(n int64) int64
		want []time.Duration
	}{
		// The top of each draw is the ceiling itself.
		{"highest draws", func(n int64) int64 { return n - 1 }, []time.Duration{lo, 2 * lo, 4 * lo, 8 * lo, hi, hi}},
		// The bottom is just above nothing: never a wait of zero, which
		// would redial in a tight loop.
		{"lowest draws", func(int64) int64 { return 0 }, []time.Duration{1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := backoff{ceiling: lo, max: hi, draw: tc.draw}
			var got []time.Duration
			for range tc.want {
				got = append(got, b.next())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("waits %v, want %v", got, tc.want)
			}
		})
	}
	// Full jitter with the real source, at a ceiling already at the cap:
	// every wait within (0, hi], and the draws reach both ends of it (each
	// end missed by 1,000 draws with probability 0.75^1000).
	b := backoff{ceiling: hi, max: hi, draw: rand.Int64N}
	least, most := hi, time.Duration(0)
	for range 1000 {
		w := b.next()
		if w <= 0 || w > hi {
			t.Fatalf("a wait of %v, want one in (0, %v]", w, hi)
		}
		least, most = min(least, w), max(most, w)
	}
	if least > hi/4 || most < 3*hi/4 {
		t.Fatalf("1,000 waits span [%v, %v]; full jitter spans (0, %v]", least, most, hi)
	}
}
