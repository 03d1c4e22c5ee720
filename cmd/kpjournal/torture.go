package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keeppeek/statestore/internal/nemesis"
	"github.com/keeppeek/statestore/internal/torture"
)

const tortureAbout = `Kills a store's writer with SIGKILL at random moments, over and over, and checks after
each kill what survived; it writes. Each cycle re-executes kpjournal as a child process that opens the
store in DIR and runs compare-and-set writers and deleters on a few hot keys, a lease holder claiming
and renewing TTL leases, a watcher checking every update's watch_sequence and revision, checkpoints
and online backups. After each kill kpjournal reopens the store and checks that Open succeeds, that
no torn-tail cut reached an acknowledged record, that every acknowledged write is present or
superseded and every unexpired acknowledged lease present, that no revision went back, and that the
newest reported backup loads. The history of the hot keys across every restart (reads, writes, and
the operations kills cut short) is checked for linearizability with porcupine, window by window: the
reads kpjournal makes after each reopen, with no child running, close one window and start the next,
so memory stays bounded by one cycle's operations however many cycles run. Prints the cycles, kills,
acknowledged writes and every violation; exits 1 if there is any. DIR must not already hold a store:
the command builds its own there and leaves it for the other commands to inspect.`

// Environment of the child role: kpjournal re-executed by torture runs
// the workload instead of a command when these are set.
const (
	envTortureChild = "KPJOURNAL_TORTURE_CHILD_SEED"
	envTortureDir   = "KPJOURNAL_TORTURE_CHILD_DIR"
)

// tortureChildRole runs the torture child if the environment selects it,
// and reports whether it did (it returns only on the child's failure).
func tortureChildRole() (bool, int) {
	seedText, dir := os.Getenv(envTortureChild), os.Getenv(envTortureDir)
	if seedText == "" || dir == "" {
		return false, 0
	}
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kpjournal torture child: %s=%q: %v\n", envTortureChild, seedText, err)
		return true, exitUsage
	}
	err = torture.RunChild(dir, seed, os.Stdout)
	fmt.Fprintf(os.Stderr, "kpjournal torture child: %v\n", err)
	return true, exitProblems
}

// tortureChild is how a cycle starts its child: this executable again,
// with the child role selected through the environment.
var tortureChild = func(dir string, seed uint64) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envTortureChild+"="+strconv.FormatUint(seed, 10), envTortureDir+"="+dir)
	return cmd
}

func runTorture(args []string, stdout, stderr io.Writer) int {
	c := newCLI("torture", "--dir DIR [--cycles N | --cluster 3 --events N] [flags]", tortureAbout+clusterTortureAbout, []string{
		"kpjournal torture --dir /tmp/kp-torture --cycles 1000",
		"kpjournal torture --dir /tmp/kp-torture --cycles 50 --seed 7 --json",
		"kpjournal torture --cluster 3 --dir /tmp/kp-nemesis --events 1000",
	}, stdout, stderr)
	c.FS.StringVar(&c.dir, "dir", "", "directory to build the tortured store in, holding no store yet")
	c.jsonFlag()
	cycles := c.FS.Int("cycles", 100, "kill-and-verify cycles to run")
	seed := c.FS.Uint64("seed", 0, "seed of the kill moments and workloads (0: from the clock; the report prints it)")
	minRun := c.FS.Duration("min-run", 20*time.Millisecond, "shortest time a child runs before its kill")
	maxRun := c.FS.Duration("max-run", 250*time.Millisecond, "longest time a child runs before its kill")
	progress := c.FS.Bool("progress", false, "print one line per cycle (or round) on stderr")
	clusterSize := c.FS.Int("cluster", 0, "run the nemesis on a cluster of this many node processes instead (only 3)")
	events := c.FS.Int("events", 1000, "with --cluster: fault events to inject")
	faults := c.FS.String("faults", "", "with --cluster: the fault kinds to draw from, comma-separated (default all: "+strings.Join(nemesis.FaultKinds(), ",")+")")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.checkDir(true); code >= 0 {
		return code
	}
	if *clusterSize != 0 {
		var kinds []string
		if *faults != "" {
			kinds = strings.Split(*faults, ",")
		}
		return runNemesis(c, stdout, stderr, *clusterSize, *events, *seed, *progress, kinds)
	}
	switch {
	case *cycles < 1:
		return c.UsageError("--cycles %d: at least 1", *cycles)
	case *minRun <= 0 || *maxRun < *minRun:
		return c.UsageError("--min-run %v --max-run %v: want 0 < min-run <= max-run", *minRun, *maxRun)
	}
	if _, err := os.Stat(c.root()); err == nil {
		return c.Fail(exitUsage, "%s already holds a store; torture builds its own and kills its writer, so give it a new directory", c.root())
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	cfg := torture.Config{Dir: c.dir, Cycles: *cycles, Seed: *seed, MinRun: *minRun, MaxRun: *maxRun, Child: tortureChild}
	if *progress {
		cfg.Progress = stderr
	}
	rep, err := torture.Run(cfg)
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	return c.finish(stdout, rep, func(w io.Writer) error { return printTorture(w, rep) }, len(rep.Violations))
}

// printTorture renders the report as a table and the violations as a list.
func printTorture(w io.Writer, rep *torture.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	lin := rep.Linearizable
	rows := []struct {
		name  string
		value any
	}{
		{"store", rep.Dir}, {"seed", rep.Seed}, {"cycles", rep.Cycles}, {"kills", rep.Kills},
		{"acknowledged writes", rep.AcknowledgedWrites}, {"acknowledged leases", rep.AcknowledgedLeases},
		{"conflicts", rep.Conflicts}, {"reads", rep.Reads}, {"cut short by a kill", rep.CutShort},
		{"checkpoints", rep.Checkpoints}, {"backups verified", rep.BackupsVerified},
		{"watch updates checked", rep.WatchUpdatesChecked}, {"torn tails cut", rep.TailCuts},
		{"linearizability", fmt.Sprintf("%s (%d operations on %d keys, in %d windows of at most %d)", lin.Result, lin.Operations, lin.Keys, lin.Windows, lin.LargestWindow)},
		{"violations", len(rep.Violations)}, {"seconds", fmt.Sprintf("%.1f", rep.Seconds)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%v\n", r.name, r.value)
	}
	return printTortureEnd(w, tw, lin.TimedOut, rep.Violations)
}

const clusterTortureAbout = `

With --cluster 3 it runs the nemesis instead: three cluster nodes, each this executable re-executed
as its own process on loopback, under clients on random nodes doing compare-and-set, blind writes,
deletes, leases and watches, while faults are injected at random (seeded): SIGKILL and restart of a
node (the leader more often), partitions through a fault proxy in front of every node pair's raft and
forwarding ports (one follower cut off, the leader isolated, a bridge), SIGSTOP and SIGCONT, failed
fdatasyncs of a node's raft log, and a follower removed and added back. After each round of faults
it heals them, waits for the cluster to recover and reads every key; the whole history is checked for
linearizability with porcupine (outcomes never answered count as unknown), every acknowledged write
must be present, every watch must deliver each update once in commit order with no gap without a
closure, and each lease must expire once and never before its deadline. Prints the events by kind,
operations, unknown outcomes and violations; exits 1 if there is any. DIR must hold no store.`

// nemesisNode is how the nemesis starts a node: this executable again,
// whose environment (nemesis.NodeEnv, which Run adds) selects the node
// role.
var nemesisNode = func() *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe)
}

// nemesisNodeRole runs a nemesis cluster node if the environment selects
// it, and reports whether it did.
func nemesisNodeRole() (bool, int) {
	cfg := os.Getenv(nemesis.NodeEnv)
	if cfg == "" {
		return false, 0
	}
	if err := nemesis.NodeMain(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kpjournal nemesis node: %v\n", err)
		return true, exitProblems
	}
	return true, exitOK
}

func runNemesis(c *cli, stdout, stderr io.Writer, size, events int, seed uint64, progress bool, kinds []string) int {
	switch {
	case size != 3:
		return c.UsageError("--cluster %d: only a cluster of 3 is supported", size)
	case events < 1:
		return c.UsageError("--events %d: at least 1", events)
	}
	for _, k := range kinds {
		if !slices.Contains(nemesis.FaultKinds(), k) {
			return c.UsageError("--faults: unknown kind %q (want some of %s)", k, strings.Join(nemesis.FaultKinds(), ","))
		}
	}
	if entries, err := os.ReadDir(c.dir); err == nil && len(entries) > 0 {
		return c.Fail(exitUsage, "%s is not empty; the nemesis builds its own cluster there, so give it a new directory", c.dir)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	cfg := nemesis.Config{Dir: c.dir, Events: events, Seed: seed, Command: nemesisNode, Faults: kinds}
	if progress {
		cfg.Progress = stderr
	}
	rep, err := nemesis.Run(cfg)
	if err != nil {
		if rep != nil {
			printNemesis(stderr, rep)
		}
		return c.Fail(exitProblems, "%v", err)
	}
	problems := len(rep.Violations)
	if rep.Failed() && problems == 0 {
		problems = 1
	}
	return c.finish(stdout, rep, func(w io.Writer) error { return printNemesis(w, rep) }, problems)
}

// printNemesis renders the nemesis report as a table and the violations
// as a list.
func printNemesis(w io.Writer, rep *nemesis.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	lin := rep.Linearizable
	unknown := 0
	for _, n := range rep.Unknown {
		unknown += n
	}
	fmt.Fprintf(tw, "cluster\t%s\nseed\t%d\nrounds\t%d\nfault events\t%d\n", rep.Dir, rep.Seed, rep.Rounds, rep.EventCount())
	for _, k := range slices.Sorted(maps.Keys(rep.Events)) {
		fmt.Fprintf(tw, "  %s\t%d\n", k, rep.Events[k])
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Skipped)) {
		fmt.Fprintf(tw, "  %s skipped (not aimable)\t%d\n", k, rep.Skipped[k])
	}
	rows := []struct {
		name  string
		value any
	}{
		{"operations", rep.Ops}, {"reads", rep.Reads}, {"acknowledged writes", rep.AcknowledgedWrites},
		{"conflicts", rep.Conflicts}, {"unknown outcomes", unknown}, {"acknowledged leases", rep.AcknowledgedLeases},
		{"expiries seen", rep.Expiries}, {"early expiries", rep.EarlyExpiries}, {"watch updates", rep.WatchUpdates},
		{"re-snapshots", rep.Resnapshots}, {"lost writes", rep.Lost},
		{"linearizability", fmt.Sprintf("%s (%d operations on %d keys, in %d windows of at most %d)", lin.Result, lin.Operations, lin.Keys, lin.Windows, lin.LargestWindow)},
		{"violations", len(rep.Violations)}, {"seconds", fmt.Sprintf("%.1f", rep.Seconds)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%v\n", r.name, r.value)
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Unknown)) {
		fmt.Fprintf(tw, "  unknown: %s\t%d\n", k, rep.Unknown[k])
	}
	return printTortureEnd(w, tw, lin.TimedOut, rep.Violations)
}

// printTortureEnd ends both torture reports alike: the table, the keys
// whose linearizability check timed out, and each violation.
func printTortureEnd(w io.Writer, tw *tabwriter.Writer, timedOut, violations []string) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(timedOut) > 0 {
		fmt.Fprintf(w, "\nthe linearizability check timed out on %v\n", timedOut)
	}
	for _, v := range violations {
		if _, err := fmt.Fprintf(w, "VIOLATION: %s\n", v); err != nil {
			return err
		}
	}
	return nil
}
