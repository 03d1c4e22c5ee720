package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/cliflag"
)

// kpjournal help CMD prints exactly what CMD --help prints.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		code, out, errs := kp(t, "help", c.name)
		_, want, _ := kp(t, c.name, "--help")
		if code != exitOK || errs != "" || out != want || !strings.HasPrefix(out, "Usage: kpjournal "+c.name) {
			t.Errorf("help %s: exit %d, stderr %q, stdout differs from %s --help:\n%s", c.name, code, errs, c.name, out)
		}
	}
	code, _, errs := kp(t, "help", "frobnicate")
	if code != exitUsage || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, stderr %q", code, errs)
	}
	code, out, _ := kp(t, "help")
	if code != exitOK || !strings.Contains(out, "kpjournal help <command>") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
}

// The demo's help names every part of what the demo shows.
func TestDemoHelpDescribesTheDemo(t *testing.T) {
	t.Parallel()
	_, out, _ := kp(t, "help", "demo")
	wantContains(t, "demo help", cliflag.Wrap(out, 1<<20), "compare-and-set", "CONFLICT", "rereads and retries",
		"lease create-only", "EXPIRE", "standby", "watches", "watch_sequence", "acknowledging",
		"reopened and its journal replayed", "backup", "restored", "--dir", "must not already hold a store")
}

// The top-level help says which commands require --dir, which take it
// optionally, and each command's own flags agree.
func TestTopLevelHelpIsExactAboutDir(t *testing.T) {
	t.Parallel()
	_, out, _ := kp(t, "help")
	listed := map[string]string{} // command -> "required" or "optional"
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		for _, how := range []string{"required", "optional"} {
			rest, ok := strings.CutPrefix(line, how+" by ")
			if !ok {
				rest, ok = strings.CutPrefix(line, how+" for ")
			}
			if !ok {
				continue
			}
			names, _, _ := strings.Cut(rest, ":")
			for _, n := range strings.Split(names, ", ") {
				if _, dup := listed[n]; dup {
					t.Errorf("%s is listed twice under --dir", n)
				}
				listed[n] = how
			}
		}
	}
	for _, c := range commands {
		_, help, _ := kp(t, c.name, "--help")
		takesDir := strings.Contains(help, "--dir string")
		how, ok := listed[c.name]
		if ok != takesDir {
			t.Errorf("%s: top-level help lists it under --dir: %v; its own flags have --dir: %v", c.name, ok, takesDir)
		}
		if how != "required" {
			continue
		}
		args := []string{c.name}
		switch c.name { // the other required flags, so --dir is what is missing
		case "backup":
			args = append(args, "--out", filepath.Join(t.TempDir(), "b"))
		case "restore":
			args = append(args, "--in", filepath.Join(t.TempDir(), "b"))
		}
		code, _, errs := kp(t, args...)
		if code != exitUsage || !strings.Contains(errs, "--dir is required") {
			t.Errorf("%v without --dir: exit %d, stderr %q; the help says --dir is required", args, code, errs)
		}
	}
	if got := listed["demo"]; got != "optional" {
		t.Errorf("demo's --dir is listed as %q, want optional", got)
	}
	if strings.Contains(out, "Every command but demo takes --dir") {
		t.Error("the top-level help still claims demo takes no --dir")
	}
}

// A regular file given as --dir is reported as not a directory, by every
// command that takes --dir, and is left alone.
func TestDirIsAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		args, says := []string{c.name, "--dir", file}, "--dir "+file+" is not a directory"
		switch c.name {
		case "backup":
			args = append(args, "--out", filepath.Join(t.TempDir(), "b"))
		case "restore":
			args = append(args, "--in", file)
		case "compare":
			args, says = []string{c.name, "--index", "1", file, file}, "DIR "+file+" is not a directory"
		case "recover-cluster":
			args, says = []string{c.name, "--peers", file, file}, "DIR "+file+" is not a directory"
		}
		code, out, errs := kp(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, says) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("the file was changed: %q, %v", b, err)
	}
	// DIR/state-store a file: named as such, not as missing.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state-store"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kp(t, "stat", "--dir", dir)
	if code != exitUsage || !strings.Contains(errs, "state-store is not a directory") {
		t.Errorf("stat with DIR/state-store a file: exit %d, stderr %q", code, errs)
	}
}

// demo --dir on a directory that holds a store refuses before writing.
func TestDemoRefusesAnExistingStore(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(4)
	ts.close()
	before := dirListing(t, ts.root())
	code, out, errs := kp(t, "demo", "--dir", ts.dir)
	if code != exitUsage || out != "" || !strings.Contains(errs, "already holds a store") || !strings.Contains(errs, ts.root()) {
		t.Fatalf("demo on an existing store: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if after := dirListing(t, ts.root()); !slices.Equal(before, after) {
		t.Errorf("the store changed:\nbefore %v\nafter  %v", before, after)
	}
}

// dirListing names every file under root with its size and time.
func dirListing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d bytes modified %v", strings.TrimPrefix(path, root), info.Size(), info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// --version names the module the binary was built from.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errs := kp(t, "--version")
	if code != exitOK || errs != "" || !strings.HasPrefix(out, "github.com/keeppeek/statestore ") || !strings.Contains(out, "revision=") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// The cluster verbs' help says what they need and what they refuse, and
// recover-cluster's gives the procedure; the top-level help says which
// commands read the replicated layout.
func TestClusterVerbsHelp(t *testing.T) {
	t.Parallel()
	_, top, _ := kp(t, "help")
	wantContains(t, "help", cliflag.Wrap(top, 1<<20), "compare, recover-cluster name cluster nodes' storage directories as arguments",
		"verify and dump read a cluster node's directory")
	_, out, _ := kp(t, "help", "recover-cluster")
	wantContains(t, "help recover-cluster", cliflag.Wrap(out, 1<<20), "--peers FILE [flags] DIR", "RecoverCluster", "LOCK",
		`{"id": ..., "address": ...}`, "stop every surviving node", "same file on each of them", "highest last index", "add-voter")
	_, out, _ = kp(t, "help", "compare")
	wantContains(t, "help compare", cliflag.Wrap(out, 1<<20), "--index N [flags] DIR1 DIR2", "EQUAL", "DIFFERENT", "state machine", "LOCK")
	for _, verb := range []string{"verify", "dump"} {
		_, out, _ = kp(t, "help", verb)
		wantContains(t, "help "+verb, cliflag.Wrap(out, 1<<20), "On a cluster node", "raft-stable")
	}
}
