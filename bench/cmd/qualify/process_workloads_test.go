package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/bench/serialfloor"
	"github.com/keeppeek/statestore/bench/serialwork"
)

// TestSerialProcess builds serialproc, runs the serial workload in it,
// two rounds, and checks the rows the parent makes of the figures it
// reported: both sides' latencies, a resident sample per round, the idle
// sample, and the durability cost as durable minus in-memory.
func TestSerialProcess(t *testing.T) {
	t.Parallel()
	env := &Env{Root: t.TempDir(), Ops: 2 * casKeys}
	got, err := runSerialProcess(env)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	want := []string{report.SerialProcessRow(nameDurableCAS), report.SerialProcessRow(nameMemoryCAS), report.SerialProcess}
	if !slices.Equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	d, m, p := got[0], got[1], got[2]
	if d.P50us <= 0 || m.P50us <= 0 || !strings.Contains(d.Note, "n=254 in 2 rounds") {
		t.Errorf("sides %+v and %+v: want 2 rounds of latencies each", d, m)
	}
	f := p.Figures
	if f[report.FigRoundsSampled] != 2 || f[report.FigIdleRSSBytes] < 1<<20 || f[report.FigMaxRoundRSSBytes] < 1<<20 ||
		f[report.FigHWMBytes] < f[report.FigIdleRSSBytes] || f[report.FigStartRSSBytes] <= 0 {
		t.Errorf("process figures %v: want 2 round samples, resident sizes of at least 1 MiB, VmHWM at least the idle resident size read with it", f)
	}
	if f[report.FigOpenRSSBytes] < f[report.FigStartRSSBytes] || f[report.FigOpenRSSBytes] < 1<<20 {
		t.Errorf("resident %v after Open, %v at start: want the stores' share on top", f[report.FigOpenRSSBytes], f[report.FigStartRSSBytes])
	}
	if s := f[report.FigIdleSampleSeconds]; s < serialwork.IdleSample.Seconds() || s > 10 {
		t.Errorf("idle sample of %vs, want at least %v", s, serialwork.IdleSample)
	}
	if c := f[report.FigIdleCPUPercent]; c < 0 || c > 100*2 {
		t.Errorf("idle CPU %v%%: not a share of at most two processors", c)
	}
	if f[report.FigDurabilityP50Us] != d.P50us-m.P50us || f[report.FigDurabilityP95Us] != d.P95us-m.P95us {
		t.Errorf("durability cost %v/%v, want %v/%v", f[report.FigDurabilityP50Us], f[report.FigDurabilityP95Us], d.P50us-m.P50us, d.P95us-m.P95us)
	}
}

// TestSerialProcessFloor builds serialfloor, runs two rounds in it and
// checks its rows: both tidwall/wal sides with every operation timed, then
// the process figures, a resident sample per round.
func TestSerialProcessFloor(t *testing.T) {
	t.Parallel()
	got, err := runSerialFloor(&Env{Root: t.TempDir(), Ops: 2 * casKeys})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	want := []string{report.SerialProcessFloor + "." + serialfloor.WALFdatasync, report.SerialProcessFloor + "." + serialfloor.WALNoSync, report.SerialProcessFloor}
	if !slices.Equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	if !strings.Contains(got[0].Note, "n=254 in 2 rounds") || got[0].P50us <= 0 {
		t.Errorf("side %+v: want 2 rounds of latencies", got[0])
	}
	f := got[2].Figures
	if f[report.FigRoundsSampled] != 2 || f[report.FigMaxRoundRSSBytes] < 1<<20 || f[report.FigHWMBytes] < f[report.FigIdleRSSBytes] || f[report.FigIdleSampleSeconds] < serialwork.IdleSample.Seconds() {
		t.Errorf("floor figures %v: want 2 round samples, resident sizes of at least 1 MiB, VmHWM at least the idle resident size read with it, the idle sample", f)
	}
}

// TestSerialProcessStall: the child's stall ceiling is the parent's, and a
// stall in the child fails the parent's workload, naming the side and
// the operation.
func TestSerialProcessStall(t *testing.T) {
	t.Parallel()
	env := &Env{Root: t.TempDir(), Ops: casKeys, Run: harness.Runner{Ceiling: time.Nanosecond}}
	_, err := runSerialProcess(env)
	if err == nil || !strings.Contains(err.Error(), "op 0 took") || !strings.Contains(err.Error(), "stall ceiling of 1ns") {
		t.Fatalf("err %v, want the child's stall at op 0", err)
	}
}

// TestStallFailsTheQualifyRun: a run with an operation at the ceiling
// fails, naming the workload and the operation, and writes no report.
func TestStallFailsTheQualifyRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	err := run([]string{"--only", nameValidateMediaIntent, "--ops", "10", "--dir", dir, "--stall-ceiling", "1ns", "--report", dir})
	want := nameValidateMediaIntent + ": " + nameValidateMediaIntent + ": op 0 took "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err %v, want one starting %q", err, want)
	}
	if _, serr := os.Stat(dir + "/" + report.MarkdownFile); !os.IsNotExist(serr) {
		t.Errorf("a failed run wrote %s: %v", report.MarkdownFile, serr)
	}
	if err := run([]string{"--only", nameValidateMediaIntent, "--ops", "10", "--dir", dir, "--stall-ceiling", "0s"}); err == nil {
		t.Errorf("--stall-ceiling 0s accepted")
	}
}

// TestContinuousChurn runs two cycles of the churn and checks its row:
// every put and delete timed, the peak disk use sampled and at least what
// is left at the end.
func TestContinuousChurn(t *testing.T) {
	t.Parallel()
	env := &Env{Root: t.TempDir()}
	got, err := churn(env, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != report.ContinuousChurn {
		t.Fatalf("rows %+v", got)
	}
	r := got[0]
	peak, end := r.Figures[report.FigPeakDiskBytes], r.Figures[report.FigEndDiskBytes]
	// 512 documents of 2,193 bytes went through the journal; its tail is
	// pre-written, so even the first sample holds a segment.
	if peak < 2193 || end <= 0 || r.Figures[report.FigDiskCeilingBytes] != 5<<20 || r.P50us <= 0 || !strings.Contains(r.Note, "(1024 puts and deletes)") {
		t.Errorf("churn row %+v", r)
	}
}
