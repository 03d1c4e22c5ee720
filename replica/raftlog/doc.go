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
//     segment. A batch that reaches the end of a segment also pays
//     tidwall/wal's fsync of the sealed file and, with its first records
//     in the new one, a directory fsync (journal invariant 1): about one
//     batch in 450 for 2,300-byte entries and 1 MiB segments.
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
//     Code: LogStore.StoreLogs, LogStore.StageCommitIndex, journal.Journal.Write,
//     journal.Journal.Sync.
//     Tests: TestOneFdatasyncPerStoreLogs, TestCommitIndexPersistedWithTheNextBatch,
//     TestSIGKILLLosesNothingAcknowledged.
//  2. The log answers as raft.InmemStore does for every sequence raft can
//     issue (StoreLog(s), GetLog, First/LastIndex, prefix, suffix and
//     whole deletions, reopen), entries field by field.
//     Code: LogStore.GetLog, LogStore.DeleteRange, LogStore.FirstIndex, LogStore.LastIndex.
//     Tests: TestDifferentialAgainstInmemStore.
//  3. What raft's contract rules out is refused with a *RefusedError
//     naming the index and changes nothing: a batch not continuing the
//     log (ErrGap), a suffix deletion at or below the commit floor
//     (ErrCommitted), a hole (ErrRange), an entry over MaxEntryBytes.
//     Code: RefusedError, LogStore.StoreLogs, LogStore.DeleteRange,
//     journal.Journal.TruncateBack, journal.FloorError.
//     Tests: TestRefusals, journal.TestTruncateBackAndReset.
//  4. A kill at any moment loses no acknowledged entry, and the log stays
//     contiguous; damage anywhere but a torn, unacknowledged tail refuses
//     the open naming the index and offset.
//     Code: Open, journal.Journal.Reset, journal.JudgeTail.
//     Tests: TestSIGKILLLosesNothingAcknowledged, TestCorruptEntryBeforeTheTail,
//     journal.TestResetMarkerFinishedByOpen.
//  5. The StableStore file is replaced whole, atomically and durably, on
//     every Set; a file failing its checks is a *StableCorruptError, never
//     an empty store (which would let the node vote twice in a term), and
//     a failed Set keeps the old value.
//     Code: StableStore.Set, OpenStable, decodeStable, StableCorruptError.
//     Tests: TestStableStoreRoundTrip, TestStableStoreCorruption,
//     TestStableStoreFailedSetKeepsTheOldValue.
//
// Measured (BenchmarkStoreLogs, 2,300-byte entries, one run, this 2-core
// host's disk): see the benchmark's comment for the peer; StoreLogs costs
// 0.55-0.65x a bare tidwall/wal append and fdatasync of the same bytes,
// the journal's pre-written tail making its fdatasync an overwrite.
package raftlog
