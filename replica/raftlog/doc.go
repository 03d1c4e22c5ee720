// Package raftlog is hashicorp/raft's durable storage on the store's own
// journal: a LogStore (raft.LogStore, raft.MonotonicLogStore and
// raft.CommitTrackingLogStore) whose entries are journal records, and a
// StableStore in one checksummed file. Each node then does one fdatasync
// per committed batch: the log's, with the commit index riding in it.
//
// # The log
//
// Each raft.Log is one journal record of kind 4 (RAFT; the frame is drawn
// in journal/raftframe.go and journal's doc): term, the commit index staged
// when it was stored, AppendedAt as seconds and nanoseconds, type,
// extensions and data, CRC-32C checked on every read. The journal index is
// the raft index. The journal brings its segments (tidwall/wal), torn-tail
// judgement, pre-written tail and cut-back after a failed write or sync.
//
//   - StoreLogs is one journal batch: journal.Write then journal.Sync, one
//     fdatasync, and no other fsync while the batch stays inside the tail
//     segment. Its goroutine (raft's main loop) waits for the fdatasync
//     parked on the journal's io_uring while Options.Contended reports
//     other work on the node, and in the system call otherwise. A batch that reaches the end of a segment also pays
//     tidwall/wal's fsync of the sealed file and, with its first records
//     in the new one, a directory fsync (journal invariant 1): once per
//     segment (1 MiB by default), so one single-entry batch in about 450,
//     one 64-entry batch in 7, at 2,300-byte entries.
//   - GetLog of an index the log does not hold is raft.ErrLogNotFound.
//   - DeleteRange accepts three shapes. A prefix (after a snapshot) is the
//     journal's TruncateFront. A suffix (a follower's conflicting entries)
//     is the journal's TruncateBack, refused (ErrCommitted) when it
//     reaches the commit floor. Everything (raft deletes every entry after
//     a snapshot install, since the store is monotonic) is the journal's
//     Reset: the next StoreLogs may start at any index, and one that does
//     not continue the old numbering resets the journal there first (a
//     crash mid-reset is finished by the next Open, from the RESET marker).
//     A hole in the middle is refused (ErrRange).
//   - The commit floor: the newest commit index a batch persisted (capped
//     at that batch's last index), the ACKNOWLEDGED marker's value (raised
//     to the floor at Close; the journal never raises it itself, see
//     journal.Options.ExternalFloor), and the snapshot index a Reset left.
//     GetCommitIndex reports it, never above LastIndex. Between a crash
//     and the previous Close the marker may lag: an emptied tail is then
//     noticed down to the last Close's floor only.
//
// hashicorp/raft v1.8.0 with Config.RestoreCommittedLogs restores the
// cluster configuration only from the newest snapshot and from entries
// above the persisted commit index (NewRaft's configuration scan starts
// after lastApplied, which restoreFromCommittedLogs has moved to the
// commit index, and applying an entry does not record a configuration): a
// node whose configuration entries are all committed and not yet in a
// snapshot restarts with no voters ("no known peers, aborting election").
// TestRaftRunsOnTheStores takes a snapshot after bootstrap for this reason.
// The replicated engine (replica.Start, restart.go) reports NewRaft a
// commit index capped below the newest configuration entry above the
// restored snapshot, and at the depth of raft's FSM queue (a longer replay
// blocks NewRaft forever), and snapshots after each configuration entry.
//
// Close persists, through the ACKNOWLEDGED marker, the staged commit index
// too (raft's, or the index the store applied, staged before Close): raft
// persists a batch's commit index only with the next batch, so without it
// a cleanly closed node would replay all but its last batch.
//
// Open reads every entry (each frame's CRC, kind RAFT), so damage before
// the tail fails the open with a *CorruptError naming the index, the
// segment and the byte offset; a torn final entry that was never
// acknowledged is cut as the journal cuts one (TailCut).
//
// # Invariants
//
//  1. An entry is acknowledged only once an fdatasync covered it, and a
//     StoreLogs is one journal batch and one fdatasync: the commit index
//     staged before it is written into its entries, never synced apart.
//     A failed write or sync keeps nothing of its batch (the journal's
//     cut-back).
//     Code: LogStore.StoreLogs, LogStore.StageCommitIndex, journal.Journal.Write,
//     journal.Journal.SyncParked.
//     Tests: TestOneFdatasyncPerStoreLogs, TestCommitIndexPersistedWithTheNextBatch,
//     TestSIGKILLLosesNothingAcknowledged, TestFailedSyncKeepsNothing.
//  2. The log answers as raft.InmemStore does for every sequence raft can
//     issue (StoreLog(s), GetLog, First/LastIndex, prefix, suffix and
//     whole deletions, reopen), entries field by field, and GetLog reads
//     concurrently with the changes. The newest 512 entries stored (at most
//     8 MiB of them) are also held in memory (raft's replication reads back what the leader
//     just stored, once per follower) and any deletion or reset forgets
//     them, so memory never answers for an entry the journal dropped. A
//     deletion of everything right after raft restored a snapshot the log
//     outruns keeps the entries above the snapshot (raft v1.8.0 keeps its
//     last-log index there; deleting them left a rejoining follower with a
//     hole and a "log not found" panic the nemesis found).
//     Code: LogStore.GetLog, LogStore.DeleteRange, LogStore.FirstIndex, LogStore.LastIndex, LogStore.remember, LogStore.forget, LogStore.RestoringSnapshot.
//     Tests: TestDifferentialAgainstInmemStore, TestReadsDuringStores, TestDeleteAllAfterARestoreKeepsWhatIsAbove,
//     TestRaftRunsOnTheStores.
//  3. What raft's contract rules out is refused with a *RefusedError
//     naming the index and changes nothing: a batch not continuing the
//     log (ErrGap), a suffix deletion at or below the commit floor
//     (ErrCommitted), a hole (ErrRange), an entry over MaxEntryBytes.
//     Code: RefusedError, LogStore.StoreLogs, LogStore.DeleteRange,
//     journal.Journal.TruncateBack, journal.FloorError.
//     Tests: TestRefusals, journal.TestTruncateBackAndReset.
//  4. A kill at any moment loses no acknowledged entry, and the log stays
//     contiguous; damage anywhere but a torn, unacknowledged tail refuses
//     the open naming the index and offset; a torn final entry is cut only
//     above the commit floor.
//     Code: Open, journal.Journal.Reset, journal.JudgeTail.
//     Tests: TestSIGKILLLosesNothingAcknowledged, TestCorruptEntryBeforeTheTail,
//     TestTornTailCutUnlessCommitted, journal.TestResetMarkerFinishedByOpen.
//  5. A failure never leaves the log shorter than raft believes it.
//     Raft v1.8.0 moves its own last-log index only when the StoreLogs
//     after a cut of a conflicting suffix succeeds: when the cut or that
//     StoreLogs fails, the cut entries are given back (served from memory
//     at once, written back before the next change; with the persisted
//     commit floor, so a restart never counts them committed), and a read
//     after a failed write reopens the journal instead of failing. Either
//     gap left the follower refusing every AppendEntries ("failed to get
//     log entry") until the leader sent a snapshot, or for ever on a short
//     log (the nemesis saw a node stuck 50 s). A suffix over 64 MiB is cut
//     without this.
//     Code: LogStore.DeleteRange, LogStore.StoreLogs, LogStore.settle, LogStore.suffix, LogStore.bounds,
//     LogStore.GetLog, journal.Journal.Read.
//     Tests: TestUnsettledSuffixDeletion, TestDeposedLeaderCatchesUpAfterAFailedStore,
//     journal.TestReadAfterAFailedWriteReopens.
//  6. The StableStore file is replaced whole, atomically and durably, on
//     every Set; a file failing its checks is a *StableCorruptError, never
//     an empty store (which would let the node vote twice in a term), and
//     a failed Set keeps the old value.
//     Code: StableStore.Set, OpenStable, decodeStable, StableCorruptError.
//     Tests: TestStableStoreRoundTrip, TestStableStoreCorruption,
//     TestStableStoreFailedSetKeepsTheOldValue.
//  7. A StoreLogs' fdatasync parks on the io_uring (journal.SyncParked)
//     exactly when Options.Contended reports true, always without
//     Contended, never with WaitInSyscall; the choice changes how its
//     goroutine waits, never the fdatasync count or what is durable.
//     Measured (cluster_serial with a second store cluster parking every
//     fdatasync, alternated in one run, 3 runs): cluster_cas p50
//     0.92-0.95x the parked cluster's, its leader's fdatasync p50 296 us
//     against 361 us.
//     Code: Options.Contended, LogStore.waitInSyscall, LogStore.append.
//     Tests: TestSyncParksOnlyWhenContended.
//
// Measured (BenchmarkStoreLogsAlternating: each iteration one StoreLogs
// and one bare tidwall/wal append plus fdatasync of the same frame bytes,
// in turn; 2,300-byte entries, 3 runs of 3,000 on this 2-core host's shared
// disk): a batch of 1 costs 0.82-0.88x the bare append (398-548 us against
// 461-630 us), a batch of 64 0.84-0.92x (1.99-2.21 ms against 2.36-2.41
// ms). The journal's pre-written tail, whose fdatasync overwrites instead
// of appending, is the likely reason it beats the bare append despite the
// framing, the checks and the io_uring wait; this benchmark does not
// isolate it. BenchmarkStoreLogs runs the variants (no pre-writing, a
// direct fdatasync) one after another, and on a shared disk their drift
// swamps the differences.
package raftlog
