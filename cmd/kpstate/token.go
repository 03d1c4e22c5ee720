package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"

	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// tokenCommands are the verbs of kpstate token.
var tokenCommands = []cliflag.Sub{
	{Name: "new", Summary: "make a random token and print it with its [[principal]] entry", Run: runTokenNew},
}

func runToken(args []string, stdout, stderr io.Writer) int {
	return cliflag.Table{Program: cliflag.Program{Name: "kpstate token", ExitCodes: program.ExitCodes}, Subs: tokenCommands,
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "kpstate token: the tokens principals authenticate with")
			fmt.Fprintln(w, "\nUsage: kpstate token <command> [flags]   (kpstate token help <command> for its flags)")
			fmt.Fprintln(w, "\nCommands:")
			cliflag.Table{Subs: tokenCommands}.PrintSubs(w)
			fmt.Fprintln(w, "\nExamples:\n  kpstate token new --id alice")
			fmt.Fprintln(w, "\nExit codes: "+program.ExitCodes)
		}}.Run(args, stdout, stderr)
}

// tokenBytes is a token's randomness: 256 bits, as many as its SHA-256
// keeps, so nobody can guess a token faster than its hash.
const tokenBytes = 32

func runTokenNew(args []string, stdout, stderr io.Writer) int {
	c := cliflag.New(program, "token new", cliflag.Help{Synopsis: "--id ID [--admin]",
		About: `Makes a principal's bearer token: 32 random bytes from the operating system (crypto/rand),
base64url without padding. The token is printed on the first line, and after it the [[principal]]
entry to paste into the server's configuration (kpstate.toml): the principal's id, whether it is an
administrator, and token_sha256, the SHA-256 of the token, which is all the server keeps. The token is
shown only here: hand it to the principal's client, and send kpstate serve SIGHUP (systemctl reload
kpstate) once the entry is in the file. An administrator reads and writes service/ and group/ and reads
system/; any principal reads and writes its own user/ID/.`,
		Examples: []string{"kpstate token new --id transcoder-a --admin",
			"kpstate token new --id alice | tee >(head -1 > alice.token) | tail -n +2 >> /etc/kpstate/kpstate.toml"}}, stdout, stderr)
	id := c.FS.String("id", "", "the principal's ID: letters, digits, '.', '_', '-' (it owns user/`ID`/)")
	admin := c.FS.Bool("admin", false, "make the principal an administrator")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	if code := c.Args(0); code >= 0 {
		return code
	}
	if *id == "" {
		return c.UsageError("--id is required")
	}
	if err := checkPrincipalID(*id); err != nil {
		return c.UsageError("--id: %v", err)
	}
	b := make([]byte, tokenBytes)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead
	tok := base64.RawURLEncoding.EncodeToString(b)
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stdout, "# made by kpstate token new: the server keeps only the token's SHA-256, never the token\n"+
		"[[principal]]\nid = %s\nadmin = %t\ntoken_sha256 = %q\n", strconv.Quote(*id), *admin, wstransport.HashToken(tok))
	return exitOK
}
