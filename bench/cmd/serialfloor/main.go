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
	"fmt"
	"os"

	"github.com/keeppeek/statestore/bench/procstat"
	"github.com/keeppeek/statestore/bench/serialfloor"
)

func main() {
	if err := procstat.Main("serialfloor", os.Args[1:], serialfloor.Owners*30, serialfloor.Run); err != nil {
		fmt.Fprintln(os.Stderr, "serialfloor:", err)
		os.Exit(1)
	}
}
