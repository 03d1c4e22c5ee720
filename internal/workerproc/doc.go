// Package workerproc runs the worker kit's workers as separate OS
// processes against a state-store server: the transcoder of the
// specification's scenario 4 (one active and any number standing by,
// coordinated by a lease), the viewer of scenario 5 and the group client
// of scenario 6. Each reaches kpstate serve through client/ (one
// WebSocket session as the principal its token authenticates, TLS with
// --cacert, reconnection by itself) and the media server through
// mediasim.Remote, as that same principal.
//
// Main is the whole program (flags with pflag: --role, --endpoints,
// --token-file, --cacert, --media, --holder, --namespace,
// --intent-prefix, --lease-prefix, --lease-ttl, --max-backoff, --prefer;
// kpworker --help lists them). Its binary is cmd/kpworker under this
// directory, internal and unpublished, which this package's tests build
// and start: not a kpstate verb, because the only media server a worker
// can reach today is the simulator, and kpstate is the server operators
// install, which must not ship a client of a test simulator. The media
// server's stand-in is a mediasim.Server in the test's own process,
// served over loopback HTTP by mediasim.Server.Handler: its principal
// header is believed, so it is for loopback tests only. A worker for a
// real media server would keep this package's shape with the real API in
// mediasim.Remote's place.
//
// A worker prints one Line, a JSON object, per event on stdout: what its
// reconciler did (reconcile.Event, by its kind), the connection's loss
// and return, the group client's preference and joins, and its own start
// and stop. Diagnostics go to stderr. SIGTERM or SIGINT stops it cleanly
// (reconcile.Reconciler.Stop: its bindings ended, then its leases
// released, then its connections closed, exit 0); SIGKILL is a crash,
// whose leases lapse by their TTL.
//
// # Invariants
//
//  1. Bad input changes nothing: a flag, a token or CA file, a media URL
//     or a configuration the reconciler would refuse is a usage error
//     naming the flag, found before anything is dialled (the role's
//     configuration is built once with a placeholder principal to that
//     end), with nothing on stdout and exit 2.
//     Code: parse, options.check, FlagError, Main.
//     Tests: TestBadFlagsNameTheFlag, TestHelp.
//  2. A worker is its token's principal everywhere: the store
//     authenticates the token and decides every read and write by its
//     namespace policy (the transcoders' service/ needs an administrator,
//     the viewer and the group client write only their own user/<id>/),
//     and the worker reaches the media server as the principal the store
//     named (api/info), never one it chose.
//     Code: run, options.reconcileConfig.
//     Tests: TestWorkerProcessesAgainstKpstate.
//  3. Every event is one whole JSON line on stdout, written under one
//     lock in the order it happened, so a reader can follow a worker from
//     another process; a stdout nobody reads any more stops the lines,
//     not the work.
//     Code: emitter.emit, emitter.event, reportingLink.Disconnected, reportingLink.Reconnected.
//     Tests: TestWorkerProcessesAgainstKpstate.
//  4. A stop asked for by SIGTERM or SIGINT ends the worker's bindings
//     before it releases the leases that guarded them, so a standby
//     claims at once and finds the output free, and exits 0 after a last
//     "stopped" line (at once, while it is still starting and holds
//     nothing); a worker killed leaves its lease to expire, and the
//     standby publishes only after it did.
//     Code: Main, runReconciler, reconcile.Reconciler.Stop.
//     Tests: TestWorkerProcessesAgainstKpstate, TestSIGTERMWhileConnecting,
//     reconcile.TestStopReleasesTheLeaseAfterThePublication.
//  5. After the store's server went away and came back (a restart on the
//     same address), every worker reconnects by itself, acts on nothing
//     until it has re-snapshotted, then reconciles to the new snapshot
//     without sending again a command for a binding it still holds.
//     Code: runReconciler, reportingLink.Reconnected, runGroup, groupClient.apply.
//     Tests: TestWorkerProcessesAgainstKpstate.
//  6. The group client joins the group its stored preference names,
//     whoever of the owner's devices wrote it, and nothing else: the
//     preference grants nothing, membership is the media server's answer.
//     A refused join is not asked again until the preference changes; a
//     join that got no answer is retried once the media server answers.
//     Code: groupClient.reconcile, groupClient.apply, groupClient.parse, groupClient.savePreference.
//     Tests: TestWorkerProcessesAgainstKpstate, grouppref.TestScenario6PreferredGroupGrantsNothing.
package workerproc
