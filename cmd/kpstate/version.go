package main

import (
	"fmt"
	"io"

	"github.com/keeppeek/statestore/internal/buildinfo"
	"github.com/keeppeek/statestore/internal/cliflag"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	c := cliflag.New(program, "version", cliflag.Help{Synopsis: "",
		About: `Prints the build of this binary on one line: the module path, its version ("(devel)" for a build
from a checkout), and the VCS revision and modified flag the Go toolchain stamped into it ("unknown" when
the build recorded none). kpstate --version prints the same line, and kpstate serve reports it as
api/info's "version".`,
		Examples: []string{"kpstate version", "kpstate --version"}}, stdout, stderr)
	if code := c.Parse(args); code >= 0 {
		return code
	}
	if code := c.Args(0); code >= 0 {
		return code
	}
	fmt.Fprintln(stdout, buildinfo.Read())
	return exitOK
}
