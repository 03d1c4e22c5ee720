package main

import (
	"fmt"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/sqlitepeer"
)

// casKeys is the number of owners (documents) of the CAS workloads; with the
// default --ops of 3810 every key is updated 30 times.
const casKeys = 127

// workloads lists every workload qualify knows, in run order. Add a workload
// by appending {name, run}: run receives the shared Env and returns one
// Result per measured row (for example one per writer count). Use
// env.Scratch(name) for files and env.Budget / env.Writers / env.Ops /
// env.Payload for sizing so that the command-line flags apply.
var workloads = []workload{
	{name: nameDurableCAS, run: runDurableCAS},
	{name: nameDurableCASMetrics, run: runDurableCASMetrics},
	{name: nameWireCAS, run: runWireCAS},
	{name: harness.NameRawAppend, run: runRawAppend},
	{name: nameMemoryCAS, run: runMemoryCAS},
	{name: nameValidateMediaIntent, run: runValidateMediaIntent},
	{name: nameWatchFanout, run: runWatchFanout},
	{name: nameWireFanout, run: runWireFanout},
	{name: nameWSFanout, run: runWSFanout},
	{name: nameOneEntrySnapshot, run: runOneEntrySnapshot},
	{name: nameOpenFullStore, run: runOpenFullStore},
	{name: nameReplayJournal, run: runReplayJournal},
	{name: nameBackupFullStore, run: runBackupFullStore},
	{name: nameDurableCASConcurrent, run: runDurableCASConcurrent},
	{name: nameMemoryCASConcurrent, run: runMemoryCASConcurrent},
	{name: harness.NameRawGroup, run: runRawGroup},
	{name: sqlitepeer.NameCAS, run: runSQLiteCAS},
	{name: sqlitepeer.NameCASConcurrent, run: runSQLiteCASConcurrent},
}

// runRawAppend is the serial write+fdatasync floor, env.Ops operations.
func runRawAppend(env *Env) ([]harness.Result, error) {
	dir, err := env.Scratch(harness.NameRawAppend)
	if err != nil {
		return nil, err
	}
	r, err := harness.RawAppendFdatasync(dir, env.Payload, env.Ops)
	if err != nil {
		return nil, err
	}
	return []harness.Result{r}, nil
}

// runRawGroup is the group-commit ceiling, once per writer count.
func runRawGroup(env *Env) ([]harness.Result, error) {
	dir, err := env.Scratch(harness.NameRawGroup)
	if err != nil {
		return nil, err
	}
	var out []harness.Result
	for _, w := range env.Writers {
		r, err := harness.RawGroupFdatasync(dir, env.Payload, w, env.Budget)
		if err != nil {
			return out, err
		}
		env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
		out = append(out, r)
	}
	return out, nil
}

// runSQLiteCAS is the serial SQLite peer: env.Ops compare-and-sets cycling
// over casKeys documents of harness.DocBytes bytes.
func runSQLiteCAS(env *Env) ([]harness.Result, error) {
	dir, err := env.Scratch(sqlitepeer.NameCAS)
	if err != nil {
		return nil, err
	}
	db, err := sqlitepeer.Open(dir, casKeys, harness.DocBytes, 1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r, err := harness.Serial(sqlitepeer.NameCAS, env.Ops, func(i int) error {
		return db.CAS(i % casKeys)
	})
	if err != nil {
		return nil, err
	}
	r.Note = fmt.Sprintf("n=%d keys=%d doc=%dB wal sync=full", env.Ops, casKeys, harness.DocBytes)
	return []harness.Result{r}, nil
}

// runSQLiteCASConcurrent is the concurrent SQLite peer: per writer count W,
// writer w cycles over the keys k with k%W == w, through one connection.
func runSQLiteCASConcurrent(env *Env) ([]harness.Result, error) {
	var out []harness.Result
	for _, w := range env.Writers {
		if w > casKeys {
			return out, fmt.Errorf("%d writers exceed %d keys", w, casKeys)
		}
		dir, err := env.Scratch(sqlitepeer.NameCASConcurrent)
		if err != nil {
			return out, err
		}
		db, err := sqlitepeer.Open(dir, casKeys, harness.DocBytes, 1)
		if err != nil {
			return out, err
		}
		writers := w
		r, err := harness.RunBudget(sqlitepeer.NameCASConcurrent, writers, env.Budget, func(wr, i int) error {
			owned := (casKeys - wr + writers - 1) / writers
			return db.CAS(wr + (i%owned)*writers)
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		r.Note += fmt.Sprintf(" keys=%d doc=%dB wal sync=full conns=1", casKeys, harness.DocBytes)
		env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
		out = append(out, r)
	}
	return out, nil
}
