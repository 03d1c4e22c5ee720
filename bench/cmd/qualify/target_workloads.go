package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/boltpeer"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/bench/sqlitepeer"
	"github.com/keeppeek/statestore/bench/walpeer"
	"github.com/keeppeek/statestore/wire/dispatch"
)

// The target workloads. Every ratio target of issue 15 compares two
// workloads, and this disk's fdatasync cost drifts by 40% between runs
// minutes apart, so a ratio of rows measured one after the other judges
// the disk as much as the store. These two workloads run the sides of the
// targets in alternating rounds in one process (harness.AlternateSerial,
// harness.AlternateConcurrent) and report each side's pooled figures under
// report.Alternating(name); report.Targets judges the targets on those
// rows only. The absolute rows of the other workloads stay for the tables
// and figures.
const (
	nameTargetsSerial     = "targets_serial"
	nameTargetsConcurrent = "targets_concurrent"
	// targetBursts is the number of bursts each side of
	// targets_concurrent runs; each lasts the concurrent budget divided
	// by it, so a side runs as long in all as one row of the table.
	targetBursts = 8
)

// closers closes what a target workload opened, reporting the first error.
type closers []func() error

func (c closers) close() error {
	var errs []error
	for i := len(c) - 1; i >= 0; i-- {
		errs = append(errs, c[i]())
	}
	return errors.Join(errs...)
}

// openIn opens what open makes in a fresh scratch directory named name and
// registers its Close with cl.
func openIn[T interface{ Close() error }](env *Env, cl *closers, name string, open func(dir string) (T, error)) (T, error) {
	var zero T
	dir, err := env.Scratch(name)
	if err != nil {
		return zero, err
	}
	v, err := open(dir)
	if err != nil {
		return zero, err
	}
	*cl = append(*cl, v.Close)
	return v, nil
}

// openStore opens a fresh store with default options.
func openStore(dir string) (*statestore.Store, error) {
	return statestore.Open(statestore.Options{Dir: dir})
}

// runTargetsSerial alternates, in rounds of one compare-and-set per owner
// (127 ops), the store's durable CAS, the raw append+fdatasync floor,
// SQLite's CAS, the durable CAS through the wire (dispatcher and framing
// over net.Pipe, one session per owner) and that CAS answered over net.Pipe
// with no protocol (the wire's transport floor), env.Ops operations each.
func runTargetsSerial(env *Env) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	s, err := openIn(env, &cl, nameDurableCAS, openStore)
	if err != nil {
		return nil, err
	}
	raw, err := openIn(env, &cl, harness.NameRawAppend, func(dir string) (*harness.RawAppender, error) { return harness.NewRawAppender(dir, env.Payload) })
	if err != nil {
		return nil, err
	}
	sq, err := openIn(env, &cl, sqlitepeer.NameCAS, openSQLite)
	if err != nil {
		return nil, err
	}
	wired, err := openIn(env, &cl, nameWireCAS, openStore)
	if err != nil {
		return nil, err
	}
	wire := newWireCAS(dispatch.New(wired, dispatch.Options{}))
	cl = append(cl, wire.close)
	piped, err := openIn(env, &cl, namePipeCASFloor, openStore)
	if err != nil {
		return nil, err
	}
	floor, err := newPipeCAS(piped, newOwners(casKeys))
	if err != nil {
		return nil, err
	}
	cl = append(cl, floor.close)
	owners := newOwners(casKeys)
	sides := []harness.SerialSide{
		{Name: report.Alternating(nameDurableCAS), Op: func(i int) error { return owners[i%casKeys].CAS(s) }},
		{Name: report.Alternating(harness.NameRawAppend), Op: func(int) error { return raw.Append() }},
		{Name: report.Alternating(sqlitepeer.NameCAS), Op: func(i int) error { return sq.CAS(i % casKeys) }},
		{Name: report.Alternating(nameWireCAS), Op: wire.op},
		{Name: report.Alternating(namePipeCASFloor), Op: floor.op},
	}
	return env.Run.AlternateSerial(sides, casRounds(env), casKeys)
}

// casRounds is the number of rounds of one compare-and-set per owner that
// make env.Ops operations (rounded up).
func casRounds(env *Env) int { return (env.Ops + casKeys - 1) / casKeys }

// runTargetsConcurrent alternates bursts of 127 writers of the store's
// concurrent CAS, wal_group (the same bytes through tidwall/wal by one
// group committer) and the peers' concurrent CAS. Each keeps its files
// open across its bursts. A background checkpoint the store started in
// its burst may finish during the next side's (one image, a few ms against
// a burst of env.Budget.Duration/8); the rotation spreads that over every
// other side instead of charging one.
func runTargetsConcurrent(env *Env) (out []harness.Result, err error) {
	const writers = report.TargetWriters
	if writers > casKeys {
		return nil, fmt.Errorf("%d writers exceed %d owners", writers, casKeys)
	}
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	s, err := openIn(env, &cl, nameDurableCASConcurrent, openStore)
	if err != nil {
		return nil, err
	}
	direct, err := openIn(env, &cl, nameDurableCASConcurrentDirect, func(dir string) (*statestore.Store, error) {
		return statestore.Open(statestore.Options{Dir: dir, DirectSync: true})
	})
	if err != nil {
		return nil, err
	}
	wg, err := openIn(env, &cl, walpeer.NameGroup, func(dir string) (*walpeer.Committer, error) { return walpeer.NewCommitter(dir, env.Payload) })
	if err != nil {
		return nil, err
	}
	owners, directOwners := newOwners(casKeys), newOwners(casKeys)
	owned := func(wr int) int { return (casKeys - wr + writers - 1) / writers }
	sides := []harness.ConcurrentSide{
		{Name: report.Alternating(nameDurableCASConcurrent), Op: func(wr, i int) error { return owners[wr+(i%owned(wr))*writers].CAS(s) }},
		{Name: report.Alternating(walpeer.NameGroup), Op: func(int, int) error { return wg.Commit() }},
		{Name: report.Alternating(nameDurableCASConcurrentDirect), Op: func(wr, i int) error { return directOwners[wr+(i%owned(wr))*writers].CAS(direct) }},
	}
	for _, p := range []struct {
		name string
		open openPeer
	}{{sqlitepeer.NameCASConcurrent, openSQLite}, {boltpeer.NameCASConcurrent, openBolt(true)}, {etcdpeer.NameCASConcurrent, openEtcd}} {
		db, err := openIn(env, &cl, p.name, p.open)
		if err != nil {
			return nil, err
		}
		sides = append(sides, harness.ConcurrentSide{Name: report.Alternating(p.name), Op: func(wr, i int) error { return db.CAS(wr + (i%owned(wr))*writers) }})
	}
	return env.Run.AlternateConcurrent(sides, writers, targetBursts, burstOf(env))
}

// burstOf is one burst of an alternating concurrent workload: the
// concurrent budget divided into targetBursts, at least one operation per
// writer.
func burstOf(env *Env) harness.Budget {
	burst := harness.Budget{Duration: env.Budget.Duration / targetBursts, OpsPerWriter: env.Budget.OpsPerWriter / targetBursts}
	if env.Budget.OpsPerWriter > 0 {
		burst.OpsPerWriter = max(1, burst.OpsPerWriter)
	}
	return burst
}

// printTargets prints the targets judged on results when the run measured
// any of them, so a run of the target workloads alone shows its verdicts
// without writing a report.
func printTargets(w io.Writer, results []harness.Result) error {
	targets := report.AllTargets(results)
	measured := false
	for _, t := range targets {
		measured = measured || t.Verdict() != "not measured"
	}
	if !measured {
		return nil
	}
	fmt.Fprintln(w, "\ntargets (ratios of the alternating rows):")
	for _, t := range targets {
		if _, err := fmt.Fprintf(w, "  %-12s %s: %s\n", t.Verdict(), t.Name, t.Measured); err != nil {
			return err
		}
	}
	return nil
}
