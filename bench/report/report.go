// Package report turns one qualify run into the repository's BENCHMARKS.md
// and its figures: the tables of every result, the targets as
// ratios within the run, the network path (the store over WebSocket
// against itself in process, the bare socket, etcd over gRPC and NATS
// JetStream KV, and the watch fan-out beside both peers), the
// specification's own measured figures beside this run's, the
// machine and versions that produced them, and three SVG plots (serial
// latency distributions, throughput against writer count, the cluster's
// throughput against writer count) drawn with gonum/plot. A figure none
// of whose workloads the run measured (a run of --only cluster draws the
// cluster's alone) is left out and said not drawn, never drawn empty.
//
// # Invariants
//
//  1. Every figure and ratio comes from the results of the one run handed
//     to Write (nothing is carried over from earlier runs); a figure is
//     drawn and referenced only when the run measured a workload of it,
//     and a run that measured none of any figure's is refused.
//     Code: Write, writeMarkdown, plotLatency, plotThroughput, plotClusterThroughput, plotByWriters.
//     Tests: TestWrite, TestWriteClusterOnlyRun, TestWriteRefusesEmptyFigures.
//  2. A target whose inputs are missing from the run is reported as not
//     measured, never as met.
//     Code: Target.Met, Target.Verdict, Targets, wireTarget, NetworkTargets, networkTarget.
//     Tests: TestTargets, TestTargetsReadOnlyAlternatingRows, TestWireTarget, TestNetworkPath.
//  3. The network path's ratios are read from the rows qualify measured in
//     alternating rounds (network_serial, network_concurrent) only, never
//     from rows measured one after another; a ratio whose rows are missing
//     is said not measured; the same for the watch fan-out's, from
//     network_fanout's rounds.
//     Code: WriteNetworkPath, anyNetworkRow, networkRow, networkRatio, writeNetworkFanout.
//     Tests: TestNetworkPath, TestNetworkPathReadsOnlyItsRows.
//  4. Each of the specification's measured figures stands beside this
//     run's figure of the same workload, read from that workload's row
//     of the run; a figure whose row the run did not measure is said not
//     measured, never filled from elsewhere.
//     Code: SpecFigures, WriteSpecFigures, slowest.
//     Tests: TestSpecFigures, TestSpecFiguresNotMeasured.
//  5. The cluster's ratios are read from the rows of qualify's
//     cluster_serial and cluster_concurrent (alternating rounds, one
//     process) and its bounds from the follower_watch_delivery, failover
//     and leader_transfer rows of the same run; a target whose row is
//     missing is said not measured, and a count of UNAVAILABLE answers
//     is judged only when the leader_transfer row carries it.
//     Code: ClusterTargets, WriteCluster, clusterTarget, boundTarget, Target.Verdict.
//     Tests: TestClusterSection, TestClusterTargetsNotMeasured.
package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
)

// Files Write creates, relative to its directory.
const (
	MarkdownFile   = "BENCHMARKS.md"
	FigureDir      = "bench/results"
	LatencyFigure  = "serial_latency.svg"
	ThroughputFile = "throughput.svg"
	ClusterFigure  = "cluster_throughput.svg"
	ResultsFile    = "results.json"
)

// Run describes one qualify run: what was run, where and how.
type Run struct {
	Command  string    // the command line, as typed
	Started  time.Time // when the run began
	Elapsed  time.Duration
	Machine  Machine
	Versions []Version // the stores and libraries measured
	// Serial and Concurrent name the workloads drawn in the latency and
	// throughput figures, in legend order.
	Serial, Concurrent []string
}

// Write writes dir/BENCHMARKS.md, dir/bench/results/serial_latency.svg,
// dir/bench/results/throughput.svg, dir/bench/results/cluster_throughput.svg
// (each figure when the run measured its workloads) and
// dir/bench/results/results.json for the results of run.
func Write(dir string, run Run, results []harness.Result) error {
	figs := filepath.Join(dir, FigureDir)
	if err := os.MkdirAll(figs, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	drawn := map[string]bool{}
	for _, f := range []struct {
		file string
		draw func(path string) error
	}{
		{LatencyFigure, func(path string) error { return plotLatency(path, results, run.Serial) }},
		{ThroughputFile, func(path string) error { return plotThroughput(path, results, run.Concurrent) }},
		{ClusterFigure, func(path string) error { return plotClusterThroughput(path, results) }},
	} {
		switch err := f.draw(filepath.Join(figs, f.file)); {
		case errors.Is(err, errNothingToPlot):
		case err != nil:
			return err
		default:
			drawn[f.file] = true
		}
	}
	if len(drawn) == 0 {
		return fmt.Errorf("%w: the run measured no workload of any figure (serial %v, concurrent %v, the cluster's)", errNothingToPlot, run.Serial, run.Concurrent)
	}
	if err := harness.WriteJSON(filepath.Join(figs, ResultsFile), harness.Report{Results: results}); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, MarkdownFile))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := writeMarkdown(f, run, results, drawn); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeMarkdown writes BENCHMARKS.md, referring to the figures in drawn
// (by file name) and saying which were not drawn.
func writeMarkdown(w io.Writer, run Run, results []harness.Result, drawn map[string]bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Generated by `%s` on %s (%s). Regenerate with the same command; every figure and ratio below comes from that one run. ", run.Command, run.Started.UTC().Format("2006-01-02 15:04 MST"), run.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "The machine is shared and its disk is noisy: compare rows of one run (ratios), not runs with each other.\n\n")
	fmt.Fprintf(&b, "## Machine\n\n")
	m := run.Machine
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s (%d logical CPUs, GOMAXPROCS %d) |\n", m.CPU, m.CPUs, m.GOMAXPROCS)
	fmt.Fprintf(&b, "| Kernel | %s |\n", m.Kernel)
	fmt.Fprintf(&b, "| Scratch file system | %s |\n", m.FileSystem)
	fmt.Fprintf(&b, "| Go | %s %s/%s |\n\n", m.Go, m.OS, m.Arch)
	fmt.Fprintf(&b, "## Versions\n\n| module | version |\n|---|---|\n")
	for _, v := range run.Versions {
		fmt.Fprintf(&b, "| %s | %s |\n", v.Path, v.Version)
	}
	fmt.Fprintf(&b, "\n## Targets (ratios within this run)\n\n")
	fmt.Fprintf(&b, "Each target is judged on its two workloads run in alternating rounds in one process (the `*%s` rows of the results: `targets_serial` runs durable_cas, raw_append_fdatasync, sqlite_cas, wire_cas and pipe_cas_floor (the same CAS answered over net.Pipe with no protocol: the floor under wire_cas) in rounds of 127 operations; `targets_concurrent` runs bursts of 127 writers of durable_cas_concurrent, wal_group, durable_cas_concurrent_direct_sync (the store with every fdatasync holding its processor, Options.DirectSync: what parking the sync on io_uring gains) and each peer, the order rotated every round), ", alternatingSuffix)
	fmt.Fprintf(&b, "so that the disk's drift during the run falls on both sides alike; `inprocess_fanout` runs the specification's fan-out (1,024 watches over 127 sessions, one write a round) three ways, a round each in turn: watch_fanout (the registry handing each update to a sink), wire_fanout (every update encoded, framed, written over a net.Pipe per session by its writer and read whole by its client) and pipe_fanout_floor (frames of the update's size made in advance, written over the same pipes with no protocol: the floor under wire_fanout), each timed from the write to the last watcher holding its update. ")
	fmt.Fprintf(&b, "The ratio is of the figures pooled over every round; the spread of the same ratio over single rounds follows it. ")
	fmt.Fprintf(&b, "The other rows were measured one workload after another and are not compared with each other here.\n\n")
	fmt.Fprintf(&b, "| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range AllTargets(results) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Name, t.Measured, t.Verdict())
	}
	fmt.Fprintf(&b, "\n")
	if err := WriteNetworkPath(&b, results); err != nil {
		return err
	}
	if err := WriteCluster(&b, results); err != nil {
		return err
	}
	if drawn[ClusterFigure] {
		fmt.Fprintf(&b, "![cluster throughput](%s/%s)\n\n", FigureDir, ClusterFigure)
		fmt.Fprintf(&b, "**Cluster throughput against writers.** The concurrent rows above, one line per side: y is acknowledged operations per second (each on a quorum's disks) at each writer count of `cluster_concurrent`'s alternating bursts. ")
		fmt.Fprintf(&b, "`%s` is the store's three node processes through client/ over WebSocket; `%s` and `%s` the peer clusters; `%s` hashicorp/raft with raft-wal and a state machine that does nothing, the floor of the engine the store chose.\n\n", ClusterCASConcurrent, EtcdClusterCASConcurrent, NATSR3CASConcurrent, RaftWALFloorConcurrent)
	}
	if err := WriteSpecFigures(&b, results); err != nil {
		return err
	}
	fmt.Fprintf(&b, "## Figures\n\n")
	for _, f := range []struct{ file, what string }{{LatencyFigure, "serial latency"}, {ThroughputFile, "throughput"}} {
		if !drawn[f.file] {
			fmt.Fprintf(&b, "The %s figure is not drawn: this run measured none of its workloads.\n\n", f.what)
		}
	}
	if drawn[LatencyFigure] {
		writeLatencyFigure(&b)
	}
	if drawn[ThroughputFile] {
		writeThroughputFigure(&b)
	}
	fmt.Fprintf(&b, "## Results\n\n")
	fmt.Fprintf(&b, "Latencies are nearest-rank percentiles in µs; ops/s counts acknowledged operations per wall-clock second.\n\n")
	fmt.Fprintf(&b, "| name | writers | p50 µs | p95 µs | max µs | ops/s | note |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, cell(float64(r.Writers)), cell(r.P50us), cell(r.P95us), cell(r.MaxUs), cell(r.OpsPerS), strings.TrimSpace(r.Note))
	}
	fmt.Fprintf(&b, "\nThe raw figures are in [%s/%s](%s/%s).\n", FigureDir, ResultsFile, FigureDir, ResultsFile)
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// writeLatencyFigure refers to the serial latency figure and says how to
// read it.
func writeLatencyFigure(b *strings.Builder) {
	fmt.Fprintf(b, "![serial latency](%s/%s)\n\n", FigureDir, LatencyFigure)
	fmt.Fprintf(b, "**Serial latency distribution.** One writer, one operation at a time, each timed from call to durable acknowledgement. ")
	fmt.Fprintf(b, "Each curve is one workload: a point (x, y) says y percent of its operations took at most x µs. Left is faster; a curve that rises steeply has little spread; its right end is the slowest operation (max). ")
	fmt.Fprintf(b, "`raw_append_fdatasync` (write then fdatasync, growing a plain file) is the physical floor of an appending log; `raw_overwrite_fdatasync` (the same into a file pre-written with zeros) is the floor of a log that overwrites, which is what the journal's pre-written tail buys; `raw_fallocate_fdatasync` is the same into fallocated (unwritten) space. ")
	fmt.Fprintf(b, "`durable_cas` is the store's compare-and-set of a 2,193-byte media intent, `durable_cas_append_only` the same with the tail left append-only, and the `*_cas` peers run the same CAS on SQLite (WAL, synchronous=FULL), bbolt and embedded etcd.\n\n")
}

// writeThroughputFigure refers to the throughput figure and says how to
// read it.
func writeThroughputFigure(b *strings.Builder) {
	fmt.Fprintf(b, "![throughput](%s/%s)\n\n", FigureDir, ThroughputFile)
	fmt.Fprintf(b, "**Throughput against writers.** Each line is one workload run for a fixed time at each writer count; y is acknowledged (durable) operations per second. ")
	fmt.Fprintf(b, "`raw_group_fdatasync` is one committer appending the writers' bytes to a plain file with one write and one fdatasync per batch: the disk's ceiling. ")
	fmt.Fprintf(b, "`wal_group` is the same bytes through tidwall/wal (WriteBatch then Sync) by one committer with no store logic: the floor of the library the journal is built on. ")
	fmt.Fprintf(b, "`durable_cas_concurrent` is the store (admission, schema validation, journal, view, publishing) with W writers each owning 127/W documents; `memory_cas_concurrent` the same without fsync (the store's CPU ceiling); the peers run the same partitioned CAS.\n\n")
}
