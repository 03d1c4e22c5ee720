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
//	get         read an entry: its metadata and document
//	put         write an entry (blind, --create or --if-revision N; --ttl for a lease)
//	delete      delete an entry (--if-revision N)
//	watch       print a namespace's snapshot, then every change, re-snapshotting when it must
//	lease       hold a lease: claim create-only with a TTL, renew, release (lease hold)
//	status      the server as the token's principal sees it
//	cluster     a cluster node's membership and leadership (status, add-voter, remove, transfer-leader)
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
// get, put, delete, watch, lease hold and status are the store's key CLI:
// each is one session of the typed client (package client) as the
// principal of a bearer token, which comes from --token-file or
// $KPSTATE_TOKEN and never from a flag's value; --endpoints (or
// $KPSTATE_ENDPOINTS), --cacert, --timeout and --json are shared
// (clientcmd.go). Output is a few lines for people, or JSON with --json.
//
// The command table is main.go's commands: a verb is one entry there and
// its own file, with its flags from internal/cliflag.
//
// Exit codes: 0 success, 1 the store refused a request (stderr names the
// code, the field and the message; with --json stdout carries
// {"error":{...}}), 2 usage, configuration, connection or I/O error (a
// refused handshake prints the server's reason).
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
//  5. A client verb's token is read from a file or the environment, never
//     a flag's value, and never printed; bad flags, files or arguments exit
//     2 before anything is dialled, naming the flag.
//     Code: clientOptions.token, clientOptions.tlsConfig, clientOptions.parse, runPut.
//     Tests: TestClientVerbUsageErrors, TestClientVerbsTokenAndEndpointSources, TestClientVerbsOverTheWire.
//  6. The exit code says who refused: 1 only for the store's own error
//     code (the client's UNAVAILABLE for a lost connection or a passed
//     deadline is no answer from the store, and exits 2 with connection
//     and handshake errors), reported on stderr and, with --json, as
//     {"error":{...}} on stdout.
//     Code: storeRefusal, clientOptions.fail, clientOptions.refuse.
//     Tests: TestClientVerbsOverTheWire, TestClientVerbsTokenAndEndpointSources.
//  7. watch prints the snapshot, then each update once and in order, and
//     says when and why it re-snapshots before the new snapshot's entries;
//     each update is acknowledged only once printed.
//     Code: runWatch, watchPrinter.print.
//     Tests: TestWatchVerb, TestWatchResnapshotsAfterServerRestart.
//  8. lease hold writes only create-only or on its own last revision, and
//     releases by deleting that revision, so it never overwrites or
//     deletes another holder's lease; a renewal refused CONFLICT or
//     NOT_FOUND, or not made within the TTL, ends it with a non-zero exit.
//     Code: leaseHold.run, leaseHold.put, leaseHold.release, leaseHold.heldByAnother.
//     Tests: TestLeaseHold, TestLeaseHoldRenewsAndSaysWhenLost.
//  9. A [cluster] section makes serve open the store as a raft node, and
//     every bad field of it stops serve naming the field; a raft or RPC
//     address off loopback needs [cluster.tls] (mutual TLS, the cluster
//     CA the only one trusted) or --insecure. /readyz is ready only while
//     a leader is known and the node has caught up; the cluster admin
//     surface answers admin principals only (403 otherwise). Its status
//     and the metrics carry the node's raft state and each member's
//     progress as the leader last heard it; the cluster verbs try each
//     endpoint in order until one answers, a change only past one that
//     could not be reached, so it is never sent twice.
//     Code: clusterSection.check, clusterSection.checkExposure, clusterSection.loadTLS, server.clusterUnready, server.admin,
//     server.clusterStatus, clusterCollector.Collect, clientOptions.clusterCall.
//     Tests: TestClusterConfigRefusals, TestClusterExposure, TestClusterOfThreeServes.
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
	{Name: "get", Summary: "read an entry: its metadata and document", Run: runGet},
	{Name: "put", Summary: "write an entry (blind, --create or --if-revision N compare-and-set; --ttl for a lease)", Run: runPut},
	{Name: "delete", Summary: "delete an entry (--if-revision N compare-and-set)", Run: runDelete},
	{Name: "watch", Summary: "print a namespace's snapshot, then every change, re-snapshotting when it must", Run: runWatch},
	{Name: "lease", Summary: "hold a lease: claim create-only with a TTL, renew, release on SIGINT (lease hold)", Run: runLease},
	{Name: "status", Summary: "the server as the token's principal sees it: capability, version, readable namespaces", Run: runStatus},
	{Name: "cluster", Summary: "a cluster node's membership and leadership: status, add-voter, remove, transfer-leader", Run: runCluster},
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
	fmt.Fprintln(w, "\nExamples:\n  kpstate token new --id alice > alice.txt && head -1 alice.txt > alice.token\n  kpstate serve --config /etc/kpstate/kpstate.toml\n  kpstate help serve")
	fmt.Fprintln(w, "  kpstate put user/alice prefs --schema keeppeek.group-preference.v1 --file prefs.json --token-file alice.token")
	fmt.Fprintln(w, "  KPSTATE_TOKEN=$(cat ops.token) kpstate watch service/transcoder-a --prefix intents/")
	fmt.Fprintln(w, "\nThe client verbs read the token from --token-file FILE or $KPSTATE_TOKEN (never a flag's value),")
	fmt.Fprintln(w, "the server from --endpoints or $KPSTATE_ENDPOINTS (default "+defaultEndpoint+").")
	fmt.Fprintln(w, "\nExit codes:\n  0  success\n  1  the store refused a request (stderr names the code, the field and the message;\n     with --json stdout carries {\"error\":{...}})\n  2  usage, configuration, connection or I/O error (a refused handshake shows the server's reason)")
}
