package report

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/bench/harness"
)

func TestWireTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		results []harness.Result
		want    string
	}{
		{"within the bound", []harness.Result{serialResult(Alternating(durableCAS), 200, 900), serialResult(Alternating(wireCAS), 219, 900)}, "met"},
		{"the bound is inclusive", []harness.Result{serialResult(Alternating(durableCAS), 200, 900), serialResult(Alternating(wireCAS), 220, 900)}, "met"},
		{"over the bound", []harness.Result{serialResult(Alternating(durableCAS), 200, 900), serialResult(Alternating(wireCAS), 221, 900)}, "MISSED"},
		// The rows measured apart do not judge it.
		{"only the separate rows", []harness.Result{serialResult(durableCAS, 200, 900), serialResult(wireCAS, 100, 900)}, "not measured"},
		{"nothing measured", nil, "not measured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := wireTarget(tc.results)
			verdict := "not measured"
			switch {
			case got.Ratio == 0:
			case got.Met():
				verdict = "met"
			default:
				verdict = "MISSED"
			}
			if verdict != tc.want {
				t.Fatalf("%s (%s), want %s", verdict, got.Measured, tc.want)
			}
			// Withdrawn: measured and shown, but it judges nothing.
			if want := "withdrawn (" + wireWithdrawn + ")"; got.Ratio != 0 && got.Verdict() != want {
				t.Fatalf("verdict %q, want %q", got.Verdict(), want)
			}
		})
	}
	floor := wireTarget([]harness.Result{serialResult(Alternating(durableCAS), 200, 900), serialResult(Alternating(wireCAS), 260, 900),
		serialResult(Alternating(pipeCASFloor), 230, 900)})
	if !strings.Contains(floor.Measured, "the transport floor (pipe_cas_floor) alone: 1.15×") {
		t.Fatalf("measured %q: want the floor's own ratio", floor.Measured)
	}
}

func TestFanoutTarget(t *testing.T) {
	t.Parallel()
	alt := func(name string, p50 float64) harness.Result { return serialResult(Alternating(name), p50, 3*p50) }
	tests := []struct {
		name    string
		results []harness.Result
		want    string
	}{
		{"within the bound", []harness.Result{alt(watchFanout, 300), alt(wireFanout, 590)}, "met"},
		{"the bound is inclusive", []harness.Result{alt(watchFanout, 300), alt(wireFanout, 600)}, "met"},
		{"over the bound", []harness.Result{alt(watchFanout, 300), alt(wireFanout, 601)}, "MISSED"},
		// The rows measured alone do not judge it.
		{"only the separate rows", []harness.Result{serialResult(watchFanout, 300, 900), serialResult(wireFanout, 310, 900)}, "not measured"},
		{"nothing measured", nil, "not measured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := fanoutTarget(tc.results).Verdict(); got != tc.want {
				t.Fatalf("verdict %q, want %q", got, tc.want)
			}
		})
	}
	floor := fanoutTarget([]harness.Result{alt(watchFanout, 300), alt(wireFanout, 900), alt(pipeFanoutFloor, 450)})
	if want := fanoutFloorShare + ": 1.50× watch_fanout, and wire_fanout 2.00× the floor"; !strings.Contains(floor.Measured, want) {
		t.Fatalf("measured %q: want %q", floor.Measured, want)
	}
	if len(AllTargets(nil)) != len(Targets(nil))+2 {
		t.Fatal("AllTargets lacks the fan-out target")
	}
}
