package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/bench/serialwork"
)

// The specification's process figures are of a process running only the
// store's serial workload. qualify's own process links the peers (etcd's
// member, SQLite, bbolt), the WebSocket servers and every earlier
// workload's garbage, which would be most of any resident figure; and
// even a fresh qualify process initialises every package it links. So
// serial_process builds serialproc, a command linking only the store and
// serialwork, and runs the workload there; it writes its figures to
// stdout as JSON.
const serialProcPackage = "github.com/keeppeek/statestore/bench/cmd/serialproc"

// serial_process_floor runs the same workload's bytes through tidwall/wal
// alone in serialfloor, a command linking nothing of the store, so the
// serial process's figures can be read against what journaling those
// bytes with the journal's library costs at least.
const serialFloorPackage = "github.com/keeppeek/statestore/bench/cmd/serialfloor"

// serialProcTimeout bounds the child's run: the specification's workload
// takes seconds; a child still running after this is killed (by its PID)
// and the row fails.
var serialProcTimeout = 10 * time.Minute

// buildChild builds the command pkg into dir and returns the binary's
// path, with the go command on PATH (the one that runs qualify).
func buildChild(dir, pkg string) (string, error) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building %s: no go command: %w", pkg, err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	var errOut bytes.Buffer
	cmd := exec.Command(gocmd, "build", "-o", bin, pkg)
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(errOut.String()))
	}
	return bin, nil
}

// runSerialProcess builds serialproc once into the run's scratch, starts
// it, and turns its figures into rows: each side's latency under
// report.SerialProcessRow, and the process figures and the durability
// cost under report.SerialProcess.
func runSerialProcess(env *Env) ([]harness.Result, error) {
	fig, err := runChild(env, serialProcPackage)
	if err != nil {
		return nil, err
	}
	return processRows(fig)
}

// runSerialFloor builds and starts serialfloor the same way and reports
// its process figures under report.SerialProcessFloor, its sides' latencies
// under that row's name and the side's.
func runSerialFloor(env *Env) ([]harness.Result, error) {
	fig, err := runChild(env, serialFloorPackage)
	if err != nil {
		return nil, err
	}
	return floorRows(fig)
}

// runChild builds the process workload pkg into the run's scratch, runs
// it with the run's operations and stall ceiling, and returns the figures
// it wrote.
func runChild(env *Env, pkg string) (serialwork.Figures, error) {
	var fig serialwork.Figures
	dir, err := os.MkdirTemp(env.Root, filepath.Base(pkg)+"-bin-")
	if err != nil {
		return fig, err
	}
	defer os.RemoveAll(dir)
	bin, err := buildChild(dir, pkg)
	if err != nil {
		return fig, err
	}
	args := []string{"--dir", env.Root, "--ops", strconv.Itoa(env.Ops)}
	if env.Run.Ceiling > 0 {
		args = append(args, "--stall-ceiling", env.Run.Ceiling.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), serialProcTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Kill() } // this child's PID only
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("killed after %v: %w", serialProcTimeout, err)
		}
		return fig, fmt.Errorf("the process workload (%s %s): %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	if err := json.Unmarshal(out.Bytes(), &fig); err != nil {
		return fig, fmt.Errorf("the figures of %s: %w", bin, err)
	}
	return fig, nil
}

// processRows turns the child's figures into the rows of the report.
func processRows(fig serialwork.Figures) ([]harness.Result, error) {
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
	maxRSS := slices.Max(fig.RoundRSS)
	idleCPU := 100 * float64(fig.IdleCPU) / float64(fig.Idle)
	d.Name, m.Name = report.SerialProcessRow(nameDurableCAS), report.SerialProcessRow(nameMemoryCAS)
	m.Note += "; NoSync: the journal written, never synced"
	p := harness.Result{Name: report.SerialProcess, Writers: 1,
		Note: fmt.Sprintf("a process running only the two sides above (serialproc): idle CPU %.1f%% over %v after the run, resident %d bytes then, at most %d bytes sampled after each of %d rounds (VmHWM %d; %d at start, %d after Open); durability adds %.0f µs at p50, %.0f µs at p95",
			idleCPU, fig.Idle.Round(time.Millisecond), fig.IdleRSS, maxRSS, len(fig.RoundRSS), fig.HWM, fig.StartRSS, fig.OpenRSS, d.P50us-m.P50us, d.P95us-m.P95us),
		Figures: processFigures(fig, maxRSS, idleCPU)}
	p.Figures[report.FigDurabilityP50Us] = d.P50us - m.P50us
	p.Figures[report.FigDurabilityP95Us] = d.P95us - m.P95us
	return []harness.Result{d, m, p}, nil
}

// processFigures are a child process's memory and idle figures, by the
// report's names.
func processFigures(fig serialwork.Figures, maxRSS int64, idleCPU float64) map[string]float64 {
	return map[string]float64{
		report.FigIdleCPUPercent:    idleCPU,
		report.FigIdleRSSBytes:      float64(fig.IdleRSS),
		report.FigMaxRoundRSSBytes:  float64(maxRSS),
		report.FigRoundsSampled:     float64(len(fig.RoundRSS)),
		report.FigHWMBytes:          float64(fig.HWM),
		report.FigStartRSSBytes:     float64(fig.StartRSS),
		report.FigOpenRSSBytes:      float64(fig.OpenRSS),
		report.FigIdleSampleSeconds: fig.Idle.Seconds(),
	}
}

// floorRows turns serialfloor's figures into rows: its two sides, then
// the process figures under report.SerialProcessFloor.
func floorRows(fig serialwork.Figures) ([]harness.Result, error) {
	if len(fig.Results) != 2 || len(fig.RoundRSS) == 0 || fig.Idle <= 0 {
		return nil, fmt.Errorf("the floor process reported %d rows, %d samples and a %v idle sample: want both sides, a sample per round, an idle sample", len(fig.Results), len(fig.RoundRSS), fig.Idle)
	}
	maxRSS := slices.Max(fig.RoundRSS)
	idleCPU := 100 * float64(fig.IdleCPU) / float64(fig.Idle)
	rows := make([]harness.Result, 0, 3)
	for _, r := range fig.Results {
		r.Name = report.SerialProcessFloor + "." + r.Name
		rows = append(rows, r)
	}
	rows = append(rows, harness.Result{Name: report.SerialProcessFloor, Writers: 1,
		Note: fmt.Sprintf("the serial process's floor (serialfloor): the same documents and rounds through tidwall/wal alone (fdatasync per entry, and never synced), nothing of the store linked: idle CPU %.1f%% over %v, resident %d bytes then, at most %d bytes sampled after each of %d rounds (VmHWM %d; %d at start, %d after opening the logs)",
			idleCPU, fig.Idle.Round(time.Millisecond), fig.IdleRSS, maxRSS, len(fig.RoundRSS), fig.HWM, fig.StartRSS, fig.OpenRSS),
		Figures: processFigures(fig, maxRSS, idleCPU)})
	return rows, nil
}
