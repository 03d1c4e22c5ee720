package main

import (
	"os"
	"runtime/trace"
)

// startTrace writes an execution trace of the run to path until stop is
// called: the scheduler's view (which goroutine wakes which, on which
// processor) that a CPU profile cannot show, for workloads whose cost is
// waiting rather than computing.
func startTrace(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}
