package report

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/bench/harness"
)

// specRun is the rows of a run that measured every figure of the
// specification's section.
func specRun() []harness.Result {
	return []harness.Result{
		serialResult(SerialProcessRow("durable_cas"), 120, 9000),
		serialResult(SerialProcessRow("memory_cas"), 9, 300),
		{Name: SerialProcess, Writers: 1, Figures: map[string]float64{
			FigIdleCPUPercent: 0.25, FigIdleRSSBytes: 15552512, FigMaxRoundRSSBytes: 19861504, FigRoundsSampled: 30,
			FigHWMBytes: 20000768, FigStartRSSBytes: 9437184, FigOpenRSSBytes: 11534336, FigDurabilityP50Us: 111, FigDurabilityP95Us: 4504.5}},
		serialResult(OneEntrySnapshot, 1.2, 17),
		serialResult(WatchFanout, 700, 1200),
		{Name: OpenFullStore, Writers: 1, P50us: 900000, MaxUs: 1200000, Figures: map[string]float64{FigEntries: 30601, FigValueBytes: 67107993}},
		{Name: ContinuousChurn, Writers: 1, P50us: 98, MaxUs: 9174, Figures: map[string]float64{FigPeakDiskBytes: 3157634, FigEndDiskBytes: 3157532, FigDiskCeilingBytes: 5 << 20}},
	}
}

// TestSpecFigures: every figure of the specification stands beside the
// run's, read from its workload's row, with both commands.
func TestSpecFigures(t *testing.T) {
	t.Parallel()
	got := map[string]SpecFigure{}
	for _, f := range SpecFigures(specRun()) {
		if !f.Measured || f.SpecCmd == "" || !strings.HasPrefix(f.OurCmd, "go run ./bench/cmd/qualify") && !strings.Contains(f.OurCmd, "--stall-ceiling") {
			t.Errorf("%+v: want it measured, with both commands", f)
		}
		got[f.Spec] = f
	}
	tests := []struct {
		spec, ours, specCmd, ourCmd string
	}{
		{"7 / 11 / 119", "9.0 / 154 / 300", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"853 / 1,387 / 3,286", "120 / 4560 / 9000", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"846 µs", "111 µs", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"1,376 µs", "4,505 µs", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"2 / 3 / 17", "1.2 / 9.1 / 17.0", specQualification, "go run ./bench/cmd/qualify --only one_entry_snapshot"},
		{"0%", "0.2%", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"15,552,512", "15,552,512 bytes", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"19,861,504", "19,861,504 bytes (over 30 rounds; VmHWM 20,000,768 bytes; 9,437,184 bytes before the stores opened, 11,534,336 bytes after Open)", specQualification, "go run ./bench/cmd/qualify --only serial_process"},
		{"no operation reached 5 s", "none reached 5 s; the slowest took 1200000 µs (open_full_store)", specQualification, "every workload of the run (--stall-ceiling, default 5s)"},
		{"742 / 860 / 940", "700 / 950 / 1200", specFanout, "go run ./bench/cmd/qualify --only watch_fanout"},
		{"30,601 documents, 67,107,993 bytes", "30,601 documents, 67,107,993 bytes, the next refused", "(not among the three commands)", "go run ./bench/cmd/qualify --only open_full_store"},
		{"4,126,856 bytes", "3,157,634 bytes", specChurn, "go run ./bench/cmd/qualify --only continuous_churn"},
	}
	if len(got) != len(tests) {
		t.Errorf("%d figures, want %d", len(got), len(tests))
	}
	for _, tc := range tests {
		f, ok := got[tc.spec]
		if !ok {
			t.Errorf("no figure with the specification's %q", tc.spec)
			continue
		}
		if f.Ours != tc.ours || f.SpecCmd != tc.specCmd || f.OurCmd != tc.ourCmd {
			t.Errorf("%s: ours %q (%s | %s), want %q (%s | %s)", f.Figure, f.Ours, f.SpecCmd, f.OurCmd, tc.ours, tc.specCmd, tc.ourCmd)
		}
	}
	var b strings.Builder
	if err := WriteSpecFigures(&b, specRun()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## The specification's figures beside ours", "| 4,126,856 bytes | 3,157,634 bytes | `" + specChurn + "` | `go run ./bench/cmd/qualify --only continuous_churn` |",
		"Options.NoSync", "| (not among the three commands) |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
}

// TestSpecFiguresNotMeasured: a run without a workload's row says its
// figures were not measured rather than borrowing another row's, and a
// stall at the ceiling is never shown as within it.
func TestSpecFiguresNotMeasured(t *testing.T) {
	t.Parallel()
	// The serial process's absolute rows are missing; plain durable_cas
	// and memory_cas rows must not stand in for them.
	results := []harness.Result{serialResult(durableCAS, 120, 9000), serialResult("memory_cas", 9, 300)}
	for _, f := range SpecFigures(results) {
		if f.Measured && !strings.HasPrefix(f.Spec, "no operation") {
			t.Errorf("%s: %q measured from a run without its row", f.Figure, f.Ours)
		}
	}
	stalled := append(specRun(), harness.Result{Name: "wedged", MaxUs: 5e6})
	for _, f := range SpecFigures(stalled) {
		if strings.HasPrefix(f.Spec, "no operation") && f.Ours != "REACHED: 5000000 µs (wedged)" {
			t.Errorf("a 5 s operation shown as %q", f.Ours)
		}
	}
	for _, f := range SpecFigures(nil) {
		if f.Measured || f.Ours != "not measured" {
			t.Errorf("%s: %q in an empty run", f.Figure, f.Ours)
		}
	}
}
