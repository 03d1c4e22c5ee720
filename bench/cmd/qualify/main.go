// Command qualify runs the statestore qualification workloads and the
// physical baselines they are judged against, prints an aligned table and
// optionally writes the results as JSON.
//
// Run it from the repository root with
//
//	go run ./bench/cmd/qualify [flags]
//
// (bench is its own module; the repository's go.work makes it resolve from
// the root). The full run that regenerates BENCHMARKS.md is
//
//	go run ./bench/cmd/qualify --report .
//
// Flags:
//
//	--json FILE          also write {"results": [...]} to FILE
//	--dir DIR            parent of the scratch directory (default: os.TempDir)
//	--ops N              operations of serial workloads (default 3810 = 127 owners x 30 rounds)
//	--writers LIST       writer counts of concurrent workloads (default 1,8,64,127)
//	--duration D         wall time of each concurrent run (default 2s)
//	--ops-per-writer N   if > 0, bound concurrent runs by ops per writer instead of --duration
//	--stall-ceiling D    any single operation taking D fails the run, naming the
//	                     workload and the operation (default 5s, the specification's)
//	--payload N          bytes per durable write (default 2273 = 2193-byte document + 80 frame)
//	--only LIST          run only these workloads, by name or group
//	                     (cluster: the cluster's rows beside etcd, NATS and
//	                     the raft-wal floor, and its own figures)
//	--list               print the workload names and exit
//	--cpuprofile FILE    write a CPU profile of the run to FILE
//	--trace FILE         write an execution trace of the run to FILE (go tool
//	                     trace): where a workload's goroutines wait and wake
//	--report DIR         write DIR/BENCHMARKS.md with tables, targets, machine
//	                     and versions, and DIR/bench/results/*.svg figures; run
//	                     from the repository root with --report . to
//	                     regenerate the repository's BENCHMARKS.md
//
// The cluster's rows run their nodes as processes of this executable; with
// QUALIFY_NODE_CPUPROFILE=DIR in the environment each node writes a CPU
// profile of its life to DIR (a node killed by the failover row leaves
// none), which --cpuprofile, of qualify's own process, does not hold.
package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
)

// workload is one named benchmark; see workloads.go.
type workload struct {
	name string
	run  func(env *Env) ([]harness.Result, error)
}

// Env is what every workload receives: the sizes chosen on the command line
// and a scratch area that qualify removes when it exits.
type Env struct {
	// Root is this run's scratch directory; prefer Scratch.
	Root string
	// Ops is the operation count of serial workloads.
	Ops int
	// Writers lists the writer counts of concurrent workloads.
	Writers []int
	// Budget bounds each concurrent run.
	Budget harness.Budget
	// Payload is the number of bytes one durable write appends.
	Payload int
	// Verbose enables Logf output on stderr.
	Verbose bool
	// Run times the workloads' operations under the stall ceiling: a
	// workload runs its measurements through it, or checks the operations
	// it times itself with Run.Check.
	Run harness.Runner
}

// Scratch returns a fresh, empty directory under Root for one workload run.
func (e *Env) Scratch(name string) (string, error) {
	return os.MkdirTemp(e.Root, name+"-")
}

// Logf prints progress to stderr when Verbose is set.
func (e *Env) Logf(format string, args ...any) {
	if e.Verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func main() {
	// A cluster node's process is this executable run again
	// (cluster_node.go).
	if cfg := os.Getenv(envClusterNode); cfg != "" {
		os.Exit(clusterNodeMain(cfg))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "qualify:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("qualify", pflag.ContinueOnError)
	jsonPath := fs.String("json", "", "also write the results as JSON to `FILE`")
	dir := fs.String("dir", "", "parent `DIR` of the scratch directory (default: the system temp dir); use one on the store's filesystem")
	ops := fs.Int("ops", 127*30, "operations of serial workloads (127 owners x 30 rounds)")
	writers := fs.IntSlice("writers", []int{1, 8, 64, 127}, "writer counts of concurrent workloads")
	duration := fs.Duration("duration", 2*time.Second, "wall time of each concurrent run")
	opsPerWriter := fs.Int("ops-per-writer", 0, "if > 0, bound each concurrent run by this many ops per writer instead of --duration")
	payload := fs.Int("payload", harness.DefaultPayload, "bytes per durable write (document + frame overhead)")
	only := fs.StringSlice("only", nil, "run only these workloads (comma-separated names, or a group: cluster)")
	list := fs.Bool("list", false, "print the workload names and exit")
	verbose := fs.BoolP("verbose", "v", false, "print progress to stderr")
	reportDir := fs.String("report", "", "write `DIR`/BENCHMARKS.md and DIR/bench/results/ (SVG figures, results.json) for this run")
	stall := fs.Duration("stall-ceiling", harness.StallCeiling, "fail the run on any single operation taking `D` or longer")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE` (go tool pprof)")
	traceFile := fs.String("trace", "", "write an execution trace of the whole run to `FILE` (go tool trace)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *list {
		for _, w := range workloads {
			fmt.Println(w.name)
		}
		return nil
	}

	selected, err := selectWorkloads(*only)
	if err != nil {
		return err
	}
	switch {
	case *ops <= 0:
		return fmt.Errorf("--ops must be positive")
	case *payload <= 0:
		return fmt.Errorf("--payload must be positive")
	case len(*writers) == 0:
		return fmt.Errorf("--writers must name at least one count")
	case *opsPerWriter <= 0 && *duration <= 0:
		return fmt.Errorf("--duration must be positive (or set --ops-per-writer)")
	case *stall <= 0:
		return fmt.Errorf("--stall-ceiling must be positive")
	}
	for _, w := range *writers {
		if w <= 0 {
			return fmt.Errorf("--writers: %d is not positive", w)
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if *traceFile != "" {
		stop, err := startTrace(*traceFile)
		if err != nil {
			return err
		}
		defer stop()
	}
	root, err := os.MkdirTemp(*dir, "qualify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	env := &Env{
		Root:    root,
		Ops:     *ops,
		Writers: *writers,
		Budget:  harness.Budget{OpsPerWriter: *opsPerWriter, Duration: *duration},
		Payload: *payload,
		Verbose: *verbose,
		Run:     harness.Runner{Ceiling: *stall},
	}
	fmt.Printf("scratch %s, ops %d, writers %v, budget %v, payload %dB\n",
		root, env.Ops, env.Writers, env.Budget, env.Payload)

	started := time.Now()
	var rep harness.Report
	var runErr error
	for _, w := range selected {
		env.Logf("running %s", w.name)
		res, err := w.run(env)
		rep.Results = append(rep.Results, res...)
		if err != nil {
			runErr = fmt.Errorf("%s: %w", w.name, err)
			break
		}
	}
	fmt.Println()
	if err := harness.WriteTable(os.Stdout, rep.Results); err != nil {
		return err
	}
	if err := printTargets(os.Stdout, rep.Results); err != nil {
		return err
	}
	if report.ClusterMeasured(rep.Results) {
		fmt.Println()
		if err := report.WriteCluster(os.Stdout, rep.Results); err != nil {
			return err
		}
	}
	if report.NetworkMeasured(rep.Results) {
		fmt.Println()
		if err := report.WriteNetworkPath(os.Stdout, rep.Results); err != nil {
			return err
		}
	}
	if *jsonPath != "" {
		if err := harness.WriteJSON(*jsonPath, rep); err != nil {
			return err
		}
		abs, _ := filepath.Abs(*jsonPath)
		fmt.Printf("\nwrote %s\n", abs)
	}
	if *reportDir != "" && runErr == nil {
		run := report.Run{
			Command:    "go run ./bench/cmd/qualify " + strings.Join(args, " "),
			Started:    started,
			Elapsed:    time.Since(started),
			Machine:    report.DescribeMachine(root),
			Versions:   report.ModuleVersions(measuredModules...),
			Serial:     serialFigure,
			Concurrent: concurrentFigure,
		}
		if err := report.Write(*reportDir, run, rep.Results); err != nil {
			return err
		}
		abs, _ := filepath.Abs(filepath.Join(*reportDir, report.MarkdownFile))
		fmt.Printf("\nwrote %s and its figures\n", abs)
	}
	return runErr
}

// selectWorkloads returns the workloads named in only (all when empty), a
// group standing for its members, in list order, and rejects unknown
// names.
func selectWorkloads(only []string) ([]workload, error) {
	if len(only) == 0 {
		return workloads, nil
	}
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
	}
	want := map[string]bool{}
	for _, n := range only {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if members, ok := groups[n]; ok {
			for _, m := range members {
				want[m] = true
			}
			continue
		}
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("--only: unknown workload %q (known: %s; groups: %s)", n, strings.Join(names, ", "), strings.Join(slices.Sorted(maps.Keys(groups)), ", "))
		}
		want[n] = true
	}
	var out []workload
	for _, w := range workloads {
		if want[w.name] {
			out = append(out, w)
		}
	}
	return out, nil
}
