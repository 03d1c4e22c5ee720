package harness

import (
	"context"
	"fmt"
	"runtime/trace"
	"slices"
	"time"
)

// Alternating comparisons. A ratio between two workloads measured one after
// the other carries whatever the disk did in between: on a shared machine
// one workload's fdatasync can cost 40% more than the same call a minute
// later. [AlternateSerial] and [AlternateConcurrent] instead run every side
// in short rounds, one side after another, the order rotated each round so
// that no side always follows the same neighbour, and pool each side's
// samples over all rounds. Drift slower than a round falls on every side
// alike, so the pooled ratio is the workloads' own; the per-round figures
// (Result.Rounds) show how far single rounds scatter around it.

// RoundStat is one side's figures in one round of an alternating run.
type RoundStat struct {
	P50us   float64 `json:"p50_us"`
	MaxUs   float64 `json:"max_us"`
	OpsPerS float64 `json:"ops_per_s"`
}

// SerialSide is one workload of [AlternateSerial]: Op(i) performs the
// side's i-th operation (i counts on across rounds); Enter, if set, runs
// before each of the side's rounds, untimed (a workload that measures a
// background activity switches it on for its own rounds only).
type SerialSide struct {
	Name  string
	Op    func(i int) error
	Enter func()
}

// ConcurrentSide is one workload of [AlternateConcurrent]: Op(w, i) is
// writer w's i-th operation of the current burst.
type ConcurrentSide struct {
	Name string
	Op   func(writer, i int) error
}

// roundOrder returns the order the sides run in round k: a rotation by k,
// so each side starts rounds equally often and follows each neighbour in
// turn.
func roundOrder(sides, k int) []int {
	order := make([]int, sides)
	for i := range order {
		order[i] = (k + i) % sides
	}
	return order
}

// AlternateSerial is [Runner.AlternateSerial] under the default stall
// ceiling.
func AlternateSerial(sides []SerialSide, rounds, perRound int) ([]Result, error) {
	return Runner{}.AlternateSerial(sides, rounds, perRound)
}

// AlternateSerial runs rounds rounds; in each, every side performs perRound
// operations one at a time, timed one by one, before the next side starts.
// It returns one Result per side, in sides' order, pooling the side's
// samples over all rounds (percentiles over every sample, OpsPerS over the
// time the side itself ran), with the side's figures of each round in
// Rounds. The first error, or the first operation to reach the stall
// ceiling, stops the run; AfterRound, if set, follows every round.
func (r Runner) AlternateSerial(sides []SerialSide, rounds, perRound int) ([]Result, error) {
	if len(sides) == 0 || rounds <= 0 || perRound <= 0 {
		return nil, fmt.Errorf("harness: alternate: %d sides, %d rounds of %d ops: all must be positive", len(sides), rounds, perRound)
	}
	all := make([]*Latencies, len(sides))
	busy := make([]time.Duration, len(sides))
	out := make([]Result, len(sides))
	for i := range sides {
		all[i] = NewLatencies(rounds * perRound)
		out[i] = Result{Name: sides[i].Name, Writers: 1}
	}
	round := NewLatencies(perRound)
	for k := range rounds {
		for _, i := range roundOrder(len(sides), k) {
			if sides[i].Enter != nil {
				sides[i].Enter()
			}
			round.Reset()
			start := time.Now()
			for n := range perRound {
				t0 := time.Now()
				// A region per operation lets an execution trace (qualify
				// --trace) attribute the scheduler's events to the side.
				region := trace.StartRegion(context.Background(), sides[i].Name)
				err := sides[i].Op(k*perRound + n)
				region.End()
				if err != nil {
					return nil, fmt.Errorf("%s: round %d op %d: %w", sides[i].Name, k, n, err)
				}
				took := time.Since(t0)
				round.Record(took)
				if err := r.Check(sides[i].Name, -1, k*perRound+n, took); err != nil {
					return nil, err
				}
			}
			el := time.Since(start)
			busy[i] += el
			all[i].Merge(round)
			out[i].Rounds = append(out[i].Rounds, RoundStat{P50us: Micros(round.Percentile(50)), MaxUs: Micros(round.Max()),
				OpsPerS: float64(perRound) / el.Seconds()})
		}
		if r.AfterRound != nil {
			r.AfterRound(k)
		}
	}
	for i := range sides {
		all[i].Fill(&out[i])
		out[i].OpsPerS = float64(all[i].Len()) / busy[i].Seconds()
		out[i].Note = fmt.Sprintf("n=%d in %d rounds of %d alternating with %s", all[i].Len(), rounds, perRound, others(sides, i, func(s SerialSide) string { return s.Name }))
	}
	return out, nil
}

// AlternateConcurrent is [Runner.AlternateConcurrent] under the default
// stall ceiling.
func AlternateConcurrent(sides []ConcurrentSide, writers, rounds int, burst Budget) ([]Result, error) {
	return Runner{}.AlternateConcurrent(sides, writers, rounds, burst)
}

// AlternateConcurrent runs rounds rounds; in each, every side runs a burst
// of writers concurrent writers under budget burst ([RunBudget]) before the
// next side starts. It returns one Result per side, in sides' order:
// latency percentiles over every operation of every burst, OpsPerS as all
// the side's operations over the summed wall time of its bursts, and each
// burst's figures in Rounds. The first error, or the first operation to
// reach the stall ceiling, stops the run; AfterRound, if set, follows
// every round.
func (r Runner) AlternateConcurrent(sides []ConcurrentSide, writers, rounds int, burst Budget) ([]Result, error) {
	if len(sides) == 0 || rounds <= 0 || writers <= 0 {
		return nil, fmt.Errorf("harness: alternate: %d sides, %d rounds, %d writers: all must be positive", len(sides), rounds, writers)
	}
	all := make([]*Latencies, len(sides))
	busy := make([]float64, len(sides)) // seconds
	out := make([]Result, len(sides))
	for i := range sides {
		all[i] = NewLatencies(0)
		out[i] = Result{Name: sides[i].Name, Writers: writers}
	}
	for k := range rounds {
		for _, i := range roundOrder(len(sides), k) {
			res, lat, err := r.runBudget(sides[i].Name, writers, burst, sides[i].Op)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", k, err)
			}
			all[i].Merge(lat)
			busy[i] += float64(lat.Len()) / res.OpsPerS
			out[i].Rounds = append(out[i].Rounds, RoundStat{P50us: res.P50us, MaxUs: res.MaxUs, OpsPerS: res.OpsPerS})
		}
		if r.AfterRound != nil {
			r.AfterRound(k)
		}
	}
	for i := range sides {
		all[i].Fill(&out[i])
		out[i].OpsPerS = float64(all[i].Len()) / busy[i]
		out[i].Note = fmt.Sprintf("n=%d in %d bursts of %v alternating with %s", all[i].Len(), rounds, burst, others(sides, i, func(s ConcurrentSide) string { return s.Name }))
	}
	return out, nil
}

// others lists the names of every side but the i-th.
func others[S any](sides []S, i int, name func(S) string) string {
	var names []string
	for k, s := range sides {
		if k != i {
			names = append(names, name(s))
		}
	}
	return fmt.Sprint(names)
}

// RoundRatios returns, for each round both results ran, the ratio of a's
// figure to b's as picked by fig, sorted ascending: how far single rounds
// scatter around the pooled ratio.
func RoundRatios(a, b Result, fig func(RoundStat) float64) []float64 {
	n := min(len(a.Rounds), len(b.Rounds))
	out := make([]float64, 0, n)
	for k := range n {
		if d := fig(b.Rounds[k]); d > 0 {
			out = append(out, fig(a.Rounds[k])/d)
		}
	}
	slices.Sort(out)
	return out
}
