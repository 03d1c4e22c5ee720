package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
)

// The specification's process figures are of a process running only the
// store's serial workload. qualify's own process holds the peers (etcd's
// member, SQLite, bbolt), the WebSocket servers and every earlier
// workload's garbage, which would be most of any resident figure, so
// serial_process runs the workload in a child: qualify itself, started
// with the hidden --serial-child flag, which writes its figures to stdout
// as JSON.
const (
	serialChildFlag = "serial-child"
	// idleSample is the specification's idle sample after the run.
	idleSample = 300 * time.Millisecond
)

// processFigures is what the child reports to the parent.
type processFigures struct {
	// Results are the two sides' rows: the durable CAS and the in-memory
	// baseline (NoSync), in alternating rounds.
	Results []harness.Result `json:"results"`
	// RoundRSS is the resident set after each round, in bytes.
	RoundRSS []int64 `json:"round_rss_bytes"`
	// IdleCPU is the CPU time (user and system) the process used over
	// Idle, the idle sample after the run.
	IdleCPU time.Duration `json:"idle_cpu_ns"`
	Idle    time.Duration `json:"idle_ns"`
	// IdleRSS is the resident set at the end of the idle sample; HWM the
	// kernel's high-water mark of it over the process's life (VmHWM),
	// which the specification does not report but bounds the sampled
	// maximum from above.
	IdleRSS int64 `json:"idle_rss_bytes"`
	HWM     int64 `json:"hwm_bytes"`
	// StartRSS is the resident set before either store opened: the
	// runtime's and the binary's share, which the workload did not add.
	StartRSS int64 `json:"start_rss_bytes"`
}

// runSerialChild is the child's whole run: the specification's serial
// workload on a durable store and on the in-memory baseline in
// alternating rounds of one CAS per owner (30 rounds at the default
// --ops), the resident set sampled after each round, then the stores left
// open and idle for idleSample; the figures go to w as JSON. The stores
// live under dir, on the parent's scratch file system.
func runSerialChild(w io.Writer, dir string, ops int, run harness.Runner) error {
	var fig processFigures
	var err error
	if fig.StartRSS, _, err = residentBytes(); err != nil {
		return err
	}
	root, err := os.MkdirTemp(dir, report.SerialProcess+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	durable, err := statestore.Open(statestore.Options{Dir: filepath.Join(root, "durable")})
	if err != nil {
		return err
	}
	defer durable.Close()
	// The specification's in-memory CAS baseline has no file at all; the
	// store's nearest is NoSync: the same journal written, never synced.
	memory, err := statestore.Open(statestore.Options{Dir: filepath.Join(root, "memory"), NoSync: true})
	if err != nil {
		return err
	}
	defer memory.Close()
	var sampleErr error
	run.AfterRound = func(int) {
		rss, _, err := residentBytes()
		sampleErr = errors.Join(sampleErr, err)
		fig.RoundRSS = append(fig.RoundRSS, rss)
	}
	dOwners, mOwners := newOwners(casKeys), newOwners(casKeys)
	sides := []harness.SerialSide{
		{Name: nameDurableCAS, Op: func(i int) error { return dOwners[i%casKeys].cas(durable) }},
		{Name: nameMemoryCAS, Op: func(i int) error { return mOwners[i%casKeys].cas(memory) }},
	}
	if fig.Results, err = run.AlternateSerial(sides, (ops+casKeys-1)/casKeys, casKeys); err != nil {
		return err
	}
	if sampleErr != nil {
		return sampleErr
	}
	cpu0, err := cpuTime()
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(idleSample) // the measurement itself: the process idles
	cpu1, err := cpuTime()
	if err != nil {
		return err
	}
	fig.Idle, fig.IdleCPU = time.Since(start), cpu1-cpu0
	if fig.IdleRSS, fig.HWM, err = residentBytes(); err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(fig)
}

// cpuTime is the CPU time, user and system, this process has used
// (getrusage: microseconds, where /proc's clock ticks are 10 ms and would
// make 300 ms a coarse sample).
func cpuTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// residentBytes reads VmRSS and VmHWM from /proc/self/status.
func residentBytes() (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads the VmRSS and VmHWM lines ("VmRSS:    15188 kB") of a
// /proc/<pid>/status file, in bytes.
func parseStatus(b []byte) (rss, hwm int64, err error) {
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

// runSerialProcess starts the child (this executable with
// --serial-child) and turns its figures into rows: each side's latency
// under report.SerialProcessRow, and the process figures and the
// durability cost under report.SerialProcess.
func runSerialProcess(env *Env) ([]harness.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"--" + serialChildFlag, "--dir", env.Root, "--ops", strconv.Itoa(env.Ops)}
	if env.Run.Ceiling > 0 {
		args = append(args, "--stall-ceiling", env.Run.Ceiling.String())
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the serial process (%s %s): %w: %s", exe, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	var fig processFigures
	if err := json.Unmarshal(out.Bytes(), &fig); err != nil {
		return nil, fmt.Errorf("the serial process's figures: %w", err)
	}
	return processRows(fig)
}

// processRows turns the child's figures into the rows of the report.
func processRows(fig processFigures) ([]harness.Result, error) {
	var d, m harness.Result
	for _, r := range fig.Results {
		switch r.Name {
		case nameDurableCAS:
			d = r
		case nameMemoryCAS:
			m = r
		}
	}
	if d.Name == "" || m.Name == "" || len(fig.RoundRSS) == 0 || fig.Idle <= 0 {
		return nil, fmt.Errorf("the serial process reported %d rows, %d samples and a %v idle sample: want both sides, a sample per round, an idle sample", len(fig.Results), len(fig.RoundRSS), fig.Idle)
	}
	maxRSS := fig.RoundRSS[0]
	for _, v := range fig.RoundRSS {
		maxRSS = max(maxRSS, v)
	}
	idleCPU := 100 * float64(fig.IdleCPU) / float64(fig.Idle)
	d.Name, m.Name = report.SerialProcessRow(nameDurableCAS), report.SerialProcessRow(nameMemoryCAS)
	m.Note += "; NoSync: the journal written, never synced"
	p := harness.Result{Name: report.SerialProcess, Writers: 1,
		Note: fmt.Sprintf("a process running only the two sides above: idle CPU %.1f%% over %v after the run, resident %d bytes then, at most %d bytes sampled after each of %d rounds (VmHWM %d; %d before the stores opened); durability adds %.0f µs at p50, %.0f µs at p95",
			idleCPU, fig.Idle.Round(time.Millisecond), fig.IdleRSS, maxRSS, len(fig.RoundRSS), fig.HWM, fig.StartRSS, d.P50us-m.P50us, d.P95us-m.P95us),
		Figures: map[string]float64{
			report.FigIdleCPUPercent:    idleCPU,
			report.FigIdleRSSBytes:      float64(fig.IdleRSS),
			report.FigMaxRoundRSSBytes:  float64(maxRSS),
			report.FigRoundsSampled:     float64(len(fig.RoundRSS)),
			report.FigHWMBytes:          float64(fig.HWM),
			report.FigStartRSSBytes:     float64(fig.StartRSS),
			report.FigDurabilityP50Us:   d.P50us - m.P50us,
			report.FigDurabilityP95Us:   d.P95us - m.P95us,
			report.FigIdleSampleSeconds: fig.Idle.Seconds(),
		}}
	return []harness.Result{d, m, p}, nil
}
