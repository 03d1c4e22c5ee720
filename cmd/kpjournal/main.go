// Command kpjournal inspects and exercises a KeepPeek state store's files.
//
// Usage:
//
//	kpjournal <command> [flags]
//
// Commands (kpjournal help <command> describes each, with examples):
//
//	verify      check every checkpoint and journal record and report each problem (read-only)
//	replay      print the state as of the journal's end or --at INDEX (read-only)
//	dump        print journal records in an index range (read-only)
//	stat        summarize segments, checkpoints, totals and disk use (read-only)
//	repair      cut a torn final record, or drop records after --truncate-after INDEX (writes)
//	checkpoint  open the stopped store and write a checkpoint now (writes)
//	backup      write a backup file of the stopped store (read-only on the store)
//	restore     build a store from a backup in an empty directory (writes)
//	demo        compare-and-set writers, a lease handover, a watcher, a restart and a restored backup
//	torture     SIGKILL a store's writer at random moments, many times, and check what survives (writes)
//	serve       serve the inspector page: namespaces, entries and revisions, live over WebSocket
//	compare     rebuild two stopped cluster nodes' state at --index N and compare them (read-only)
//	recover-cluster  recover a cluster node that lost its quorum as a new configuration from --peers FILE (writes)
//
// --dir DIR is the media server's storage directory (the store's files are
// in DIR/state-store). verify, replay, dump, stat, repair, checkpoint and
// backup require it and refuse a store whose LOCK a running process holds:
// stop the server, or work on a copy. restore and torture require it and
// build a store there. demo takes it optionally (default: a temporary directory).
// compare and recover-cluster name cluster nodes' directories as arguments,
// and refuse one whose LOCK a running process holds. verify and dump read
// a cluster node's directory (the replicated layout, told by its
// raft-stable file) as its raft log, votes and snapshots.
// Every command but demo takes --json for one JSON document on stdout, in
// which an empty list is [] and an absent value is null.
//
// kpjournal --version prints the build: module path, version, VCS revision
// and modified flag.
//
// Exit codes: 0 success, 1 the command found problems, 2 usage or I/O error.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/keeppeek/statestore/internal/cliflag"
)

// command is one kpjournal subcommand.
type command struct {
	name    string
	summary string
	dir     dirUse
	run     func(args []string, stdout, stderr io.Writer) int
}

// dirUse is what a command does with --dir, stated by the top-level help.
type dirUse int

const (
	dirStore    dirUse = iota // required: an existing store no running process holds
	dirTarget                 // required: where to build a store
	dirOptional               // optional: where the demo builds its store
	dirArgs                   // none: the command's arguments name the directories
)

var commands = []command{
	{"verify", "check every checkpoint and journal record and report each problem (read-only)", dirStore, runVerify},
	{"replay", "print the state as of the journal's end or --at INDEX (read-only)", dirStore, runReplay},
	{"dump", "print journal records in an index range (read-only)", dirStore, runDump},
	{"stat", "summarize segments, checkpoints, totals and disk use (read-only)", dirStore, runStat},
	{"repair", "cut a torn final record, or drop records after --truncate-after INDEX (writes)", dirStore, runRepair},
	{"checkpoint", "open the stopped store and write a checkpoint now (writes)", dirStore, runCheckpoint},
	{"backup", "write a backup file of the stopped store (read-only on the store)", dirStore, runBackup},
	{"restore", "build a store from a backup in an empty directory (writes)", dirTarget, runRestore},
	{"demo", "compare-and-set writers, a lease handover, a watcher, a restart and a restored backup", dirOptional, runDemo},
	{"torture", "SIGKILL a store's writer at random moments, many times, and check what survives (writes)", dirTarget, runTorture},
	{"serve", "serve the inspector page: namespaces, entries and revisions, live over WebSocket", dirStore, runServe},
	{"compare", "rebuild two stopped cluster nodes' state at --index N and compare them (read-only)", dirArgs, runCompare},
	{"recover-cluster", "recover a cluster node that lost its quorum as a new configuration from --peers FILE (writes)", dirArgs, runRecoverCluster},
}

// Exit codes, documented in usage.
const (
	exitOK       = cliflag.ExitOK
	exitProblems = 1
	exitUsage    = cliflag.ExitUsage
)

func main() {
	if child, code := tortureChildRole(); child {
		os.Exit(code)
	}
	if node, code := nemesisNodeRole(); node {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	subs := make([]cliflag.Sub, len(commands))
	for i, c := range commands {
		subs[i] = cliflag.Sub{Name: c.name, Summary: c.summary, Run: c.run}
	}
	return cliflag.Table{Program: program, Subs: subs, Usage: usage}.Run(args, stdout, stderr)
}

// commandsWith lists, comma-separated, the commands that use --dir as u.
func commandsWith(u dirUse) string {
	var names []string
	for _, c := range commands {
		if c.dir == u {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ", ")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kpjournal: inspect and exercise a KeepPeek state store's files")
	fmt.Fprintln(w, "\nUsage: kpjournal <command> [flags]   (kpjournal help <command> for its flags)")
	fmt.Fprintln(w, "       kpjournal --version             (module, version, VCS revision and modified flag)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n--dir DIR is the media server's storage directory; the store is DIR/state-store.")
	fmt.Fprintf(w, "  required by %s:\n", commandsWith(dirStore))
	fmt.Fprintln(w, "    a store that no running process holds (its LOCK): stop the server first, or copy")
	fmt.Fprintln(w, "    the directory and run kpjournal on the copy")
	fmt.Fprintf(w, "  required by %s: a directory holding no store yet, to build one in\n", commandsWith(dirTarget))
	fmt.Fprintf(w, "  optional for %s: a directory holding no store yet (default: a temporary one)\n", commandsWith(dirOptional))
	fmt.Fprintf(w, "%s name cluster nodes' storage directories as arguments instead (no running process may hold them).\n", commandsWith(dirArgs))
	fmt.Fprintln(w, "verify and dump read a cluster node's directory (it holds raft-stable) as its raft log, votes and snapshots.")
	fmt.Fprintln(w, "\nEvery command but demo takes --json: one JSON document on stdout, the same shape")
	fmt.Fprintln(w, "whatever the store holds (an empty list is [], an absent value null). Errors go to stderr.")
	fmt.Fprintln(w, "\nExamples:\n  kpjournal verify --dir /var/lib/keeppeek\n  kpjournal help repair")
	fmt.Fprintln(w, "\nExit codes:\n  0  success\n  1  problems found (damage, a check that failed)\n  2  usage or I/O error (including a store in use)")
}
