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
