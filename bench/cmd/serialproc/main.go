// Command serialproc runs the specification's serial workload
// (serialwork.Run) in a process that links only the store, and writes its
// figures to stdout as one JSON object. qualify's serial_process row
// builds and starts it; it is also the way to measure the process by
// hand:
//
//	go run ./bench/cmd/serialproc --dir /var/tmp
//
// It sets no GOGC or memory limit of its own: the specification's figures
// are of its workload as the embedder runs it, and the runtime's
// environment variables still apply when given.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/serialwork"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "serialproc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("serialproc", flag.ContinueOnError)
	dir := fs.String("dir", "", "parent `DIR` of the stores' scratch directory (default: the system temp dir)")
	ops := fs.Int("ops", serialwork.Owners*30, "operations per side (127 owners x 30 rounds)")
	stall := fs.Duration("stall-ceiling", harness.StallCeiling, "fail the run on any single operation taking `D` or longer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	case *ops <= 0:
		return fmt.Errorf("--ops %d: must be positive", *ops)
	case *stall <= 0:
		return fmt.Errorf("--stall-ceiling %v: must be positive", *stall)
	}
	fig, err := serialwork.Run(*dir, *ops, harness.Runner{Ceiling: *stall})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(fig)
}
