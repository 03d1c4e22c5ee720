// Command kpstate is the KeepPeek state store as a standalone server, and
// its key CLI.
//
// Usage:
//
//	kpstate <command> [flags]
//
// Commands (kpstate help <command> describes each, with examples):
//
//	serve       serve a store over WebSocket to the principals of a configuration file
//	token       make a principal's token and its [[principal]] entry (token new)
//	version     print the build: module, version, VCS revision, modified flag
//
// `kpstate serve --config FILE` serves the store in the file's data_dir at
// ws[s]://LISTEN/ws (the wire protocol, package wstransport) with
// api/info, /healthz, /readyz, and optionally Prometheus metrics and the
// inspector page. Principals come from the file's [[principal]] entries,
// each known only by the SHA-256 of its token; SIGHUP reloads them,
// SIGTERM stops the server. `kpstate token new --id ID` makes a token and
// prints the entry to paste. The configuration's keys are listed by
// `kpstate serve --help`; deploy/ holds a systemd unit and an example.
//
// The command table is main.go's commands: a verb is one entry there and
// its own file, with its flags from internal/cliflag.
//
// Exit codes: 0 success, 1 the store refused a request (its error code on
// stderr), 2 usage, configuration, connection or I/O error.
//
// # Invariants
//
//  1. No token is kept, logged or echoed: the configuration holds SHA-256
//     hashes, the logs name principals, a refusal gives its reason only;
//     kpstate token new prints a token once, beside its hash.
//     Code: loadConfig, config.tokenPrincipals, runTokenNew, wstransport.PrincipalTable.Authenticate.
//     Tests: TestTokenNew, TestServeOverTheWire.
//  2. A configuration error names the file and the field (and, for what
//     the parser refuses, the line), and stops serve before it opens the
//     store or listens; so does a non-loopback listen or metrics_listen
//     without [tls] and without --insecure.
//     Code: loadConfig, decodeError, config.check, config.checkExposure, config.loadTLS, startServer.
//     Tests: TestConfigRefusals, TestExposure, TestServeRefusals.
//  3. SIGHUP changes the principals only, and only when the whole file
//     loads: a removed principal keeps no session (its watches close
//     AUTHORIZATION_LOST, then its connections end), one whose admin flag
//     changed keeps its sessions with the new rights, and every other
//     change is logged as needing a restart.
//     Code: server.reload, config.restartFields, wstransport.Handler.EndSessions, wstransport.Handler.Reauthenticate.
//     Tests: TestServeReloadsPrincipalsOnSIGHUP, TestRestartFieldsNameWhatAReloadLeaves.
//  4. SIGTERM and SIGINT end the WebSocket sessions, their watches
//     removed, before the store closes, and exit 0; a store that could not
//     open is served UNAVAILABLE, with /readyz 503 naming the cause.
//     Code: server.shutdown, server.readyz, startServer.
//     Tests: TestServeStopsOnSIGTERM, TestServeAStoreThatCannotOpenIsUnavailable.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/keeppeek/statestore/internal/cliflag"
)

// program is kpstate in every subcommand's help.
var program = cliflag.Program{Name: "kpstate",
	ExitCodes: "0 success, 1 the store refused a request (its code on stderr), 2 usage, configuration, connection or I/O error"}

// Exit codes, documented in usage. exitRefused is the client verbs': the
// store answered a request with an error code.
const (
	exitOK      = cliflag.ExitOK
	exitRefused = 1
	exitUsage   = cliflag.ExitUsage
)

// commands is kpstate's command table: a new verb is one entry here and
// its own file.
var commands = []cliflag.Sub{
	{Name: "serve", Summary: "serve a store over WebSocket to the principals of a configuration file", Run: runServe},
	{Name: "token", Summary: "make a principal's token and its [[principal]] entry (token new)", Run: runToken},
	{Name: "version", Summary: "print the build: module, version, VCS revision, modified flag", Run: runVersion},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cliflag.Table{Program: program, Subs: commands, Usage: usage}.Run(args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kpstate: the KeepPeek state store as a standalone server, and its key CLI")
	fmt.Fprintln(w, "\nUsage: kpstate <command> [flags]   (kpstate help <command> for its flags)")
	fmt.Fprintln(w, "       kpstate --version             (module, version, VCS revision and modified flag)")
	fmt.Fprintln(w, "\nCommands:")
	cliflag.Table{Subs: commands}.PrintSubs(w)
	fmt.Fprintln(w, "\nExamples:\n  kpstate token new --id alice > alice.token\n  kpstate serve --config /etc/kpstate/kpstate.toml\n  kpstate help serve")
	fmt.Fprintln(w, "\nExit codes:\n  0  success\n  1  the store refused a request (its error code on stderr)\n  2  usage, configuration, connection or I/O error")
}
