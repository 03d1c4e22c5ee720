package report

import (
	"testing"

	"github.com/keeppeek/statestore/bench/harness"
)

func TestWireTarget(t *testing.T) {
	tests := []struct {
		name    string
		results []harness.Result
		want    string
	}{
		{"within the bound", []harness.Result{serialResult(durableCASPaired, 200, 900), serialResult(wireCASPaired, 219, 900)}, "met"},
		{"the bound is inclusive", []harness.Result{serialResult(durableCASPaired, 200, 900), serialResult(wireCASPaired, 220, 900)}, "met"},
		{"over the bound", []harness.Result{serialResult(durableCASPaired, 200, 900), serialResult(wireCASPaired, 221, 900)}, "MISSED"},
		// The unpaired rows do not judge it.
		{"only the separate rows", []harness.Result{serialResult(durableCAS, 200, 900), serialResult("wire_cas", 100, 900)}, "not measured"},
		{"nothing measured", nil, "not measured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := wireTarget(tc.results); got.Verdict() != tc.want {
				t.Fatalf("%s (%s), want %s", got.Verdict(), got.Measured, tc.want)
			}
		})
	}
}
