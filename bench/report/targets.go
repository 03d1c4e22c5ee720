package report

import (
	"fmt"

	"github.com/keeppeek/statestore/bench/harness"
)

// Target is one of the performance targets, judged on one run.
type Target struct {
	Name     string  // what is compared, and the bound
	Ratio    float64 // the measured ratio; 0 when not measured
	Bound    float64
	AtMost   bool   // the ratio must be at most Bound (else at least)
	Measured string // the ratio and the figures it comes from
	// MeasuredZero says that a Ratio of 0 was measured (a count of
	// failures that must be 0), not missing.
	MeasuredZero bool
	// Withdrawn, when set, says why the target no longer judges a run: its
	// ratio is still measured and shown, but the verdict is "withdrawn".
	Withdrawn string
}

// Met reports whether the target was measured and holds.
func (t Target) Met() bool {
	if t.Ratio == 0 && !t.MeasuredZero {
		return false
	}
	if t.AtMost {
		return t.Ratio <= t.Bound
	}
	return t.Ratio >= t.Bound
}

// Verdict is "met", "MISSED", "not measured" or, for a withdrawn target
// that was measured, "withdrawn (why)".
func (t Target) Verdict() string {
	switch {
	case t.Ratio == 0 && !t.MeasuredZero:
		return "not measured"
	case t.Withdrawn != "":
		return "withdrawn (" + t.Withdrawn + ")"
	case t.Met():
		return "met"
	}
	return "MISSED"
}

// The workloads the targets compare.
const (
	durableCAS           = "durable_cas"
	durableCASConcurrent = "durable_cas_concurrent"
	rawAppend            = harness.NameRawAppend
	sqliteCAS            = "sqlite_cas"
	walGroup             = "wal_group"
	// TargetWriters is the writer count of the throughput targets.
	TargetWriters = 127
)

// concurrentPeers are the other stores whose best throughput at 127
// writers the store must double.
var concurrentPeers = []string{"sqlite_cas_concurrent", "bbolt_cas_concurrent", "etcd_cas_concurrent"}

// alternatingSuffix marks the rows of a workload measured in alternating
// rounds with the other sides of its targets.
const alternatingSuffix = ".alt"

// Alternating is the row name of workload name measured in rounds
// alternating with the other sides of its targets (qualify's
// targets_serial and targets_concurrent). Targets reads only these rows:
// a ratio of two rows measured minutes apart carries the disk's drift in
// between.
func Alternating(name string) string { return name + alternatingSuffix }

// Targets judges the targets on the alternating rows of results:
// each ratio is of the two sides' figures pooled over every round, and
// Measured also gives the spread of the same ratio over single rounds.
func Targets(results []harness.Result) []Target {
	var out []Target
	ratio := func(name string, a, b harness.Result, fig func(harness.RoundStat) float64, unit string, bound float64, atMost bool) {
		out = append(out, ratioTarget(name, a, b, fig, unit, bound, atMost))
	}
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	maxLat := func(r harness.RoundStat) float64 { return r.MaxUs }
	ops := func(r harness.RoundStat) float64 { return r.OpsPerS }
	alt := func(name string) harness.Result { return alternating(results, name) }
	d, raw, sq := alt(durableCAS), alt(rawAppend), alt(sqliteCAS)
	ratio("durable_cas p50 ≤ 0.9× raw_append_fdatasync p50", d, raw, p50, "µs", 0.9, true)
	ratio("durable_cas p50 ≤ 1.0× sqlite_cas p50", d, sq, p50, "µs", 1.0, true)
	ratio("durable_cas max ≤ 3× raw_append_fdatasync max", d, raw, maxLat, "µs", 3, true)
	dc, wg := alt(durableCASConcurrent), alt(walGroup)
	ratio("durable_cas_concurrent ≥ 0.7× wal_group at 127 writers", dc, wg, ops, "ops/s", 0.7, false)
	best := harness.Result{Name: "the best peer"}
	for _, name := range concurrentPeers {
		if r := alt(name); r.OpsPerS > best.OpsPerS {
			best = r
		}
	}
	ratio("durable_cas_concurrent ≥ 2× the best peer at 127 writers", dc, best, ops, "ops/s", 2, false)
	return out
}

// ratioTarget judges a's figure against b's (picked by fig from the pooled
// rows) against bound, and gives in Measured the pooled ratio and its
// spread over single rounds.
func ratioTarget(name string, a, b harness.Result, fig func(harness.RoundStat) float64, unit string, bound float64, atMost bool) Target {
	what := Alternating(a.Name) + " or " + Alternating(b.Name)
	t := Target{Name: name, Bound: bound, AtMost: atMost, Measured: "missing: " + what}
	x, y := fig(harness.RoundStat{P50us: a.P50us, MaxUs: a.MaxUs, OpsPerS: a.OpsPerS}), fig(harness.RoundStat{P50us: b.P50us, MaxUs: b.MaxUs, OpsPerS: b.OpsPerS})
	if x > 0 && y > 0 {
		t.Ratio = x / y
		t.Measured = fmt.Sprintf("%.2f× (%.0f / %.0f %s, pooled over the rounds)", t.Ratio, x, y, unit)
		if rs := harness.RoundRatios(a, b, fig); len(rs) > 0 {
			t.Measured += fmt.Sprintf("; %d rounds: %.2f–%.2f×, median %.2f×", len(rs), rs[0], rs[len(rs)-1], (rs[(len(rs)-1)/2]+rs[len(rs)/2])/2)
		}
	}
	return t
}

// alternating returns the pooled row of name's side in an alternating
// workload, under name (a zero row when the run did not measure it).
func alternating(results []harness.Result, name string) harness.Result {
	r, _ := find(results, Alternating(name), 0)
	r.Name = name
	return r
}
