package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/nemesis"
	"github.com/keeppeek/statestore/internal/torture"
)

// TestMain lets torture re-execute the test binary as its child or as a
// nemesis node: the environment selects the role, as it does for the
// kpjournal binary.
func TestMain(m *testing.M) {
	if child, code := tortureChildRole(); child {
		os.Exit(code)
	}
	if child, code := holdNodeChild(); child {
		os.Exit(code)
	}
	if node, code := nemesisNodeRole(); node {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestTortureShort is CI's short torture run: a few kills of a real child
// process, each verified, and the history checked. A clean store reports
// no violation, and the run must have exercised what it claims to check.
func TestTortureShort(t *testing.T) {
	// Serial: timing on two cores; each child must get real work done in a
	// 100-300 ms run before its kill, which other tests' load would starve.
	cycles := 6
	if testing.Short() {
		cycles = 3
	}
	dir := filepath.Join(t.TempDir(), "tortured")
	var rep torture.Report
	code, errs := kpJSON(t, &rep, "torture", "--dir", dir, "--cycles", strconv.Itoa(cycles), "--seed", "11", "--min-run", "100ms", "--max-run", "300ms")
	if code != exitOK || len(rep.Violations) != 0 {
		t.Fatalf("torture: exit %d, violations %q, stderr %s", code, rep.Violations, errs)
	}
	if rep.Cycles != cycles || rep.Kills != rep.Cycles {
		t.Fatalf("%d cycles and %d kills, want %d each", rep.Cycles, rep.Kills, cycles)
	}
	if rep.AcknowledgedWrites == 0 || rep.Reads == 0 || rep.WatchUpdatesChecked == 0 || rep.Checkpoints == 0 || rep.BackupsVerified == 0 {
		t.Fatalf("the run exercised too little: %+v", rep)
	}
	if lin := rep.Linearizable; lin.Result != "ok" || lin.Operations < rep.AcknowledgedWrites+rep.Reads {
		t.Fatalf("linearizability %+v over %d writes and %d reads", lin, rep.AcknowledgedWrites, rep.Reads)
	}
	// Checked window by window: every cycle's reads after the reopen closed
	// one window per key.
	if lin := rep.Linearizable; lin.Keys == 0 || lin.Windows != rep.Cycles*lin.Keys {
		t.Fatalf("linearizability %+v: want one window per key and cycle (%d cycles)", lin, rep.Cycles)
	}
	// The store it leaves behind verifies clean with the other commands.
	if code, out, errs := kp(t, "verify", "--dir", dir); code != exitOK {
		t.Fatalf("verify after torture: exit %d\n%s\n%s", code, out, errs)
	}
	// A second run refuses the directory it would otherwise tear into.
	code, _, errs = kp(t, "torture", "--dir", dir, "--cycles", "1")
	if code != exitUsage || !strings.Contains(errs, "already holds a store") {
		t.Fatalf("torture on an existing store: exit %d, stderr %q", code, errs)
	}
}

// TestTortureUsage: bad flags are refused before anything is written.
func TestTortureUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--cycles", "0"}, "--cycles 0: at least 1"},
		{[]string{"--min-run", "300ms", "--max-run", "100ms"}, "want 0 < min-run <= max-run"},
		{[]string{"--min-run", "0s"}, "want 0 < min-run <= max-run"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "d")
		code, out, errs := kp(t, append([]string{"torture", "--dir", dir}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.says) {
			t.Errorf("torture %v: exit %d, stdout %q, stderr %q; want 2 saying %q", c.args, code, out, errs, c.says)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("torture %v created %s although its flags were refused", c.args, dir)
		}
	}
}

// TestTortureCluster is the nemesis through the command line: a couple of
// fault events on three node processes (this test binary in the node
// role), the report as JSON; and the refusals of a cluster size other than
// 3 and of a directory already holding something.
func TestTortureCluster(t *testing.T) {
	// Serial: three node processes on two cores.
	dir := filepath.Join(t.TempDir(), "nemesis")
	var rep nemesis.Report
	code, errs := kpJSON(t, &rep, "torture", "--cluster", "3", "--dir", dir, "--events", "2", "--seed", "5")
	if code != exitOK || len(rep.Violations) != 0 {
		t.Fatalf("torture --cluster 3: exit %d, violations %q, stderr %s", code, rep.Violations, errs)
	}
	if rep.EventCount() != 2 || rep.Ops == 0 || rep.AcknowledgedWrites == 0 || rep.Linearizable.Result != "ok" {
		t.Fatalf("the run did too little: %+v", rep)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--cluster", "5", "--dir", t.TempDir()}, "only a cluster of 3"},
		{[]string{"--cluster", "3", "--events", "0", "--dir", t.TempDir()}, "--events 0"},
		{[]string{"--cluster", "3", "--dir", dir}, "is not empty"},
	} {
		code, _, errs := kp(t, append([]string{"torture"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.says) {
			t.Errorf("torture %v: exit %d, stderr %q; want a usage error saying %q", tc.args, code, errs, tc.says)
		}
	}
}
