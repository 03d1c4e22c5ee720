package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"text/tabwriter"
	"time"

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
	c := newCLI("torture", "--dir DIR [--cycles N] [flags]", tortureAbout, []string{
		"kpjournal torture --dir /tmp/kp-torture --cycles 1000",
		"kpjournal torture --dir /tmp/kp-torture --cycles 50 --seed 7 --json",
	}, stdout, stderr)
	c.FS.StringVar(&c.dir, "dir", "", "directory to build the tortured store in, holding no store yet")
	c.jsonFlag()
	cycles := c.FS.Int("cycles", 100, "kill-and-verify cycles to run")
	seed := c.FS.Uint64("seed", 0, "seed of the kill moments and workloads (0: from the clock; the report prints it)")
	minRun := c.FS.Duration("min-run", 20*time.Millisecond, "shortest time a child runs before its kill")
	maxRun := c.FS.Duration("max-run", 250*time.Millisecond, "longest time a child runs before its kill")
	progress := c.FS.Bool("progress", false, "print one line per cycle on stderr")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.checkDir(true); code >= 0 {
		return code
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(lin.TimedOut) > 0 {
		fmt.Fprintf(w, "\nthe linearizability check timed out on %v\n", lin.TimedOut)
	}
	for _, v := range rep.Violations {
		if _, err := fmt.Fprintf(w, "VIOLATION: %s\n", v); err != nil {
			return err
		}
	}
	return nil
}
