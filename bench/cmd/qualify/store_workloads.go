package main

import (
	"fmt"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/serialwork"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

// Names of the store's own workloads in the JSON report.
const (
	nameDurableCAS           = serialwork.DurableCAS
	nameDurableCASConcurrent = "durable_cas_concurrent"
	nameMemoryCAS            = serialwork.MemoryCAS
	nameMemoryCASConcurrent  = "memory_cas_concurrent"
	// nameDurableCASAppend is durable_cas with the journal's tail left
	// append-only (Options.NoPrewrite): what pre-writing gains, measured
	// in the same run.
	nameDurableCASAppend = "durable_cas_append_only"
	// nameDurableCASConcurrentAppend is the same for the concurrent run.
	nameDurableCASConcurrentAppend = "durable_cas_concurrent_append_only"
	// nameDurableCASConcurrentDirect is the concurrent run with every
	// fdatasync holding its processor (Options.DirectSync): what parking
	// the sync gains. It runs only as a side of targets_concurrent.
	nameDurableCASConcurrentDirect = "durable_cas_concurrent_direct_sync"
)

// casOwner is one of the specification's simulated owner IDs
// (serialwork.Owner, shared with the serial_process child).
type casOwner = serialwork.Owner

// newOwners makes n owners, each with its own document.
var newOwners = serialwork.NewOwners

// casKey is the one key every owner writes.
const casKey = serialwork.Key

// openScratch opens a store with opts in a fresh scratch directory named
// for the workload.
func openScratch(env *Env, name string, opts statestore.Options) (*statestore.Store, error) {
	dir, err := env.Scratch(name)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	return statestore.Open(opts)
}

// runSerialCAS is the specification's serial workload: env.Ops operations
// cycling over 127 owners (30 rounds at the default 3,810).
func runSerialCAS(env *Env, name string, noSync, noPrewrite bool) ([]harness.Result, error) {
	s, err := openScratch(env, name, statestore.Options{NoSync: noSync, NoPrewrite: noPrewrite})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	owners := newOwners(casKeys)
	r, err := env.Run.Serial(name, env.Ops, func(i int) error { return owners[i%casKeys].CAS(s) })
	if err != nil {
		return nil, err
	}
	r.Writers = 1
	r.Note = fmt.Sprintf("owners=%d doc=%dB", casKeys, harness.DocBytes)
	if noSync {
		r.Note += " journal without fsync"
	}
	if noPrewrite {
		r.Note += " tail not pre-written"
	}
	return []harness.Result{r}, nil
}

func runDurableCAS(env *Env) ([]harness.Result, error) {
	return runSerialCAS(env, nameDurableCAS, false, false)
}
func runDurableCASAppend(env *Env) ([]harness.Result, error) {
	return runSerialCAS(env, nameDurableCASAppend, false, true)
}
func runMemoryCAS(env *Env) ([]harness.Result, error) {
	return runSerialCAS(env, nameMemoryCAS, true, false)
}

// runDurableCASConcurrent runs W writers, each owning the owners o with
// o % W == w and compare-and-setting them in turn, once per writer count.
func runDurableCASConcurrent(env *Env) ([]harness.Result, error) {
	return runConcurrentCAS(env, nameDurableCASConcurrent, false, false)
}

// runDurableCASConcurrentAppend is durable_cas_concurrent with the
// journal's tail left append-only.
func runDurableCASConcurrentAppend(env *Env) ([]harness.Result, error) {
	return runConcurrentCAS(env, nameDurableCASConcurrentAppend, false, true)
}

// runMemoryCASConcurrent is the same workload with the journal written but
// never fsynced: the store's own ceiling at each writer count on this
// machine (admission, journal copying, publishing and the Go runtime's
// share), which no fsync schedule can raise.
func runMemoryCASConcurrent(env *Env) ([]harness.Result, error) {
	return runConcurrentCAS(env, nameMemoryCASConcurrent, true, false)
}

func runConcurrentCAS(env *Env, name string, noSync, noPrewrite bool) ([]harness.Result, error) {
	var out []harness.Result
	for _, w := range env.Writers {
		if w > casKeys {
			return out, fmt.Errorf("%d writers exceed %d owners", w, casKeys)
		}
		dir, err := env.Scratch(name)
		if err != nil {
			return out, err
		}
		s, err := statestore.Open(statestore.Options{Dir: dir, NoSync: noSync, NoPrewrite: noPrewrite})
		if err != nil {
			return out, err
		}
		owners := newOwners(casKeys)
		writers := w
		r, err := env.Run.RunBudget(name, writers, env.Budget, func(wr, i int) error {
			owned := (casKeys - wr + writers - 1) / writers
			return owners[wr+(i%owned)*writers].CAS(s)
		})
		st, sst := s.JournalStats(), s.Stats()
		r.Note += fmt.Sprintf(" batches=%d mean_batch=%.1f syncs=%d records_per_sync=%.1f sync_mean=%.0fµs checkpoints=%d",
			st.Appends, float64(st.Records)/float64(max(st.Appends, 1)), st.Syncs, float64(st.Records)/float64(max(st.Syncs, 1)),
			float64(sst.SyncLatency.Sum)/float64(max(sst.SyncLatency.Count, 1))/1e3, sst.Checkpoints.Written)
		if noSync {
			r.Note += " journal without fsync"
		}
		if noPrewrite {
			r.Note += " tail not pre-written"
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
		out = append(out, r)
	}
	return out, nil
}

const nameValidateMediaIntent = "validate_media_intent"

// runValidateMediaIntent times one validation of the 2,193-byte document,
// the dominant part of admission (the quota checks are a few comparisons).
func runValidateMediaIntent(env *Env) ([]harness.Result, error) {
	reg := schema.NewRegistry()
	docs := make([][]byte, casKeys)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(harness.DocBytes, i)
	}
	r, err := env.Run.Serial(nameValidateMediaIntent, env.Ops, func(i int) error {
		return reg.Validate(schema.MediaIntentV1, docs[i%casKeys])
	})
	if err != nil {
		return nil, err
	}
	r.Writers = 1
	r.Note = fmt.Sprintf("doc=%dB", harness.DocBytes)
	return []harness.Result{r}, nil
}
