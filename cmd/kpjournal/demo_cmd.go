package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/demo"
)

// stopContext is the context --metrics-listen and serve run until:
// cancelled by SIGINT or SIGTERM. A variable so a test can end the wait
// itself.
var stopContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

const demoAbout = `Runs the state store's main behaviours on a real store and prints each step. Two
coordinators compare-and-set one intent key from the same revision: one wins, the other gets CONFLICT
with the current revision, rereads and retries. A transcoder worker claims a lease create-only with a
1 s TTL; a standby's claim conflicts, so it stays standby; the holder stops renewing, the lease lapses
(an EXPIRE is journaled and the namespace revision advances) and the standby's claim succeeds. A
coordinator watches two key prefixes and receives its snapshot, then each update with its
watch_sequence, revision and kind (PUT, EXPIRE), acknowledging each as it applies it. The store is
then closed, reopened and its journal replayed, and its entries are listed with revisions and owners.
Last, a backup taken while the store serves is restored into a second directory and compared entry
by entry. It takes a few seconds, most of them waiting for leases to lapse. Without --dir the store
lives in a temporary directory removed afterwards; with --dir it stays there for the other commands
to inspect, so DIR must not already hold a store. With --metrics-listen the store's Prometheus
metrics are served at http://ADDR/metrics throughout, and at the end the demo keeps its last store
open, a worker renewing its lease every second, until interrupted.`

func runDemo(args []string, stdout, stderr io.Writer) int {
	c := newCLI("demo", "[--dir DIR] [--metrics-listen ADDR]", demoAbout, []string{
		"kpjournal demo",
		"kpjournal demo --dir /tmp/kp-demo && kpjournal dump --dir /tmp/kp-demo",
		"kpjournal demo --metrics-listen :9464",
	}, stdout, stderr)
	c.FS.StringVar(&c.dir, "dir", "", "directory to build the demo's store in, holding no store yet (default: a new temporary directory, removed afterwards)")
	listen := c.FS.String("metrics-listen", "", "serve Prometheus metrics at http://`ADDR`/metrics during the demo and, after it, until interrupted; a bare :PORT listens on 127.0.0.1 only")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.checkDir(false); code >= 0 {
		return code
	}
	if _, err := os.Stat(c.root()); c.dir != "" && err == nil {
		return c.Fail(exitUsage, "%s already holds a store; the demo builds a new one, so it would fail part way. "+
			"Give --dir a new directory, or leave --dir out to use a temporary one.", c.root())
	}
	d := c.dir
	if d == "" {
		tmp, err := os.MkdirTemp("", "kpjournal-demo-")
		if err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		defer os.RemoveAll(tmp)
		d = tmp
	}
	var hooks demo.Hooks
	if *listen != "" {
		m, err := demo.StartMetrics(*listen)
		if err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		defer m.Stop()
		fmt.Fprintf(stdout, "metrics: %s\n", m.URL())
		ctx, stop := stopContext()
		defer stop()
		hooks = demo.Hooks{Opened: m.Opened, Done: func(s *statestore.Store) error { return m.Linger(ctx, s, stdout) }}
	}
	if err := demo.Run(d, stdout, hooks); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	return exitOK
}
