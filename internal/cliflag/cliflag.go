// Package cliflag is what the module's two binaries, kpjournal and
// kpstate, share: a table of subcommands (name, one-line summary, run
// function) with `help CMD` and --version, and one pflag flag set per
// subcommand whose --help prints a synopsis, a paragraph, Examples, the
// flags and the exit codes. A subcommand is added by one table entry and
// its own file; nothing here knows any subcommand.
//
// # Invariants
//
//  1. `PROG help CMD` prints exactly what `PROG CMD --help` prints, on
//     stdout with exit 0, and every --help names its synopsis, examples,
//     flags and the program's exit codes, so no subcommand's help can
//     leave one out.
//     Code: Table.Run, New, Command.Parse.
//     Tests: TestHelpIsTheSameBothWays, TestHelpHasEverySection.
//  2. A usage error (an unknown flag or command, a wrong number of
//     arguments) prints the problem and how to get help on stderr, nothing
//     on stdout, and exits ExitUsage.
//     Code: Table.Run, Command.Parse, Command.Args, Command.UsageError.
//     Tests: TestUsageErrors.
package cliflag

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/keeppeek/statestore/internal/buildinfo"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/grouppref"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// Exit codes both binaries share; each documents its own meaning of 1.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Program is what every subcommand of one binary shares in its help.
type Program struct {
	Name      string // "kpstate"
	ExitCodes string // one line, the last of every --help
}

// Sub is one subcommand: one entry of a Table.
type Sub struct {
	Name    string
	Summary string // one line, for the program's usage
	Run     func(args []string, stdout, stderr io.Writer) int
}

// Table is a binary's subcommands.
type Table struct {
	Program
	Subs []Sub
	// Usage prints the program's help (with PrintSubs for the list).
	Usage func(w io.Writer)
}

// Run runs the subcommand args name with the rest of args and returns the
// exit code. `help` (or -h, --help) prints Usage; `help CMD` is
// `CMD --help`; --version prints the build (buildinfo).
func (t Table) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "help" {
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		t.Usage(stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		if len(args) > 1 {
			fmt.Fprintf(stderr, "%s: help takes one command, got %q\n", t.Name, args[1:])
			return ExitUsage
		}
		return ExitOK
	}
	if args[0] == "--version" {
		fmt.Fprintln(stdout, buildinfo.Read())
		return ExitOK
	}
	for _, s := range t.Subs {
		if s.Name == args[0] {
			return s.Run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (see %s help)\n", t.Name, args[0], t.Name)
	return ExitUsage
}

// PrintSubs lists the subcommands with their summaries, one a line.
func (t Table) PrintSubs(w io.Writer) {
	for _, s := range t.Subs {
		fmt.Fprintf(w, "  %-12s %s\n", s.Name, s.Summary)
	}
}

// Help is a subcommand's --help text.
type Help struct {
	Synopsis string   // what follows "Usage: PROG CMD "
	About    string   // one paragraph, wrapped at 78 columns
	Examples []string // one command line each
}

// Command is one run of a subcommand: its flag set and output streams.
type Command struct {
	FS             *pflag.FlagSet
	Stdout, Stderr io.Writer
	prog           Program
	name, synopsis string
}

// New builds a subcommand's flag set; name may be two words ("token new").
func New(p Program, name string, h Help, stdout, stderr io.Writer) *Command {
	c := &Command{prog: p, name: name, synopsis: h.Synopsis, Stdout: stdout, Stderr: stderr}
	c.FS = pflag.NewFlagSet(name, pflag.ContinueOnError)
	c.FS.SetOutput(stderr)
	c.FS.SortFlags = false
	c.FS.Usage = func() {
		// pflag calls this only for --help: help goes to stdout.
		fmt.Fprintf(stdout, "Usage: %s %s %s\n\n", p.Name, name, h.Synopsis)
		fmt.Fprintln(stdout, Wrap(h.About, 78))
		fmt.Fprintln(stdout, "\nExamples:")
		for _, e := range h.Examples {
			fmt.Fprintln(stdout, "  "+e)
		}
		fmt.Fprintln(stdout, "\nFlags:")
		c.FS.SetOutput(stdout)
		c.FS.PrintDefaults()
		c.FS.SetOutput(stderr)
		fmt.Fprintln(stdout, "\nExit codes: "+p.ExitCodes)
	}
	return c
}

// Parse parses args; a non-negative result is the exit code the command
// must return at once (0 after --help, ExitUsage after a bad flag).
func (c *Command) Parse(args []string) int {
	if err := c.FS.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		return c.UsageError("%v", err)
	}
	return -1
}

// Args checks that exactly n arguments follow the flags; a non-negative
// result is the exit code to return.
func (c *Command) Args(n int) int {
	switch got := c.FS.NArg(); {
	case got > n:
		return c.UsageError("unexpected argument %q", c.FS.Arg(n))
	case got < n:
		return c.UsageError("%d argument(s) missing: %s %s", n-got, c.name, c.synopsis)
	}
	return -1
}

// UsageError reports a usage problem and returns ExitUsage.
func (c *Command) UsageError(format string, args ...any) int {
	fmt.Fprintf(c.Stderr, "%s %s: %s\n", c.prog.Name, c.name, fmt.Sprintf(format, args...))
	fmt.Fprintf(c.Stderr, "Run '%s %s --help' for usage.\n", c.prog.Name, c.name)
	return ExitUsage
}

// Fail reports an error on stderr and returns code.
func (c *Command) Fail(code int, format string, args ...any) int {
	fmt.Fprintf(c.Stderr, "%s %s: %s\n", c.prog.Name, c.name, fmt.Sprintf(format, args...))
	return code
}

// Wrap folds text into lines of at most width columns.
func Wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		if col > 0 && col+1+len(w) > width {
			b.WriteByte('\n')
			col = 0
		} else if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

// Registry is the schema registry both binaries judge documents with: the
// built-in media-intent schema plus the schemas of this module's worker
// packages (leases, observed status, computer-vision health, group
// preferences), so a store that
// workers write to serves, verifies and replays like any other.
func Registry() (*schema.Registry, error) {
	reg := schema.NewRegistry()
	if err := reconcile.RegisterSchemas(reg); err != nil {
		return nil, err
	}
	if err := cv.RegisterSchemas(reg); err != nil {
		return nil, err
	}
	if err := grouppref.RegisterSchema(reg); err != nil {
		return nil, err
	}
	return reg, nil
}
