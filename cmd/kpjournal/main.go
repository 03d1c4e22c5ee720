// Command kpjournal inspects and exercises a KeepPeek state store's files.
//
// Usage:
//
//	kpjournal <command> [flags]
//
// Commands (kpjournal <command> --help describes each, with examples):
//
//	verify      check every checkpoint and journal record and report each problem (read-only)
//	replay      print the state as of the journal's end or --at INDEX (read-only)
//	dump        print journal records in an index range (read-only)
//	stat        summarize segments, checkpoints, totals and disk use (read-only)
//	repair      cut a torn final record, or drop records after --truncate-after INDEX (writes)
//	checkpoint  open the stopped store and write a checkpoint now (writes)
//	backup      write a backup file of the stopped store (read-only on the store)
//	restore     build a store from a backup in an empty directory (writes)
//	demo        run two compare-and-set writers on one key, restart, print the replayed state
//
// Every command but demo takes --dir DIR, the media server's storage
// directory (the store's files are in DIR/state-store), and refuses a store
// whose LOCK a running process holds: stop the server, or work on a copy.
// Commands that print data take --json for one JSON document on stdout.
//
// Exit codes: 0 success, 1 the command found problems, 2 usage or I/O error.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one kpjournal subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"verify", "check every checkpoint and journal record and report each problem (read-only)", runVerify},
	{"replay", "print the state as of the journal's end or --at INDEX (read-only)", runReplay},
	{"dump", "print journal records in an index range (read-only)", runDump},
	{"stat", "summarize segments, checkpoints, totals and disk use (read-only)", runStat},
	{"repair", "cut a torn final record, or drop records after --truncate-after INDEX (writes)", runRepair},
	{"checkpoint", "open the stopped store and write a checkpoint now (writes)", runCheckpoint},
	{"backup", "write a backup file of the stopped store (read-only on the store)", runBackup},
	{"restore", "build a store from a backup in an empty directory (writes)", runRestore},
	{"demo", "compare-and-set writers, a lease handover, a watcher, a restart and a restored backup", runDemo},
}

// Exit codes, documented in usage.
const (
	exitOK       = 0
	exitProblems = 1
	exitUsage    = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kpjournal: unknown command %q (see kpjournal --help)\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kpjournal: inspect and exercise a KeepPeek state store's files")
	fmt.Fprintln(w, "\nUsage: kpjournal <command> [flags]   (kpjournal <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command but demo takes --dir DIR, the media server's storage directory (the store")
	fmt.Fprintln(w, "is DIR/state-store), and refuses a store whose LOCK a running process holds: stop the")
	fmt.Fprintln(w, "server first, or copy the directory and run kpjournal on the copy. Commands that print")
	fmt.Fprintln(w, "data take --json (one JSON document on stdout); errors go to stderr.")
	fmt.Fprintln(w, "\nExample:\n  kpjournal verify --dir /var/lib/keeppeek")
	fmt.Fprintln(w, "\nExit codes:\n  0  success\n  1  problems found (damage, a check that failed)\n  2  usage or I/O error (including a store in use)")
}
