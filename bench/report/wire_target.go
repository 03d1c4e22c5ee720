package report

import (
	"fmt"

	"github.com/keeppeek/statestore/bench/harness"
)

const (
	wireCAS = "wire_cas"
	// pipeCASFloor is the same compare-and-set answered over net.Pipe with
	// no protocol: the transport's own share of wire_cas.
	pipeCASFloor = "pipe_cas_floor"
	// wireCASBound is the wire protocol's bound on its serial p50.
	wireCASBound = 1.1
)

// wireWithdrawn is why the wire target no longer judges a run (DESIGN.md
// §6): the transport alone, net.Pipe with no protocol, measured 1.07-1.24×
// durable_cas, so no dispatcher could meet 1.1×. The network path is judged
// against the peers a user would pick instead (WriteNetworkPath).
const wireWithdrawn = "the transport floor alone measured above the bound; see The network path"

// wireTarget judges the wire protocol's target, wire_cas p50 at most 1.1×
// durable_cas p50, on the alternating rows of qualify's targets_serial
// (the separate wire_cas and durable_cas rows run minutes apart). When the
// run also measured pipe_cas_floor, Measured adds that floor's own ratio:
// what any request/answer transport over net.Pipe costs on this machine,
// which no dispatcher can go below.
func wireTarget(results []harness.Result) Target {
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	d := alternating(results, durableCAS)
	t := ratioTarget(fmt.Sprintf("wire_cas p50 ≤ %.1f× durable_cas p50", wireCASBound), alternating(results, wireCAS), d, p50, "µs", wireCASBound, true)
	t.Withdrawn = wireWithdrawn
	if f := alternating(results, pipeCASFloor); f.P50us > 0 && t.Ratio > 0 {
		t.Measured += fmt.Sprintf("; the transport floor (%s) alone: %.2f×", pipeCASFloor, f.P50us/d.P50us)
	}
	return t
}

// The in-process fan-outs of qualify's inprocess_fanout and the wire
// fan-out's bound over the registry's.
const (
	watchFanout      = "watch_fanout"
	wireFanout       = "wire_fanout"
	pipeFanoutFloor  = "pipe_fanout_floor"
	wireFanoutBound  = 2.0
	fanoutFloorShare = "the transport floor (" + pipeFanoutFloor + ") alone"
)

// fanoutTarget judges issue 30's fan-out target, wire_fanout p50 at most
// 2× watch_fanout p50, on the alternating rows of qualify's
// inprocess_fanout. When the run also measured pipe_fanout_floor, Measured
// adds the floor's own ratio to watch_fanout and wire_fanout's to the
// floor: moving the same frames over the same pipes with no protocol,
// which no dispatcher can go below.
func fanoutTarget(results []harness.Result) Target {
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	w, wire := alternating(results, watchFanout), alternating(results, wireFanout)
	t := ratioTarget(fmt.Sprintf("wire_fanout p50 ≤ %.0f× watch_fanout p50", wireFanoutBound), wire, w, p50, "µs", wireFanoutBound, true)
	if f := alternating(results, pipeFanoutFloor); f.P50us > 0 && t.Ratio > 0 {
		t.Measured += fmt.Sprintf("; %s: %.2f× watch_fanout, and wire_fanout %.2f× the floor", fanoutFloorShare, f.P50us/w.P50us, wire.P50us/f.P50us)
	}
	return t
}

// AllTargets is every target a run judges: issue 15's (Targets), the
// wire protocol's and the wire fan-out's.
func AllTargets(results []harness.Result) []Target {
	return append(Targets(results), wireTarget(results), fanoutTarget(results))
}
