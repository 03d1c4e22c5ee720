package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// program is kpjournal in every subcommand's help.
var program = cliflag.Program{Name: "kpjournal", ExitCodes: "0 success, 1 problems found, 2 usage or I/O error"}

// cli is what every subcommand shares: its flag set, output streams and
// the common flags.
type cli struct {
	*cliflag.Command
	dir    string
	dirArg bool // dir is a positional argument, not --dir
	// clusterOK: the command reads a cluster node's directory (the
	// replicated layout); the others refuse one (openStoreDir).
	clusterOK bool
	json      bool
	limits    quota.Limits
	// reg and chk are built by parse from the bounds on the command line:
	// every command that checks records or images uses these.
	reg *schema.Registry
	chk *recovery.Checker
}

// newCLI builds a subcommand's flag set. usage is the synopsis line, about
// the one-paragraph description, examples one command per line.
func newCLI(name, usage, about string, examples []string, stdout, stderr io.Writer) *cli {
	return &cli{Command: cliflag.New(program, name, cliflag.Help{Synopsis: usage, About: about, Examples: examples}, stdout, stderr)}
}

// dirFlag adds --dir.
func (c *cli) dirFlag() {
	c.FS.StringVar(&c.dir, "dir", "", "the media server's storage directory (the store is DIR/"+statestore.StoreDirName+")")
}

// jsonFlag adds --json.
func (c *cli) jsonFlag() {
	c.FS.BoolVar(&c.json, "json", false, "print one JSON document on stdout instead of tables")
}

// limitFlags adds the bounds a store was written with; zero means the default.
func (c *cli) limitFlags() {
	d := quota.Default()
	c.FS.IntVar(&c.limits.MaxNamespaces, "max-namespaces", 0, fmt.Sprintf("bound: namespaces holding entries (0: default %d)", d.MaxNamespaces))
	c.FS.IntVar(&c.limits.MaxEntriesPerNamespace, "max-entries-per-namespace", 0, fmt.Sprintf("bound: entries in one namespace (0: default %d)", d.MaxEntriesPerNamespace))
	c.FS.Int64Var(&c.limits.MaxTotalBytes, "max-total-bytes", 0, fmt.Sprintf("bound: value bytes in the whole store (0: default %d MiB)", d.MaxTotalBytes>>20))
	c.FS.IntVar(&c.limits.MaxDocumentBytes, "max-document-bytes", 0, fmt.Sprintf("bound: bytes of one document (0: default %d)", d.MaxDocumentBytes))
}

// parse parses args; a non-negative code means the command must return it.
func (c *cli) parse(args []string) int { return c.parseN(args, 0) }

// parseN is parse for a command taking exactly n positional arguments.
func (c *cli) parseN(args []string, n int) int {
	if code := c.Parse(args); code >= 0 {
		return code
	}
	if code := c.Args(n); code >= 0 {
		return code
	}
	reg, err := cliflag.Registry()
	if err != nil {
		return c.UsageError("%v", err)
	}
	c.reg = reg
	chk, err := recovery.NewChecker(c.limits, c.reg)
	if err != nil {
		return c.UsageError("%v", err)
	}
	c.chk = chk
	return -1
}

// finish prints a report, as JSON under --json or through print, and turns
// the problems it holds into the exit code.
func (c *cli) finish(stdout io.Writer, rep any, print func(io.Writer) error, problems int) int {
	var err error
	if c.json {
		err = writeJSON(stdout, rep)
	} else {
		err = print(stdout)
	}
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if problems > 0 {
		return exitProblems
	}
	return exitOK
}

// root is the store's own directory, DIR/state-store.
func (c *cli) root() string { return filepath.Join(c.dir, statestore.StoreDirName) }

func (c *cli) journalDir() string { return filepath.Join(c.root(), "journal") }

func (c *cli) quarantineDir() string { return filepath.Join(c.root(), "quarantine") }

// openStoreDir checks that --dir names a store and that no live process
// holds its LOCK. Read-only commands may inspect only a store nobody is
// writing: a live store changes under them (and the store's own files say
// nothing of what is in flight). A non-negative code means return it.
func (c *cli) openStoreDir() int {
	if code := c.checkDir(true); code >= 0 {
		return code
	}
	if fi, err := os.Stat(c.root()); err != nil || !fi.IsDir() {
		what := "does not exist"
		if err == nil {
			what = "is not a directory"
		}
		hint := ""
		if _, err := os.Stat(filepath.Join(c.dir, "journal")); err == nil && filepath.Base(filepath.Clean(c.dir)) == statestore.StoreDirName {
			hint = fmt.Sprintf(" (%s looks like the store directory itself: pass its parent, %s)", c.dir, filepath.Dir(filepath.Clean(c.dir)))
		}
		return c.Fail(exitUsage, "no store in %s: %s %s%s", c.dir, c.root(), what, hint)
	}
	if code := c.checkNotLive(); code >= 0 {
		return code
	}
	if !c.clusterOK && isClusterNode(c.root()) {
		return c.Fail(exitUsage, "%s is a cluster node's directory (it holds %s): %s reads a single store's files; "+
			"verify, dump, compare and recover-cluster read a cluster node's", c.root(), statestore.StableFileName, c.FS.Name())
	}
	return -1
}

// checkDir checks --dir before anything reads or writes under it: present
// when required, and, if it exists, a directory (a regular file given by
// mistake would otherwise surface as a confusing error from deeper down).
func (c *cli) checkDir(required bool) int {
	if c.dir == "" {
		if required {
			return c.UsageError("--dir is required")
		}
		return -1
	}
	if fi, err := os.Stat(c.dir); err == nil && !fi.IsDir() {
		what := "--dir"
		if c.dirArg {
			what = "DIR"
		}
		return c.Fail(exitUsage, "%s %s is not a directory", what, c.dir)
	}
	return -1
}

// checkNotLive refuses a store whose LOCK a live process holds.
func (c *cli) checkNotLive() int {
	lock := filepath.Join(c.root(), "LOCK")
	if _, err := os.Stat(lock); err != nil {
		return -1 // no LOCK file: never opened, nobody holds it (probing would create one)
	}
	held, err := disk.Held(lock)
	if err != nil {
		return c.Fail(exitUsage, "cannot probe %s: %v", lock, err)
	}
	if held {
		return c.Fail(exitUsage, "the store in %s is in use: %s is held by a running process. "+
			"Stop the media server first, or copy the directory and run kpjournal on the copy.", c.dir, lock)
	}
	return -1
}
