package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
)

func TestLiveStoreIsRefused(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(5) // the store stays open: its LOCK is held
	bak := filepath.Join(t.TempDir(), "b")
	for _, args := range [][]string{
		{"verify"}, {"replay"}, {"dump"}, {"stat"}, {"backup", "--out", bak},
		{"repair", "--yes"}, {"checkpoint"}, {"verify", "--json"},
	} {
		code, out, errs := kp(t, append(args, "--dir", ts.dir)...)
		if code != exitUsage || out != "" {
			t.Errorf("%v on a live store: exit %d, stdout %q", args, code, out)
		}
		wantContains(t, strings.Join(args, " ")+" stderr", errs, "in use", "LOCK", "Stop the media server", "copy the directory")
	}
	code, _, errs := kp(t, "restore", "--in", bak, "--dir", ts.dir)
	if code != exitUsage || !strings.Contains(errs, "in use") {
		t.Errorf("restore into a live store: exit %d: %s", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(3)
	ts.close()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{nil, "Usage: kpjournal <command>"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"verify"}, "--dir is required"},
		{[]string{"verify", "--dir", ts.dir, "--bogus"}, "unknown flag"},
		{[]string{"verify", "--dir", ts.dir, "extra"}, "unexpected argument"},
		{[]string{"verify", "--dir", t.TempDir()}, "no store in"},
		{[]string{"verify", "--dir", filepath.Join(ts.dir, statestore.StoreDirName)}, "pass its parent"},
		{[]string{"verify", "--dir", ts.dir, "--max-entries-per-namespace", "-1"}, "negative"},
		{[]string{"dump", "--dir", ts.dir, "--from", "5", "--to", "3"}, "--from 5 is after --to 3"},
		{[]string{"replay", "--dir", ts.dir, "--at", "x"}, "invalid argument"},
		{[]string{"backup", "--dir", ts.dir}, "--out is required"},
		{[]string{"backup", "--dir", ts.dir, "--out", "-", "--json"}, "both write stdout"},
		{[]string{"restore", "--dir", ts.dir}, "--in is required"},
		{[]string{"repair", "--dir", ts.dir, "--truncate-after", "-4"}, "negative"},
	} {
		code, out, errs := kp(t, tc.args...)
		if code != exitUsage || !strings.Contains(out+errs, tc.says) {
			t.Errorf("kpjournal %v: exit %d, want 2 saying %q\nstdout: %s\nstderr: %s", tc.args, code, tc.says, out, errs)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, out, _ := kp(t, "--help")
	if code != exitOK {
		t.Fatalf("--help exit %d", code)
	}
	wantContains(t, "kpjournal --help", out, "Exit codes:", "0  success", "1  problems found", "2  usage or I/O error",
		"verify", "replay", "dump", "stat", "repair", "checkpoint", "backup", "restore", "demo", "compare", "recover-cluster")
	for _, c := range commands {
		code, out, errs := kp(t, c.name, "--help")
		if code != exitOK || errs != "" {
			t.Errorf("%s --help: exit %d, stderr %q", c.name, code, errs)
		}
		wantContains(t, c.name+" --help", out, "Usage: kpjournal "+c.name, "Example", "  kpjournal "+c.name)
		if c.name != "demo" {
			wantContains(t, c.name+" --help", out, "--json", "Exit codes")
		}
	}
}

func TestDemoStillWorks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the demo waits for a lease to lapse")
	}
	code, out, errs := kp(t, "demo")
	if code != exitOK {
		t.Fatalf("demo: exit %d: %s", code, errs)
	}
	wantContains(t, "demo output", out, "CONFLICT", "replayed", "lease lapsed", "ack_result:")
}
