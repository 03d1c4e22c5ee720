// Command serialfloor runs the floor of the specification's serial
// workload (serialfloor.Run: the same documents and rounds through
// tidwall/wal alone, with fdatasync) in a process that links nothing of
// the store, and writes its figures to stdout as one JSON object, the
// shape serialproc writes. qualify's serial_process_floor row builds and
// starts it; by hand:
//
//	cd bench && go run ./cmd/serialfloor --dir /var/tmp
//
// Like serialproc it sets no GOGC or memory limit of its own.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/serialfloor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "serialfloor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("serialfloor", flag.ContinueOnError)
	dir := fs.String("dir", "", "parent `DIR` of the stores' scratch directory (default: the system temp dir)")
	ops := fs.Int("ops", serialfloor.Owners*30, "operations per side (127 owners x 30 rounds)")
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
	fig, err := serialfloor.Run(*dir, *ops, harness.Runner{Ceiling: *stall})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(fig)
}
