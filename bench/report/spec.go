package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/keeppeek/statestore/bench/harness"
)

// Rows and figures of the specification's own measurements, which qualify
// writes and SpecFigures reads.
const (
	// SerialProcess is the row of the process running only the serial
	// workload (a child of qualify): its process figures and the
	// durability cost.
	SerialProcess = "serial_process"
	// SerialProcessFloor is the row of that workload's floor: the same
	// documents and rounds through tidwall/wal alone, with fdatasync, in a
	// process of its own that links nothing of the store (serialfloor).
	SerialProcessFloor = "serial_process_floor"
	// ContinuousChurn is the row of the churn workload.
	ContinuousChurn = "continuous_churn"
	// OneEntrySnapshot, WatchFanout and OpenFullStore are the rows of the
	// snapshot, the fan-out and the quota workloads.
	OneEntrySnapshot = "one_entry_snapshot"
	WatchFanout      = "watch_fanout"
	OpenFullStore    = "open_full_store"

	FigIdleCPUPercent    = "idle_cpu_percent"
	FigIdleSampleSeconds = "idle_sample_seconds"
	FigIdleRSSBytes      = "idle_rss_bytes"
	FigMaxRoundRSSBytes  = "max_round_rss_bytes"
	FigRoundsSampled     = "rounds_sampled_count"
	FigHWMBytes          = "hwm_rss_bytes"
	FigStartRSSBytes     = "start_rss_bytes"
	FigOpenRSSBytes      = "open_rss_bytes"
	FigDurabilityP50Us   = "durability_cost_p50_us"
	FigDurabilityP95Us   = "durability_cost_p95_us"
	FigPeakDiskBytes     = "peak_disk_bytes"
	FigEndDiskBytes      = "end_disk_bytes"
	FigDiskCeilingBytes  = "disk_ceiling_bytes"
	FigEntries           = "entries_count"
	FigValueBytes        = "value_bytes"
)

// SerialProcessRow is the row of side name (durable_cas, memory_cas) of
// the serial process.
func SerialProcessRow(name string) string { return SerialProcess + "." + name }

// The specification's three qualification commands.
const (
	specQualification = "cargo test --locked --release -p keeppeek --lib qualification -- --nocapture --test-threads=1"
	specFanout        = "cargo test --locked --release -p keeppeek --lib full_watch_capacity_fanout -- --nocapture --test-threads=1"
	specChurn         = "cargo test --locked -p keeppeek --lib continuous_churn -- --nocapture --test-threads=1"
	qualify           = "go run ./bench/cmd/qualify --only "
)

// SpecFigure is one figure the specification reports beside ours from one
// run: the same workload on this machine.
type SpecFigure struct {
	Figure   string // what is measured
	Spec     string // the specification's value
	Ours     string // this run's, or "not measured"
	SpecCmd  string // the specification's command that measures it
	OurCmd   string // ours
	Measured bool
}

// SpecFigures puts each measured figure of the specification's "Measured
// performance" section beside this run's. A figure whose row the run did
// not measure says so; nothing is carried over from another run.
func SpecFigures(results []harness.Result) []SpecFigure {
	var out []SpecFigure
	row := func(name string) (harness.Result, bool) { return find(results, name, 0) }
	add := func(figure, spec, specCmd, ourCmd string, ours func() (string, bool)) {
		f := SpecFigure{Figure: figure, Spec: spec, SpecCmd: specCmd, OurCmd: ourCmd, Ours: "not measured"}
		if v, ok := ours(); ok {
			f.Ours, f.Measured = v, true
		}
		out = append(out, f)
	}
	latency := func(name string) func() (string, bool) {
		return func() (string, bool) {
			r, ok := row(name)
			if !ok || r.P50us == 0 {
				return "", false
			}
			return fmt.Sprintf("%s / %s / %s", cell(r.P50us), cell(r.P95us), cell(r.MaxUs)), true
		}
	}
	figure := func(name, fig, unit string) func() (string, bool) {
		return func() (string, bool) {
			r, ok := row(name)
			v, has := r.Figures[fig]
			if !ok || !has {
				return "", false
			}
			return formatFigure(v, unit), true
		}
	}
	serialCmd := qualify + SerialProcess
	add("In-memory CAS baseline, µs p50 / p95 / max (127 owners × 30 rounds, 2,193-byte document)", "7 / 11 / 119", specQualification, serialCmd,
		latency(SerialProcessRow("memory_cas")))
	add("Durable CAS, µs p50 / p95 / max (the same workload)", "853 / 1,387 / 3,286", specQualification, serialCmd, latency(SerialProcessRow("durable_cas")))
	add("Durability cost at p50 (durable minus in-memory)", "846 µs", specQualification, serialCmd, figure(SerialProcess, FigDurabilityP50Us, "µs"))
	add("Durability cost at p95 (durable minus in-memory)", "1,376 µs", specQualification, serialCmd, figure(SerialProcess, FigDurabilityP95Us, "µs"))
	add("One-entry snapshot, µs p50 / p95 / max", "2 / 3 / 17", specQualification, qualify+OneEntrySnapshot, latency(OneEntrySnapshot))
	add("Process CPU over a 300 ms idle sample after the run", "0%", specQualification, serialCmd, figure(SerialProcess, FigIdleCPUPercent, "%"))
	add("Resident bytes after the idle sample", "15,552,512", specQualification, serialCmd, figure(SerialProcess, FigIdleRSSBytes, "bytes"))
	add("Maximum resident bytes sampled after each of the 30 rounds", "19,861,504", specQualification, serialCmd, func() (string, bool) {
		r, ok := row(SerialProcess)
		v, has := r.Figures[FigMaxRoundRSSBytes]
		if !ok || !has {
			return "", false
		}
		stages := formatFigure(r.Figures[FigStartRSSBytes], "bytes") + " before the stores opened"
		if o, has := r.Figures[FigOpenRSSBytes]; has {
			stages += ", " + formatFigure(o, "bytes") + " after Open"
		}
		return fmt.Sprintf("%s (over %s rounds; VmHWM %s; %s)", formatFigure(v, "bytes"), formatFigure(r.Figures[FigRoundsSampled], ""),
			formatFigure(r.Figures[FigHWMBytes], "bytes"), stages), true
	})
	add("Stall ceiling: any measured operation taking 5 s fails the run", "no operation reached 5 s", specQualification,
		"every workload of the run (--stall-ceiling, default 5s)", func() (string, bool) { return slowest(results) })
	add("Fan-out to 1,024 watches across 127 sessions, 30 rounds, µs p50 / p95 / max", "742 / 860 / 940", specFanout, qualify+WatchFanout, latency(WatchFanout))
	add("Quota workload: documents and value bytes admitted under the 67,108,864-byte ceiling, the next refused", "30,601 documents, 67,107,993 bytes",
		"(not among the three commands)", qualify+OpenFullStore, func() (string, bool) {
			r, ok := row(OpenFullStore)
			n, has := r.Figures[FigEntries]
			if !ok || !has {
				return "", false
			}
			return fmt.Sprintf("%s documents, %s bytes, the next refused", formatFigure(n, ""), formatFigure(r.Figures[FigValueBytes], "")), true
		})
	add("Continuous churn (256 entries filled and drained 24 times): peak disk use (database plus WAL; ours: journal plus checkpoints), ceiling 5 MiB", "4,126,856 bytes",
		specChurn, qualify+ContinuousChurn, figure(ContinuousChurn, FigPeakDiskBytes, "bytes"))
	return out
}

// slowest names the slowest single operation of the run, and whether it
// stayed under the 5 s ceiling (a run in which one reached it fails before
// writing a report).
func slowest(results []harness.Result) (string, bool) {
	var worst harness.Result
	for _, r := range results {
		if r.MaxUs > worst.MaxUs {
			worst = r
		}
	}
	if worst.MaxUs == 0 {
		return "", false
	}
	if worst.MaxUs >= float64(harness.StallCeiling.Microseconds()) {
		return fmt.Sprintf("REACHED: %s µs (%s)", cell(worst.MaxUs), worst.Name), true
	}
	return fmt.Sprintf("none reached 5 s; the slowest took %s µs (%s)", cell(worst.MaxUs), worst.Name), true
}

// formatFigure writes v with thousands separators, as the specification
// does, and its unit.
func formatFigure(v float64, unit string) string {
	var s string
	switch {
	case unit == "%":
		return fmt.Sprintf("%.1f%%", v)
	case v != float64(int64(v)) && v < 100:
		s = fmt.Sprintf("%.1f", v)
	default:
		s = thousands(int64(v + 0.5*sign(v)))
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	d := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// WriteSpecFigures writes the section of BENCHMARKS.md that puts the
// specification's figures beside ours.
func WriteSpecFigures(w io.Writer, results []harness.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## The specification's figures beside ours\n\n")
	fmt.Fprintf(&b, "Each figure of the specification's \"Measured performance\" section (measured on Windows 11 Pro, AMD Ryzen 5 5600G, rustc 1.98.1) beside the same workload of this run, on the machine above, with the specification's command and ours. ")
	fmt.Fprintf(&b, "The process figures come from `%s`: qualify builds and starts serialproc (bench/cmd/serialproc), a process linking only the store, which runs only the serial workload, the durable CAS and the in-memory baseline in alternating rounds of one CAS per owner, samples its resident set (VmRSS) after each round, then idles 300 ms with the stores open and reports the CPU time it used meanwhile (getrusage) and its resident set. ", SerialProcess)
	fmt.Fprintf(&b, "The store has no in-memory mode: its in-memory baseline is Options.NoSync, the same journal written but never synced, so the durability cost here is what the fsyncs add. ")
	fmt.Fprintf(&b, "Hardware, operating system and file system differ from the specification's, so compare the shapes (what durability costs beside the rest, how far memory grows), not the digits.\n\n")
	fmt.Fprintf(&b, "| figure | specification | ours (this run) | specification's command | ours |\n|---|---:|---:|---|---|\n")
	for _, f := range SpecFigures(results) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Figure, f.Spec, f.Ours, codeOrText(f.SpecCmd), codeOrText(f.OurCmd))
	}
	fmt.Fprintf(&b, "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// codeOrText sets a command in code, and a description as it is.
func codeOrText(s string) string {
	if strings.HasPrefix(s, "go ") || strings.HasPrefix(s, "cargo ") {
		return "`" + s + "`"
	}
	return s
}
