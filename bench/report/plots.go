package report

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/keeppeek/statestore/bench/harness"
)

// errNothingToPlot is a figure none of whose workloads the run measured:
// Write leaves it out rather than draw an empty plot.
var errNothingToPlot = errors.New("report: nothing to plot")

// Figure size: wide enough for a legend beside eight lines.
const (
	figWidth  = 9 * vg.Inch
	figHeight = 5.5 * vg.Inch
)

// plotLatency draws the serial latency distribution of each named result
// (in names' order) as a quantile curve: x is the latency in µs on a log
// axis, y the share of operations at most that slow.
func plotLatency(path string, results []harness.Result, names []string) error {
	p := newFigure("Serial latency distribution (one writer)", "latency per operation, µs (log scale)", "operations at most this slow, %")
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Max = 100
	n := 0
	for _, name := range names {
		r, ok := find(results, name, 1)
		if !ok || len(r.Quantiles) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(r.Quantiles))
		for i, q := range r.Quantiles {
			pts[i] = plotter.XY{X: max(q.Us, 1), Y: q.P}
		}
		if err := addLine(p, n, fmt.Sprintf("%s (p50 %.0f µs)", name, r.P50us), pts); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: no serial result for %s", errNothingToPlot, path)
	}
	return p.Save(figWidth, figHeight, path)
}

// plotThroughput draws acknowledged operations per second against the
// writer count for each named concurrent workload.
func plotThroughput(path string, results []harness.Result, names []string) error {
	return plotByWriters(path, "Throughput against concurrent writers", results, names)
}

// plotClusterThroughput draws the cluster_concurrent rows, the store's
// three nodes beside each peer cluster and the raft-wal floor, the same
// way: the cluster section's figure.
func plotClusterThroughput(path string, results []harness.Result) error {
	var names []string
	for _, s := range clusterConcurrent {
		names = append(names, s.name)
	}
	return plotByWriters(path, "Cluster throughput against concurrent writers (three nodes on loopback each)", results, names)
}

// plotByWriters draws acknowledged operations per second against the
// writer count for each named workload, the x axis marked at the writer
// counts they ran.
func plotByWriters(path, title string, results []harness.Result, names []string) error {
	p := newFigure(title, "concurrent writers (log scale)", "acknowledged operations per second")
	var drawn []harness.Result
	for _, r := range results {
		if slices.Contains(names, r.Name) && r.Writers > 0 && r.OpsPerS > 0 {
			drawn = append(drawn, r)
		}
	}
	p.X.Tick.Marker = writerTicks(drawn)
	p.Legend.Top, p.Legend.Left = true, true
	n := 0
	for _, name := range names {
		var pts plotter.XYs
		for _, r := range results {
			if r.Name == name && r.Writers > 0 && r.OpsPerS > 0 {
				pts = append(pts, plotter.XY{X: float64(r.Writers), Y: r.OpsPerS})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		if err := addLine(p, n, name, pts); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: no concurrent result for %s", errNothingToPlot, path)
	}
	return p.Save(figWidth, figHeight, path)
}

// newFigure is a plot with a log x axis, a y axis from 0, and a grid.
func newFigure(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Scale = plot.LogScale{}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds the i-th series with its own colour, dash and glyph, so
// lines stay apart in grey print too.
func addLine(p *plot.Plot, i int, label string, pts plotter.XYs) error {
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return fmt.Errorf("report: %s: %w", label, err)
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i / 7)
	l.Width = vg.Points(1.5)
	s.Color = plotutil.Color(i)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(label, l, s)
	return nil
}

// writerTicks marks exactly the writer counts that were run.
func writerTicks(results []harness.Result) plot.ConstantTicks {
	seen := map[int]bool{}
	var ticks plot.ConstantTicks
	for _, r := range results {
		if r.Writers > 0 && !seen[r.Writers] {
			seen[r.Writers] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.Writers), Label: fmt.Sprint(r.Writers)})
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// find returns the result named name at the given writer count (0: at
// any).
func find(results []harness.Result, name string, writers int) (harness.Result, bool) {
	for _, r := range results {
		if r.Name == name && (writers == 0 || r.Writers == writers || (writers == 1 && r.Writers == 0)) {
			return r, true
		}
	}
	return harness.Result{}, false
}
