package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
)

// serialResult is a serial row with a latency distribution.
func serialResult(name string, p50, max float64) harness.Result {
	return harness.Result{Name: name, Writers: 1, P50us: p50, P95us: (p50 + max) / 2, MaxUs: max, OpsPerS: 1e6 / p50,
		Quantiles: []harness.Quantile{{P: 1, Us: p50 / 2}, {P: 50, Us: p50}, {P: 100, Us: max}}}
}

func concurrentResult(name string, writers int, ops float64) harness.Result {
	return harness.Result{Name: name, Writers: writers, P50us: 1000, OpsPerS: ops}
}

// withRounds is r as an alternating row of two rounds, one 10% below and
// one 10% above its pooled figures.
func withRounds(r harness.Result) harness.Result {
	r.Name = Alternating(r.Name)
	for _, f := range []float64{0.9, 1.1} {
		r.Rounds = append(r.Rounds, harness.RoundStat{P50us: r.P50us * f, MaxUs: r.MaxUs * f, OpsPerS: r.OpsPerS * f})
	}
	return r
}

// absolute is the rows of the one-after-another workloads that the
// figures draw.
func absolute(durableP50, durableMax, durableOps float64) []harness.Result {
	return []harness.Result{
		serialResult(durableCAS, durableP50, durableMax),
		serialResult(rawAppend, 200, 5000),
		serialResult(sqliteCAS, 250, 9000),
		concurrentResult(durableCASConcurrent, 1, 900),
		concurrentResult(durableCASConcurrent, TargetWriters, durableOps),
		concurrentResult(walGroup, TargetWriters, 19000),
		concurrentResult("bbolt_cas_concurrent", TargetWriters, 7000),
		concurrentResult("etcd_cas_concurrent", TargetWriters, 5000),
	}
}

// run is a complete run: the absolute rows, and the alternating rows the
// targets compare with the same figures (the durable ones as given).
func run(durableP50, durableMax, durableOps float64) []harness.Result {
	out := absolute(durableP50, durableMax, durableOps)
	for _, r := range absolute(durableP50, durableMax, durableOps) {
		if r.Writers == 1 && r.Name == durableCASConcurrent {
			continue
		}
		out = append(out, withRounds(r))
	}
	return out
}

// TestTargetsReadOnlyAlternatingRows: the absolute rows measured one after
// another never decide a target, even when they would meet it.
func TestTargetsReadOnlyAlternatingRows(t *testing.T) {
	t.Parallel()
	results := absolute(150, 9000, 15000)
	// Alternating rows that miss every target beside absolute rows that
	// meet them all.
	for _, r := range absolute(1000, 90000, 100) {
		results = append(results, withRounds(r))
	}
	for _, tg := range Targets(results) {
		if tg.Met() {
			t.Errorf("%s met (%s): judged on the absolute rows", tg.Name, tg.Measured)
		}
	}
	for _, tg := range Targets(absolute(150, 9000, 15000)) {
		if tg.Verdict() != "not measured" {
			t.Errorf("%s: %s without alternating rows, want not measured", tg.Name, tg.Verdict())
		}
	}
}

// TestTargetsReportRoundSpread: the measured text carries the per-round
// ratios beside the pooled one.
func TestTargetsReportRoundSpread(t *testing.T) {
	t.Parallel()
	results := run(150, 9000, 15000)
	// Round 2 of the store is twice as slow as round 1, the baseline even.
	for i, r := range results {
		if r.Name == Alternating(durableCAS) {
			results[i].Rounds = []harness.RoundStat{{P50us: 100}, {P50us: 200}}
		}
		if r.Name == Alternating(rawAppend) {
			results[i].Rounds = []harness.RoundStat{{P50us: 200}, {P50us: 200}}
		}
	}
	got := Targets(results)[0].Measured
	if want := "0.75× (150 / 200 µs, pooled over the rounds); 2 rounds: 0.50–1.00×, median 0.75×"; got != want {
		t.Errorf("measured %q, want %q", got, want)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		results []harness.Result
		want    []string // verdicts in Targets order
	}{
		{"all met", run(150, 9000, 15000), []string{"met", "met", "met", "met", "met"}},
		{"bounds are inclusive", run(180, 15000, 14000), []string{"met", "met", "met", "met", "met"}},
		{"serial misses", run(190, 15001, 15000), []string{"MISSED", "met", "MISSED", "met", "met"}},
		{"slower than sqlite", run(260, 9000, 15000), []string{"MISSED", "MISSED", "met", "met", "met"}},
		{"concurrent misses", run(150, 9000, 13999), []string{"met", "met", "met", "met", "MISSED"}},
		{"below the library floor", run(150, 9000, 13000), []string{"met", "met", "met", "MISSED", "MISSED"}},
		{"nothing measured", nil, []string{"not measured", "not measured", "not measured", "not measured", "not measured"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Targets(tc.results)
			if len(got) != len(tc.want) {
				t.Fatalf("%d targets, want %d", len(got), len(tc.want))
			}
			for i, tg := range got {
				if tg.Verdict() != tc.want[i] {
					t.Errorf("%s: %s (%s), want %s", tg.Name, tg.Verdict(), tg.Measured, tc.want[i])
				}
			}
		})
	}
}

// TestWrite checks that one call writes the markdown, the three figures
// and the results, and that the markdown carries the run's command,
// machine, versions, verdicts and every row, the cluster's figure in the
// cluster's section.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	results := append(run(150, 9000, 15000), networkRun(300)...)
	results = append(results, clusterRun(500, 0)...)
	r := Run{
		Command: "go run ./bench/cmd/qualify --report .", Started: time.Unix(1700000000, 0), Elapsed: time.Minute,
		Machine:    DescribeMachine(dir),
		Versions:   []Version{{Path: "github.com/tidwall/wal", Version: "v1.2.1"}},
		Serial:     []string{durableCAS, rawAppend, sqliteCAS},
		Concurrent: []string{durableCASConcurrent, walGroup, "bbolt_cas_concurrent"},
	}
	if err := Write(dir, r, results); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{LatencyFigure, ThroughputFile, ClusterFigure} {
		b, err := os.ReadFile(filepath.Join(dir, FigureDir, f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("%s: not an SVG (%v)", f, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	checkClusterFigure(t, dir, string(md))
	for _, want := range []string{r.Command, "github.com/tidwall/wal | v1.2.1", "| met |", "(15000 / 19000 ops/s, pooled over the rounds)", r.Machine.Go,
		FigureDir + "/" + LatencyFigure, FigureDir + "/" + ThroughputFile, "| etcd_cas_concurrent | 127 |",
		"## The network path", "ws_cas ÷ durable_cas (the whole network path): 1.50×", "## The specification's figures beside ours"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "MISSED") {
		t.Error("a met target reported as missed")
	}
}

// TestWriteRefusesEmptyFigures: a run without the workloads of any figure
// is an error, not a report of empty plots.
func TestWriteRefusesEmptyFigures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	err := Write(dir, Run{Serial: []string{"nothing"}, Concurrent: []string{"nothing"}}, run(150, 9000, 15000))
	if err == nil || !strings.Contains(err.Error(), "no workload of any figure") {
		t.Fatalf("Write with no plottable workload: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MarkdownFile)); err == nil {
		t.Fatal("a refused run wrote BENCHMARKS.md")
	}
}

// TestWriteClusterOnlyRun: a run of qualify --only cluster (qualify's own
// figure lists, none of whose workloads ran) draws the cluster's figure
// alone, refers to it from the cluster's section, and says the other two
// were not drawn instead of drawing them empty.
func TestWriteClusterOnlyRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := Run{Command: "go run ./bench/cmd/qualify --only cluster --report DIR", Started: time.Unix(1700000000, 0),
		Serial: []string{durableCAS, rawAppend}, Concurrent: []string{durableCASConcurrent, walGroup}}
	if err := Write(dir, r, clusterRun(500, 0)); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	checkClusterFigure(t, dir, string(md))
	for _, f := range []string{LatencyFigure, ThroughputFile} {
		if _, err := os.Stat(filepath.Join(dir, FigureDir, f)); err == nil {
			t.Errorf("%s drawn for a run that measured none of its workloads", f)
		}
		if strings.Contains(string(md), FigureDir+"/"+f) {
			t.Errorf("BENCHMARKS.md refers to %s, which was not drawn", f)
		}
	}
	for _, want := range []string{"The serial latency figure is not drawn", "The throughput figure is not drawn"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
}

// checkClusterFigure: the cluster's figure is an SVG with a line per side
// of cluster_concurrent at every writer count the rows hold, and md refers
// to it inside the section "The cluster".
func checkClusterFigure(t *testing.T, dir, md string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FigureDir, ClusterFigure))
	if err != nil || !strings.Contains(string(b), "<svg") {
		t.Fatalf("%s: not an SVG (%v)", ClusterFigure, err)
	}
	for _, side := range clusterConcurrent {
		if !strings.Contains(string(b), side.name) {
			t.Errorf("%s has no line for %s", ClusterFigure, side.name)
		}
	}
	if !strings.Contains(string(b), ">8<") || !strings.Contains(string(b), ">127<") {
		t.Errorf("%s does not mark the writer counts 8 and 127 the rows ran", ClusterFigure)
	}
	ref := "![cluster throughput](" + FigureDir + "/" + ClusterFigure + ")"
	start, next := strings.Index(md, "## The cluster"), strings.Index(md, "## The specification's figures")
	at := strings.Index(md, ref)
	if start < 0 || at < start || (next >= 0 && at > next) {
		t.Errorf("BENCHMARKS.md refers to the cluster figure at %d, outside the cluster section (%d to %d)", at, start, next)
	}
}
