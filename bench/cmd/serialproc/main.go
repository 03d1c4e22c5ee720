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
	"fmt"
	"os"

	"github.com/keeppeek/statestore/bench/procstat"
	"github.com/keeppeek/statestore/bench/serialwork"
)

func main() {
	if err := procstat.Main("serialproc", os.Args[1:], serialwork.Owners*30, serialwork.Run); err != nil {
		fmt.Fprintln(os.Stderr, "serialproc:", err)
		os.Exit(1)
	}
}
