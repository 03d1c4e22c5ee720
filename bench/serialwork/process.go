package serialwork

import (
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/procstat"
)

// The two sides' row names: the durable store and the in-memory baseline.
const (
	DurableCAS = "durable_cas"
	MemoryCAS  = "memory_cas"
)

// IdleSample is the specification's idle sample after the run.
const IdleSample = procstat.IdleSample

// Figures is what a run of the workload measured, as the child reports it
// to qualify (JSON).
type Figures = procstat.Figures

// Run is the specification's serial workload: a durable store and the
// in-memory baseline opened under dir, ceil(ops/Owners) alternating rounds
// of one compare-and-set per owner on each, the resident set sampled
// after each round, then both stores left open and idle for IdleSample.
// The stores' directories are removed at the end.
func Run(dir string, ops int, run harness.Runner) (Figures, error) {
	var fig Figures
	var err error
	if fig.StartRSS, _, err = procstat.ResidentBytes(); err != nil {
		return fig, err
	}
	root, err := os.MkdirTemp(dir, "serial_process-")
	if err != nil {
		return fig, err
	}
	defer os.RemoveAll(root)
	durable, err := statestore.Open(statestore.Options{Dir: filepath.Join(root, "durable")})
	if err != nil {
		return fig, err
	}
	defer durable.Close()
	// The specification's in-memory CAS baseline has no file at all; the
	// store's nearest is NoSync: the same journal written, never synced.
	memory, err := statestore.Open(statestore.Options{Dir: filepath.Join(root, "memory"), NoSync: true})
	if err != nil {
		return fig, err
	}
	defer memory.Close()
	if fig.OpenRSS, _, err = procstat.ResidentBytes(); err != nil {
		return fig, err
	}
	run.AfterRound = fig.SampleRound
	dOwners, mOwners := NewOwners(Owners), NewOwners(Owners)
	sides := []harness.SerialSide{
		{Name: DurableCAS, Op: func(i int) error { return dOwners[i%Owners].CAS(durable) }},
		{Name: MemoryCAS, Op: func(i int) error { return mOwners[i%Owners].CAS(memory) }},
	}
	if fig.Results, err = run.AlternateSerial(sides, (ops+Owners-1)/Owners, Owners); err != nil {
		return fig, err
	}
	if fig.SampleErr != nil {
		return fig, fig.SampleErr
	}
	if err := procstat.Idle(&fig); err != nil {
		return fig, err
	}
	return fig, nil
}
