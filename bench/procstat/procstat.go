// Package procstat samples this process's own figures for the process
// workloads (serialproc and serialfloor): resident memory from
// /proc/self/status, CPU time from getrusage, and the Go runtime's memory
// accounts. It imports nothing of the store, so a floor program that
// links it measures only what it runs.
//
// # Invariants
//
//   - Every figure is of this process only: VmRSS and VmHWM from
//     /proc/self/status, CPU time from getrusage(RUSAGE_SELF).
//     Code: ResidentBytes, ParseStatus, CPUTime.
//     Tests: TestParseStatus.
package procstat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/keeppeek/statestore/bench/harness"

	"golang.org/x/sys/unix"
)

// IdleSample is the specification's idle sample after a run.
const IdleSample = 300 * time.Millisecond

// Figures is what a run of the workload measured, as a process workload's
// child reports it to qualify (JSON).
type Figures struct {
	// Results are the sides' rows, in alternating rounds (serialwork:
	// the durable store and its NoSync baseline).
	Results []harness.Result `json:"results"`
	// RoundRSS is the resident set after each round, in bytes.
	RoundRSS []int64 `json:"round_rss_bytes"`
	// IdleCPU is the CPU time (user and system) the process used over
	// Idle, the idle sample after the run.
	IdleCPU time.Duration `json:"idle_cpu_ns"`
	Idle    time.Duration `json:"idle_ns"`
	// IdleRSS is the resident set at the end of the idle sample; HWM the
	// kernel's high-water mark of it (VmHWM), read at the same moment,
	// which the specification does not report. It is at least IdleRSS
	// but may be below an earlier round's sample: the kernel raises it
	// only when pages are unmapped, and the Go scavenger returns memory
	// with madvise, which does not, so a peak it gave back can be missed.
	IdleRSS int64 `json:"idle_rss_bytes"`
	HWM     int64 `json:"hwm_bytes"`
	// StartRSS is the resident set when Run began, before either store
	// opened: the runtime's, the binary's and its packages'
	// initialisation's share. OpenRSS is the resident set once both
	// stores are open, before the first operation.
	StartRSS int64 `json:"start_rss_bytes"`
	OpenRSS  int64 `json:"open_rss_bytes"`
	// Runtime holds the Go runtime's own accounts (runtime/metrics, by
	// metric name) at the end of the idle sample: what of the resident
	// set is heap, stacks, the runtime's metadata, or released.
	Runtime map[string]uint64 `json:"runtime,omitempty"`
	// SampleErr is the first failure of SampleRound, which runs where it
	// cannot return one (harness.Runner.AfterRound).
	SampleErr error `json:"-"`
}

// SampleRound appends the resident set to RoundRSS; as a
// harness.Runner.AfterRound it samples after each round.
func (f *Figures) SampleRound(int) {
	rss, _, err := ResidentBytes()
	if err != nil && f.SampleErr == nil {
		f.SampleErr = fmt.Errorf("the resident sample after round %d: %w", len(f.RoundRSS), err)
	}
	f.RoundRSS = append(f.RoundRSS, rss)
}

// RuntimeMetrics are the runtime/metrics samples Accounts reads.
var RuntimeMetrics = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/gc/heap/goal:bytes",
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/sched/goroutines:goroutines",
}

// Accounts reads RuntimeMetrics, skipping any this Go does not
// know.
func Accounts() map[string]uint64 {
	samples := make([]metrics.Sample, len(RuntimeMetrics))
	for i, name := range RuntimeMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	out := make(map[string]uint64, len(samples))
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[s.Name] = s.Value.Uint64()
		}
	}
	return out
}

// CPUTime is the CPU time, user and system, this process has used
// (getrusage: microseconds, where /proc's clock ticks are 10 ms and would
// make 300 ms a coarse sample).
func CPUTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// ResidentBytes reads VmRSS and VmHWM from /proc/self/status.
func ResidentBytes() (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	return ParseStatus(b)
}

// ParseStatus reads the VmRSS and VmHWM lines ("VmRSS:    15188 kB") of a
// /proc/<pid>/status file, in bytes.
func ParseStatus(b []byte) (rss, hwm int64, err error) {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/self/status: %s: %q is not a count of kB", k, strings.TrimSpace(v))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status: %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc/self/status: no VmRSS and VmHWM lines")
	}
	return rss, hwm, nil
}

// Idle takes the specification's idle sample after a run: the process
// sleeps for IdleSample, then fig gets the CPU time used meanwhile, the
// resident set and its high-water mark, and the runtime's accounts.
func Idle(fig *Figures) error {
	cpu0, err := CPUTime()
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(IdleSample) // the measurement itself: the process idles
	cpu1, err := CPUTime()
	if err != nil {
		return err
	}
	fig.Idle, fig.IdleCPU = time.Since(start), cpu1-cpu0
	if fig.IdleRSS, fig.HWM, err = ResidentBytes(); err != nil {
		return err
	}
	fig.Runtime = Accounts()
	return nil
}

// Main is a child program's main (serialproc, serialfloor): it parses
// --dir, --ops (default defaultOps) and --stall-ceiling from args, runs
// the workload and writes its figures to stdout as one JSON object, the
// shape qualify reads. An error names the flag.
func Main(name string, args []string, defaultOps int, run func(dir string, ops int, r harness.Runner) (Figures, error)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("dir", "", "parent `DIR` of the stores' scratch directory (default: the system temp dir)")
	ops := fs.Int("ops", defaultOps, "operations per side (127 owners x 30 rounds)")
	stall := fs.Duration("stall-ceiling", harness.StallCeiling, "fail the run on any single operation taking `D` or longer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	case *ops <= 0:
		return fmt.Errorf("--ops %d: must be positive", *ops)
	case *stall <= 0:
		return fmt.Errorf("--stall-ceiling %v: must be positive", *stall)
	}
	fig, err := run(*dir, *ops, harness.Runner{Ceiling: *stall})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(fig)
}
