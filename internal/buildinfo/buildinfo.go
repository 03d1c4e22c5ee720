// Package buildinfo says which build of this module a binary is: the
// module path and version, and the VCS revision and modified flag the Go
// toolchain stamped into it (runtime/debug.ReadBuildInfo). kpjournal and
// kpstate print it for --version, and kpstate serves it as api/info's
// "version", so an operator can tell which commit a running server was
// built from.
//
// # Invariants
//
//  1. Every field has a value: what the build did not record reads
//     "(devel)" (the version) or "unknown" (path, revision, modified), so
//     a version line never has an empty field that a script would
//     misparse.
//     Code: From, Info.String.
//     Tests: TestFromFillsWhatTheBuildDidNotRecord.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is one binary's build.
type Info struct {
	Path     string // the main module's path, github.com/keeppeek/statestore
	Version  string // its version: "(devel)" for a build from a checkout
	Revision string // vcs.revision: the commit built
	Modified string // vcs.modified: "true" when the checkout had uncommitted changes
}

// Defaults for what a build did not record.
const (
	Devel   = "(devel)"
	Unknown = "unknown"
)

// Read returns the running binary's build.
func Read() Info { return From(debug.ReadBuildInfo()) }

// From returns the build bi describes; ok false (no build information,
// as in a binary built without module support) gives the defaults.
func From(bi *debug.BuildInfo, ok bool) Info {
	in := Info{Path: Unknown, Version: Devel, Revision: Unknown, Modified: Unknown}
	if !ok || bi == nil {
		return in
	}
	if bi.Main.Path != "" {
		in.Path = bi.Main.Path
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && s.Value != "":
			in.Revision = s.Value
		case s.Key == "vcs.modified" && s.Value != "":
			in.Modified = s.Value
		}
	}
	return in
}

// String is the one-line form --version prints:
// "PATH VERSION revision=REV modified=BOOL".
func (in Info) String() string {
	return fmt.Sprintf("%s %s revision=%s modified=%s", in.Path, in.Version, in.Revision, in.Modified)
}
