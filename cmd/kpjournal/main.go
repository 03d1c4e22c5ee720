// Command kpjournal inspects and exercises a KeepPeek state store's files.
//
// Usage:
//
//	kpjournal <command> [flags]
//
// Commands:
//
//	demo   run two compare-and-set writers on one key, restart, print the replayed state
//
// Exit codes: 0 success, 1 the command found problems, 2 usage or I/O error.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one kpjournal subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"demo", "run two compare-and-set writers on one key, restart, print the replayed state", runDemo},
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
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nExit codes: 0 success, 1 problems found, 2 usage or I/O error")
}
