package main

import (
	"context"
	"fmt"
	"runtime/trace"
	"slices"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
)

// pairedSide is one of two serial workloads measured in alternating rounds
// (see alternateRounds): op(i) is the side's i-th operation, and enter, if
// set, runs before each of the side's rounds, untimed.
type pairedSide struct {
	name  string
	op    func(i int) error
	enter func()

	lat      *harness.Latencies
	roundP50 []time.Duration // the p50 of each round, in round order
	ops      int
	busy     time.Duration
}

// alternateRounds runs n operations of each side in rounds of roundSize,
// one side's round then the other's, each side first in every other round:
// drift in the disk or the machine during the run (another process's
// fsyncs, a neighbour's CPU burst) then falls on both sides alike, and the
// side that runs second always follows the other's last fsync. Every
// operation is timed on its own.
func alternateRounds(n, roundSize int, sides [2]*pairedSide) error {
	for _, sd := range sides {
		sd.lat = harness.NewLatencies(n)
	}
	round := harness.NewLatencies(roundSize)
	for k, done := 0, 0; done < n; k++ {
		size := min(roundSize, n-done)
		order := sides
		if k%2 == 1 {
			order = [2]*pairedSide{sides[1], sides[0]}
		}
		for _, sd := range order {
			if sd.enter != nil {
				sd.enter()
			}
			round.Reset()
			start := time.Now()
			for i := range size {
				t0 := time.Now()
				// A region per operation lets --trace attribute the
				// scheduler's events to the side and the operation.
				region := trace.StartRegion(context.Background(), sd.name)
				err := sd.op(done + i)
				region.End()
				if err != nil {
					return fmt.Errorf("%s: op %d: %w", sd.name, done+i, err)
				}
				round.Record(time.Since(t0))
			}
			sd.busy += time.Since(start)
			sd.ops += size
			sd.lat.Merge(round)
			sd.roundP50 = append(sd.roundP50, round.Percentile(50))
		}
		done += size
	}
	return nil
}

// result returns the side's row over all its rounds.
func (sd *pairedSide) result(note string) harness.Result {
	r := harness.Result{Name: sd.name, Writers: 1, OpsPerS: float64(sd.ops) / sd.busy.Seconds(), Note: note}
	sd.lat.Fill(&r)
	return r
}

// roundRatios returns, for each round, a's p50 divided by b's p50, sorted.
func roundRatios(a, b *pairedSide) []float64 {
	out := make([]float64, 0, len(a.roundP50))
	for k := range min(len(a.roundP50), len(b.roundP50)) {
		if b.roundP50[k] > 0 {
			out = append(out, float64(a.roundP50[k])/float64(b.roundP50[k]))
		}
	}
	slices.Sort(out)
	return out
}

// spread describes sorted per-round ratios: their count, minimum, median
// and maximum.
func spread(sorted []float64) string {
	if len(sorted) == 0 {
		return "no rounds"
	}
	return fmt.Sprintf("%d rounds, per-round p50 ratio min %.2fx median %.2fx max %.2fx",
		len(sorted), sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
}
