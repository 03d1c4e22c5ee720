// Package statestore is KeepPeek's durable coordination plane: small,
// schema-checked desired-state documents under namespaced keys, with
// revisioned get, put and delete, compare-and-set, TTL leases and namespace
// authorization, on an event-sourced engine.
//
// # Using it
//
// [Open] a store in a directory, then call [Store.Get], [Store.Put] and
// [Store.Delete] with the [Principal] your session layer authenticated.
// Every entry is one complete JSON document of a registered schema
// (keeppeek.media-intent.v1 and keeppeek.mqtt-bridge.v1 are built in; see
// package schema). To follow
// changes, open a [Session] with a watch.Sink (watch.ChanSink is a ready
// one), [Store.Watch] a namespace and key prefix, and [Store.Ack] each
// update you apply. The Example functions of this package are complete
// programs: Open, compare-and-set, handling CONFLICT, a lease, a watch, and
// a backup restored elsewhere.
//
// # Namespaces and who may use them
//
// A namespace is system, system/<id>, service/<id>, group/<id> or
// user/<owner-id>; an <id> and each '/'-separated key segment are
// [A-Za-z0-9._-]+, never "." or "..". The policy below is decided from the
// Principal alone; a namespace's spelling grants nothing (a principal whose
// ID is "transcoder-a" has no rights in service/transcoder-a):
//
//	namespace          write                          read and watch
//	system/            the server only (System())     administrators
//	service/<id>/      administrators                 administrators
//	group/<id>/        administrators                 administrators
//	user/<owner-id>/   the owner (ID == owner-id)     the owner
//	                   or administrators              or administrators
//
// A principal with an empty ID has no access at all. A refusal is
// PERMISSION_DENIED, and its message names the rule above that refused.
//
// A Principal is an administrator when the embedder sets Principal.Admin:
// the media server does so for the sessions it authenticated as operators.
// Nothing a client sends can make it one, and System(), the server's own
// principal, is the only one that can write system/. The owner of every
// entry written is the calling principal's ID; a client cannot choose it.
// [Store.SetPrincipal] changes a live principal's rights and closes the
// watches it may no longer read.
//
// # Live configuration
//
// Two kinds of namespace hold live configuration rather than leases. A PUT
// there with any TTL, whatever its value, is TTL_INVALID on field "ttl"
// ("... live configuration takes no TTL") and writes nothing; a TTL is
// neither clamped nor checked against the minimum first.
//
//   - MQTT integration state: every service/mqtt-<bridge> namespace
//     ([MQTTNamespace]). It holds one bridge's desired state, a
//     keeppeek.mqtt-bridge.v1 document (broker host, port and TLS flag,
//     topic mappings with their QoS; see package schema) at key "bridge".
//     The class follows from the spelling alone, so it holds in every store
//     without a declaration; that spelling decides only this and grants
//     nothing (writers are service/'s: administrators). A bridge whose
//     configuration lapsed would silently drop its mappings, so a lease is
//     refused rather than clamped. The bridge's credentials stay in the
//     media server's secrets.toml under the bridge's ID, and the schema
//     refuses them in the document. A bridge worker's own liveness lease
//     belongs in another service namespace.
//   - Settings-backed namespaces (Options.Settings, settings.go), declared
//     and held in the [state_store] section of config.toml.
//
// Declaring a bridge's namespace settings-backed keeps its configuration in
// config.toml, so it travels in the configuration ZIP beside the
// secrets.toml that holds its credentials.
//
// # Compare-and-set
//
// PutRequest.Expect and DeleteRequest.Expect carry expected_revision:
//
//	Expect{} (zero)   blind replace (or delete), as policy permits
//	CreateOnly        create only: CONFLICT if the key exists
//	IfRevision(n)     only if the entry's revision is n: CONFLICT otherwise
//	                  (a missing key is CONFLICT with current revision 0)
//
// Deleting a missing key is NOT_FOUND whatever Expect says.
//
// A CONFLICT error carries the current revision in Error.CurrentRevision. The
// writer rereads, merges its own intent and retries with IfRevision of what
// it read; it never retries blind, which would discard another writer's state.
//
// # Leases
//
// PutRequest.TTL requests a lease: below 1 s is TTL_INVALID, above 24 h is
// clamped to 24 h, and Entry.ExpiresMs is the accepted deadline. Expiry is
// inclusive: at ExpiresMs the entry already reads as NOT_FOUND. Every expiry
// is journaled as an EXPIRE, advances its namespace revision by one and
// reaches each matching watch as one update. The holder renews with
// IfRevision of its last write; others claim with CreateOnly after it lapses.
//
// # Bounds
//
// Options.Limits (package quota) sets them; the defaults are 4,096
// namespaces holding entries, 1,024 entries per namespace, 64 MiB of
// document bytes in the store, 16 KiB per document, watch snapshots of 64
// entries and 64 KiB, 32 unacknowledged updates per watch, a 30 s
// acknowledgement deadline, and 1,024 watches (16 per session). A watch_id
// is one key segment and, like a key, at most MaxKeyBytes (256) long. A write
// over a bound is refused before it is journaled and reserves nothing.
//
// # Stored documents
//
// Everything the store holds passes the document rules a write passes
// (package schema: the schema's validator and the content guard), wherever
// it came from. Open validates every document of the checkpoint image it
// starts from and of every journal record it replays after it; Restore
// and RestoreDir validate every document of a backup. Each document is
// checked after its record's or image's identifiers, schema name, owner,
// revisions and bounds, so nothing is decoded before its size and schema
// are known good. A document that fails refuses the Open (UNAVAILABLE) or
// the backup (INVALID_ARGUMENT, field "backup") with a [DocumentError]
// naming the namespace and key, the journal index (inside the
// journal.CorruptError that also names the segment and offset) or the
// image, and the rule (its *schema.Error: the field's JSON path and what
// it breaks), and changes nothing. kpjournal verify reports the same
// finding in the same words. An intact image holding such a document is
// not damage: Open does not fall back from it to an older image, which
// could only end in a vaguer refusal. Validation runs on every processor
// beside the replay; on two cores it adds about a third to replaying a
// journal and doubles loading an image (the schema's fast path costs about
// what decoding does: roughly 3 µs for a 2 KB media intent), some 50 ms
// per Open for a store at the default 64 MiB bound (BenchmarkReplay,
// BenchmarkOpenFromCheckpoint).
//
// Tightened rules. A newer build may tighten a schema, or the content
// guard, under entries an older build stored. Such a store is refused, not
// served with a flag: serving a document the running rules forbid would
// break the guarantee above (a credential the guard has learned to catch
// would reach every watcher), and dropping it would lose acknowledged
// state. The refusal says what to do: run the previous build, rewrite or
// delete each entry the newer kpjournal verify lists (for the schemas it
// knows; Open's refusal names the first), take a checkpoint with the
// previous build (Store.Checkpoint, or its kpjournal checkpoint) so that
// replay starts after the old records, then start the newer build. A rule
// that old entries need not meet belongs in a new schema version
// (keeppeek.<name>.v<N+1>) registered beside the old one:
// schema.Registry.Register never replaces a name.
//
// # Engine
//
//	call -> admission (policy, identifiers, schema, quota, CAS)   this package
//	     -> journal/   segmented write-ahead journal, the sole revision authority
//	     -> materialize/  copy-on-write B-tree view, published after the fsync
//	     -> reply
//
// The package's files follow those layers: the facade (store.go: every
// method of Store; request.go, options.go, policy.go, session.go,
// errors.go), the commit path (commit.go: the pipeline, behind commitEnv
// and the commitLog interface; batch.go: admission; backend.go: the two
// homes of a namespace, the journal and config.toml (settings.go);
// expiry.go: leases), recovery (open.go; the rebuilding itself is
// internal/recovery), checkpoints and backups (checkpoint.go, backup.go)
// and operator stats (stats.go). Each file's tests are in the test file of
// its stem; commit_internal_test.go runs the pipeline on a fake log.
//
// # Cluster mode
//
// OpenCluster opens the same *Store as one node of a raft group
// (cluster.go, fsm.go), driven through the engine-neutral contract of
// package replica/consensus; ClusterOptions.Engine is the engine, package
// replica's Raft for hashicorp/raft. This package imports neither: a
// program that embeds a single store links no raft, no net and no
// crypto/tls. The leader admits as above and proposes
// each group-commit batch as one raft entry of journal frames instead of
// writing the journal; every node's state machine checks the records as
// replay does and publishes them to its view and watches; followers
// forward writes to the leader and read linearizably through its read
// index (StaleOK reads locally); only the leader expires leases. The rules
// of time, leases and outcomes, and how a test builds a cluster in one
// process, are in replica's package comment, with the two rules a node
// keeps against its peers: one that has heard from no leader for
// ClusterOptions.LeaderlessAfter closes its watches UNAVAILABLE and
// refuses all but StaleOK reads (cluster_leaderless.go); one whose limits
// or schemas differ from a peer's is refused at open or at AddVoter
// (cluster_agree.go). Settings-backed namespaces and Restore are refused
// in cluster mode; Checkpoint takes a raft snapshot. Cluster.Stats is a
// node's raft state for operators, with each follower's progress on the
// leader (cluster_stats.go).
//
// A cluster node is durable by default: its journal directory holds raft's
// log (replica/raftlog: one fdatasync per committed batch, raft's commit
// index persisted with the entries), raft-stable its term and vote,
// raft-snapshots the raft snapshots (checkpoint images). Reopened on the
// same directory it replays its log to the persisted commit index before
// any leader is known (replica's restart.go, with the two traps of
// hashicorp/raft's replay stepped around), and Close persists the index
// it applied. replica.Raft's LogStore and StableStore override the pair.
//
// # Invariants
//
// Each names the code that keeps it and the tests that pin it
// (TestInvariantIndex checks that every name exists).
//
//  1. Commit before apply: no reply and no visible change before the
//     journal batch holding a mutation is fsynced. A failed write or fsync
//     answers STORAGE to every call of its batch, and of every batch
//     admitted on top of it, and changes nothing in memory; batches
//     already synced are always published. (Admission of the next batches
//     runs while a sync is in flight; see commit.go.)
//     Code: pipeline.syncRound, pipeline.resetPendingLocked, journalBackend.publish, batch.answer.
//     Tests: TestPipelineCommitsBeforeApply, TestPipelinePoisonsAfterFailedSync,
//     TestPipelinePublishesWhatWasSynced, TestSyncFailureMidPipeline, TestSyncFailureLoneWriter.
//  2. Each namespace has a dense revision counter: every committed PUT,
//     DELETE or EXPIRE advances it by exactly one; it is kept when the
//     namespace empties and survives restart. Entry.Revision is the
//     namespace revision of the entry's last PUT.
//     Code: batch.admit, batch.expireDue, materialize.View.Apply.
//     Tests: TestContractExpectedRevision, TestContractQuota, TestReopenIdentical,
//     TestNamespacesListsEmptiedNamespacesWithTheirRevision.
//  3. Open replays exactly the acknowledged state, refusing (with the
//     journal index and reason) anything no admitted write could have
//     produced: the image it starts from and every record after it pass
//     the rules admission applies, documents included, metadata first
//     (see Stored documents), and kpjournal verify reports the same.
//     Code: open, recovery.Load, recovery.Checker.Check, recovery.Checker.LoadImage.
//     Tests: TestReplayRejects, TestOpenCutsTornTailAndRefusesCorruption, TestReopenIdentical,
//     TestOpenRefusesForbiddenDocuments, recovery.TestLoadReportsTheFirstFailureAsCheckDoes,
//     kpjournal.TestVerifyReportsForbiddenDocumentsAsOpenRefuses, kpjournal.TestVerifyIgnoresDocumentsBeforeTheReplayBase.
//  4. Nothing acknowledged is lost: after SIGKILL at any instant,
//     reopening yields every acknowledged write (or a later acknowledged
//     one), and revisions keep increasing.
//     Code: pipeline.syncRound, journal.Journal.Sync.
//     Tests: TestCrashKillNoAcknowledgedWriteLost, TestCrashKillDuringCheckpoints, TestCrashKillDuringTrims.
//  5. Authorization is decided from the authenticated Principal only, and
//     the owner of a written entry is always the calling principal.
//     Code: authorize, checkOwner, Store.Put.
//     Tests: TestNamespacePolicy, TestPermissionDeniedNamesRule, TestWriterIDBecomesAValidOwner.
//  6. Admission happens before the journal: a rejected write reserves
//     nothing, and a full store fails the write instead of evicting.
//     Code: batch.admit, quota.Limits.CheckPut.
//     Tests: TestContractQuota, TestQuotaNamespaceCount, TestScenario7Rejections.
//  7. Watches see no gap: a watch's snapshot is captured and the watch
//     registered at one point of its home's commit order (the journal's
//     commit-order lock, or for a settings-backed namespace the
//     configuration lock every settings commit holds), so a mutation
//     committed meanwhile is in the snapshot or arrives once as an update,
//     never neither, never both.
//     Code: Store.Watch, journalBackend.atCommitPoint, settingsBackend.atCommitPoint, Session.register.
//     Tests: TestScenario3WatchDuringWrites, TestContractWatch, TestSettingsWatchSnapshotUnderTheConfigurationLock.
//  8. Leases: every expiry is a journaled EXPIRE, committed before
//     anything observes the key as absent, one per lease, reaching every
//     matching watch once; Open purges overdue leases before serving, and
//     a watch snapshot that meets a due lease commits its EXPIRE first and
//     snapshots the state after it.
//     Code: batch.expireDue, expirer.run, purgeOverdue, Store.Get, capture, journalBackend.atCommitPoint.
//     Tests: TestLeasePattern, TestContractTTL, TestExpiredKeyObservedOnlyAfterExpire,
//     TestRestartPurgesOverdueLeases, TestScenario2LeaseExpiryReachesEveryWatcher, TestWatchSnapshotExpiresDueLeasesFirst.
//  9. Once Close has begun, every call that can fail answers UNAVAILABLE
//     and touches no file: another handle may own the directory by then.
//     Close releases the LOCK only after a Restore or Checkpoint in flight
//     has finished.
//     Code: Store.Close, Store.checkOpen, pipeline.close, checkpointer.quiesce.
//     Tests: TestClosedStoreAnswersUnavailable, TestClosedHandleCannotUndoRestore,
//     TestCheckpointAndRestoreRacingClose, TestPipelineExclusiveAndClose.
//  10. The journal after the newest checkpoint is bounded by the checkpoint
//     threshold however often the store restarts: the trigger counts the
//     records Open replays, and fires right after Open when they are over.
//     Under a write load that outpaces checkpointing, the threshold is at
//     least sixteen times the journal written while the previous background
//     checkpoint ran, so images take a bounded share of the machine and
//     the journal after the newest one stays a bounded time of writes.
//     Code: checkpointer.maybe, checkpointer.pruneLocked.
//     Tests: TestRestartingWriterJournalBounded, TestOpenCheckpointsWhenJournalIsOver,
//     TestCheckpointSpacingFollowsWritesDuringOne, TestContinuousChurn, TestRestartChurn.
//  11. A full disk never locks the operator out (next section).
//     Code: batch.admit, purgeOverdue, expirer.run.
//     Tests: TestFullDiskNeverLocksTheOperatorOut, TestOpenOnFullDiskSpendsReserveForPurge, TestExpiryRetryWaitsOnTheClock.
//  12. A settings-backed write is published only after config.toml was
//     rewritten durably; a failed rewrite answers STORAGE and changes
//     nothing, in memory or in the file.
//     Code: settingsBackend.commit, settings.File.Replace.
//     Tests: TestSettingsFailedWrite, TestSettingsCrashDuringRewrite.
//  13. A backup is restored only if every entry passes the rules a write
//     passes, its document included; a refused one changes no file and
//     no entry, in the open store or in RestoreDir's directory.
//     Code: decodeBackup, RestoreDir, recovery.Checker.DecodeBackup.
//     Tests: TestRestoreRefusesForbiddenDocument, TestRestoreRefusesBadBackups.
//  14. A build whose rules stored documents no longer meet refuses the
//     store, naming the entry and the rule and changing nothing, until it
//     is migrated (Tightened rules above); it never serves or drops them.
//     Code: Open, recovery.Load, recovery.MigrationHint.
//     Tests: TestTightenedSchemaRefusesOldEntriesUntilMigrated.
//  15. Live configuration takes no lease: a PUT with any TTL to an MQTT
//     integration namespace (service/mqtt-<bridge>) or a settings-backed
//     one is TTL_INVALID on field "ttl" and changes nothing, in memory or
//     on disk; the same TTL on any other namespace is a lease. Stored data
//     holds to it too: a journal record, checkpoint or backup entry with a
//     lease in an MQTT integration namespace refuses Open and Restore.
//     Code: refuseLease, rules.LiveConfiguration, settingsBackend.commit, Store.Put, recovery.Checker.CheckLease.
//     Tests: TestLiveConfigurationRefusesTTL, TestContractTTL, TestReplayRejects.
//  16. A cluster node by default does exactly one fdatasync per committed
//     batch, its log's (beside the once-per-segment seal and directory
//     fsyncs), and one raft entry per group-commit batch; the state
//     machine and the store add none. Reopened, it holds every write it
//     acknowledged or applied, its revisions go on from there, and it
//     serves its applied state before a leader is known; damage in its log
//     or a held LOCK refuses the open.
//     Code: OpenCluster, openCluster, clusterNode.closeLog, raftlog.LogStore.StoreLogs,
//     replica.RestartCap.
//     Tests: TestClusterOneFdatasyncPerCommittedBatch, TestClusterRestartFollowerThenLeader,
//     TestClusterRestartAllThree, TestClusterRestartAfterMembershipChangeWithoutSnapshots,
//     TestClusterRefusesToOpen.
//  17. A node's applied state never goes back: a raft snapshot at or below
//     the index it applied (raft sends a follower whose log it could not
//     match the leader's newest) is not restored, the entries raft replays
//     after it are skipped, and no snapshot is taken until that replay is
//     back at the applied index; so no watch re-snapshots at an older
//     revision or receives an update twice.
//     Code: fsm.Restore, fsm.restored, fsm.feed, fsm.Apply, fsm.Snapshot.
//     Tests: TestFSMNeverGoesBack, TestClusterSnapshotInstallClosesWatches.
//  18. A write forwarded to a node is applied there, or answered not
//     applied at once if that node does not lead (only a node raft made
//     leader and still taking over holds it), so the forwarder retries it
//     at the leader; no forwarded write waits at a deposed leader for a
//     term it will never lead.
//     Code: clusterNode.write, clusterNode.handle.
//     Tests: TestForwardedWriteAtANonLeaderIsNotAppliedAtOnce.
//  19. The package links no replication engine and no network stack:
//     cluster mode talks to replica/consensus only (its Node, FSM, Future
//     and Engine), and the engine arrives through ClusterOptions.Engine,
//     so github.com/hashicorp/*, net, net/http, net/rpc, crypto/tls and
//     text/template are not among its dependencies (issue 30: a
//     single-node embedder paid 3 MB resident for them).
//     Code: ClusterOptions, OpenCluster, RecoverCluster, clusterNode, raftOutcome,
//     consensus.Engine, consensus.Node.
//     Tests: TestRootLinksNoReplicationEngine.
//
// # Full disk
//
// A full disk never locks the operator out. The journal keeps a reserve
// (Options.ReserveBytes, 256 KiB by default: a file of real bytes beside
// its segments). The write that meets the full disk answers STORAGE, and
// the journal gives the reserve up. From then on, until space is freed,
// every PUT is refused with STORAGE (field "journal reserve": "disk full:
// the journal is running on its reserve; only deletes are accepted until
// space is freed"), since every PUT appends a whole record, even one that
// shrinks a document. DELETEs, lease EXPIREs and the restart purge are
// admitted and written into the freed space, and every committed entry
// stays readable. So an operator can delete through the API, leases still
// lapse and reach their watchers, and a store whose leases lapsed while the
// disk was full still opens (if its purge finds no room, the journal gives
// the reserve up and the purge is tried once more). Each PUT refused this
// way first checks the disk: once there is room for the reserve twice
// over, it is written again and the PUT is accepted. Stats.JournalReserve
// tells whether the store is running on it. A checkpoint on a full disk
// fails with STORAGE and leaves the journal as it was. If the EXPIREs of
// lapsed leases are refused (the reserve used up too, or a failing disk),
// they are tried again a second later, never in a busy loop.
//
// Settings-backed namespaces (Options.Settings, settings.go) take the same
// admission and watch registry, but commit by atomically rewriting the
// [state_store] section of the media server's config.toml instead of the
// journal; they reject every TTL and travel with the configuration ZIP,
// never with a runtime Backup.
//
// Every error the store returns is an *Error carrying a Code, usable with
// errors.Is against the Err* sentinels.
//
// Store.Stats is the operator view: commit and fdatasync latency, batch
// sizes, writes refused by code, watches, quota use, checkpoints and the
// journal on disk, counted with atomics on the commit path (see
// stats.go); FailedOpenStats gives the same view for an Open that
// failed. Package promstats exports it to Prometheus.
package statestore
