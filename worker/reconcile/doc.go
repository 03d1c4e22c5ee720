// Package reconcile is the worker loop that makes media intents real: it
// follows the intents under a namespace prefix through a client watch cache
// (watchcache), resolves each desired intent against the media server's
// current capabilities, issues ordinary media commands, and reports what
// it observed in a separate status entry.
//
// The two interfaces it needs from the embedder are defined here:
// Capabilities (ServerCapabilities: sources with their current session,
// variants with a ready state, codecs, publication and recording
// capability) and Media (Subscribe, Unsubscribe, StartPublication,
// StopPublication). mediasim implements both for tests.
//
// A Reconciler is driven by one goroutine (Run). Deliver, Disconnected and
// Reconnected only queue, so the reconciler can be a session's watch.Sink
// and a stateclient.Link.
//
// # Invariants
//
//  1. Watch discipline is the cache's: a snapshot is installed first, updates
//     apply in sequence and are acknowledged once applied, and any gap,
//     closure, rejected update or disconnect leads to a fresh snapshot. The
//     reconciler acts only while its intent cache follows a live watch, so
//     it never acts on state it cannot trust; what is already bound stays
//     bound while it is disconnected.
//     Code: Reconciler.pass, Reconciler.drain, watchcache.Cache.Synced.
//     Tests: TestNoCommandOnAStaleCache, TestFailureWatcherReconnectsWithFreshSnapshot,
//     TestFailureStoreRestartReestablishesWatches.
//  2. An intent names a stable source; the source session is resolved from
//     Capabilities on every pass, never stored. A binding whose session
//     ended is forgotten and the intent re-resolved, so a source session
//     change never invalidates an intent.
//     Code: Reconciler.act, decide.
//     Tests: TestFailureSourceSessionChangeKeepsIntent, TestNoCommandOnAStaleCache.
//  3. No command before validation: stream, variant readiness, codec,
//     publication and recording capability are checked first, and a publish
//     intent without a valid recording_mode is Invalid and never becomes a
//     StartPublication.
//     Code: decide, decidePublish, Reconciler.act.
//     Tests: TestDecide, TestScenario5ViewerWaitsForReadyVariant, TestScenario4TranscoderOwnsOutputVariant.
//  4. With a lease prefix configured, only the lease holder acts on a
//     publish intent; losing the lease, whether its watch shows it taken
//     or a renewal finds it gone, stops the publication in that pass, and
//     the worker stands by. The lease does not reserve the variant: a
//     StartPublication conflict is reported as Failed and retried when
//     capabilities change.
//     Code: Reconciler.holdLease, Reconciler.renewDue, Reconciler.loseLease, tracked.retryable.
//     Tests: TestScenario4TranscoderOwnsOutputVariant, TestLosingTheLeaseStopsThePublication,
//     TestLeaseLostAtRenewalStopsThePublication, TestFailureLeaseExpiresStandbyTakesOver.
//  5. The reconciler writes only under its lease and status prefixes, which
//     may not overlap the intent prefix, and only with compare-and-set
//     (create-only or its own revision): it never overwrites an intent, or
//     any entry another worker wrote.
//     Code: New, Reconciler.writeStatus, Reconciler.ours, lease.Lease.Claim, lease.Lease.Renew.
//     Tests: TestNewRejectsConfig, TestStatusNeverOverwritesAnotherWriter, TestScenario4TranscoderOwnsOutputVariant.
//  6. An intent that disappears (deleted, or its TTL expired) is torn
//     down: its binding stopped, its lease released, its status deleted.
//     One that stays but no longer asks for its binding (undesired, or
//     naming another output) has it stopped (StopPublication or
//     Unsubscribe) before anything else is started.
//     Code: Reconciler.pass, Reconciler.teardown, Reconciler.act, Reconciler.unbind.
//     Tests: TestFailureTTLExpiryStopsConsumers, TestDeletedPublishIntentIsTornDown,
//     TestPublishIntentChangeStopsThePublication.
//  7. A worker that stops on purpose leaves nothing behind: Stop ends
//     every binding before it releases the lease that guarded it, so a
//     standby claims at once and finds the output free, and its status
//     says Stopped. Run alone returns as a crash would, leaving leases
//     to lapse by their TTL.
//     Code: Reconciler.Stop, Reconciler.Run, Reconciler.release.
//     Tests: TestStopReleasesTheLeaseAfterThePublication, workerproc.TestWorkerProcessesAgainstKpstate.
package reconcile
