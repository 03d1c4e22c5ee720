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
}

// Met reports whether the target was measured and holds.
func (t Target) Met() bool {
	if t.Ratio == 0 {
		return false
	}
	if t.AtMost {
		return t.Ratio <= t.Bound
	}
	return t.Ratio >= t.Bound
}

// Verdict is "met", "MISSED" or "not measured".
func (t Target) Verdict() string {
	switch {
	case t.Ratio == 0:
		return "not measured"
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
	targetWriters        = 127
)

// concurrentPeers are the other stores whose best throughput at 127
// writers the store must double.
var concurrentPeers = []string{"sqlite_cas_concurrent", "bbolt_cas_concurrent", "etcd_cas_concurrent"}

// Targets judges the targets on results.
func Targets(results []harness.Result) []Target {
	var out []Target
	ratio := func(name string, a, b float64, what string, bound float64, atMost bool) {
		t := Target{Name: name, Bound: bound, AtMost: atMost, Measured: "missing: " + what}
		if a > 0 && b > 0 {
			t.Ratio = a / b
			t.Measured = fmt.Sprintf("%.2f× (%s)", t.Ratio, what)
		}
		out = append(out, t)
	}
	d, _ := find(results, durableCAS, 1)
	raw, _ := find(results, rawAppend, 1)
	sq, _ := find(results, sqliteCAS, 1)
	ratio("durable_cas p50 ≤ 0.9× raw_append_fdatasync p50", d.P50us, raw.P50us,
		fmt.Sprintf("%.0f / %.0f µs", d.P50us, raw.P50us), 0.9, true)
	ratio("durable_cas p50 ≤ 1.0× sqlite_cas p50", d.P50us, sq.P50us,
		fmt.Sprintf("%.0f / %.0f µs", d.P50us, sq.P50us), 1.0, true)
	ratio("durable_cas max ≤ 3× raw_append_fdatasync max", d.MaxUs, raw.MaxUs,
		fmt.Sprintf("%.0f / %.0f µs", d.MaxUs, raw.MaxUs), 3, true)
	dc, _ := find(results, durableCASConcurrent, targetWriters)
	wg, _ := find(results, walGroup, targetWriters)
	ratio("durable_cas_concurrent ≥ 0.7× wal_group at 127 writers", dc.OpsPerS, wg.OpsPerS,
		fmt.Sprintf("%.0f / %.0f ops/s", dc.OpsPerS, wg.OpsPerS), 0.7, false)
	var best harness.Result
	for _, name := range concurrentPeers {
		if r, ok := find(results, name, targetWriters); ok && r.OpsPerS > best.OpsPerS {
			best = r
		}
	}
	ratio("durable_cas_concurrent ≥ 2× the best peer at 127 writers", dc.OpsPerS, best.OpsPerS,
		fmt.Sprintf("%.0f / %.0f ops/s of %s", dc.OpsPerS, best.OpsPerS, best.Name), 2, false)
	return out
}
