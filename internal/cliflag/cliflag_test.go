package cliflag_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/cliflag"
)

var prog = cliflag.Program{Name: "kptest", ExitCodes: "0 ok, 1 refused, 2 usage"}

// greet is a subcommand taking one argument and a flag.
func greet(args []string, stdout, stderr io.Writer) int {
	c := cliflag.New(prog, "greet", cliflag.Help{Synopsis: "NAME [--loud]", About: "Greets NAME.",
		Examples: []string{"kptest greet world"}}, stdout, stderr)
	loud := c.FS.Bool("loud", false, "shout")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	if code := c.Args(1); code >= 0 {
		return code
	}
	if *loud {
		fmt.Fprintln(stdout, strings.ToUpper("hello "+c.FS.Arg(0)))
	} else {
		fmt.Fprintln(stdout, "hello "+c.FS.Arg(0))
	}
	return cliflag.ExitOK
}

var table = cliflag.Table{Program: prog, Subs: []cliflag.Sub{{Name: "greet", Summary: "say hello", Run: greet}},
	Usage: func(w io.Writer) { fmt.Fprintln(w, "Usage: kptest <command>") }}

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := table.Run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpIsTheSameBothWays(t *testing.T) {
	t.Parallel()
	code, viaHelp, errs := run("help", "greet")
	_, viaFlag, _ := run("greet", "--help")
	if code != cliflag.ExitOK || errs != "" || viaHelp != viaFlag || !strings.HasPrefix(viaHelp, "Usage: kptest greet NAME") {
		t.Errorf("help greet: exit %d, stderr %q, stdout %q; greet --help: %q", code, errs, viaHelp, viaFlag)
	}
	if code, out, _ := run("greet", "world", "--loud"); code != cliflag.ExitOK || out != "HELLO WORLD\n" {
		t.Errorf("greet world --loud: exit %d, %q", code, out)
	}
}

func TestHelpHasEverySection(t *testing.T) {
	t.Parallel()
	_, out, _ := run("greet", "--help")
	for _, want := range []string{"Usage: kptest greet NAME [--loud]\n", "\nGreets NAME.\n", "\nExamples:\n  kptest greet world\n",
		"\nFlags:\n", "--loud", "shout", "\nExit codes: 0 ok, 1 refused, 2 usage\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("greet --help lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := run("--version"); code != cliflag.ExitOK || !strings.HasPrefix(out, "github.com/keeppeek/statestore ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate" (see kptest help)`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "a", "b"}, "help takes one command"},
		{[]string{"greet"}, "kptest greet: 1 argument(s) missing: greet NAME [--loud]\nRun 'kptest greet --help' for usage."},
		{[]string{"greet", "a", "b"}, `kptest greet: unexpected argument "b"`},
		{[]string{"greet", "--bogus", "a"}, "unknown flag: --bogus"},
	}
	for _, c := range cases {
		code, out, errs := run(c.args...)
		if code != cliflag.ExitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%q: exit %d, stderr %q; want %d saying %q", c.args, code, errs, cliflag.ExitUsage, c.says)
		}
		if c.args[0] != "help" && out != "" {
			t.Errorf("%q printed %q on stdout", c.args, out)
		}
	}
	// No command at all: the usage, and the usage exit code.
	if code, out, _ := run(); code != cliflag.ExitUsage || !strings.Contains(out, "Usage: kptest") {
		t.Errorf("no arguments: exit %d, %q", code, out)
	}
}

func TestWrap(t *testing.T) {
	t.Parallel()
	if got := cliflag.Wrap("a bb ccc  dddd\neeeee", 8); got != "a bb ccc\ndddd\neeeee" {
		t.Errorf("Wrap = %q", got)
	}
}
