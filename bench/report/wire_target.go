package report

import (
	"fmt"

	"github.com/keeppeek/statestore/bench/harness"
)

// The rows of qualify's wire_cas_paired workload: the serial durable CAS
// directly and through the wire, in alternating rounds of one run.
const (
	wireCASPaired    = "wire_cas_paired"
	durableCASPaired = "durable_cas_paired"
	// wireCASBound is issue 11's bound on the wire's serial p50.
	wireCASBound = 1.1
)

// wireTarget judges the wire protocol's target: wire_cas p50 at most 1.1×
// durable_cas p50, from the paired rows, whose alternating rounds put the
// disk's and the machine's drift on both sides alike (the separate
// wire_cas and durable_cas rows run minutes apart).
func wireTarget(results []harness.Result) Target {
	t := Target{Name: fmt.Sprintf("wire_cas p50 ≤ %.1f× durable_cas p50 (alternating rounds: %s / %s)", wireCASBound, wireCASPaired, durableCASPaired),
		Bound: wireCASBound, AtMost: true, Measured: "missing: " + wireCASPaired}
	w, _ := find(results, wireCASPaired, 1)
	d, _ := find(results, durableCASPaired, 1)
	if w.P50us > 0 && d.P50us > 0 {
		t.Ratio = w.P50us / d.P50us
		t.Measured = fmt.Sprintf("%.2f× (%.0f / %.0f µs)", t.Ratio, w.P50us, d.P50us)
	}
	return t
}
