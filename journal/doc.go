// Package journal is the store's write-ahead journal and its sole revision
// authority: a segmented, append-only sequence of checksummed records on top
// of github.com/tidwall/wal.
//
// Everything the journal relies on in tidwall/wal beyond its exported API
// (file naming, entry encoding, when a segment is sealed, the crash
// markers of a truncation, its fsync switched off, its tail buffer) is
// written down once, in tidwall.go, and pinned by tidwall_test.go against
// the version in go.mod.
//
// # On-disk format
//
// A journal is a directory of segment files. tidwall/wal names each file
// after the index of its first entry, zero-padded to 20 decimal digits
// ("00000000000000000001"), and writes each entry as
//
//	+-------------------+------------------------------+
//	| uvarint(len)      | len bytes: one record frame   |
//	+-------------------+------------------------------+
//
// with no checksum or magic of its own. Every entry the journal writes is
// one record frame, all integers little-endian:
//
//	 offset  size  field
//	+------+------+-------------------------------------------------+
//	|   0  |   1  | version (1)                                     |
//	|   1  |   1  | kind: 1 PUT, 2 DELETE, 3 EXPIRE                 |
//	|   2  |   8  | namespace revision this record produces         |
//	|  10  |   8  | commit wall-clock time, ms since the Unix epoch |
//	|  18  |   2  | namespace length N                              |
//	|  20  |   2  | key length K                                    |
//	|  22  |   N  | namespace                                       |
//	| 22+N |   K  | key                                             |
//	+------+------+-------------------------------------------------+
//	  PUT only, from p = 22+N+K:
//	|   p  |   2  | schema length S                                 |
//	|  p+2 |   2  | owner length O                                  |
//	|  p+4 |   8  | created ms                                      |
//	| p+12 |   8  | updated ms                                      |
//	| p+20 |   8  | expires ms (0: no lease)                        |
//	| p+28 |   4  | document length D                               |
//	| p+32 |   S  | schema name                                     |
//	|  ... |   O  | owner                                           |
//	|  ... |   D  | document (a JSON object)                        |
//	+------+------+-------------------------------------------------+
//	| end-4|   4  | CRC-32C (Castagnoli) of every byte before it    |
//	+------+------+-------------------------------------------------+
//
// A DELETE or EXPIRE frame ends after the key. Kind 4, RAFT, is a
// hashicorp/raft log entry (replica/raftlog's journals only), with a layout
// of its own after the version and kind bytes, drawn in raftframe.go: term,
// staged commit index, appended-at seconds and nanoseconds, log type,
// extensions and data lengths, then the extensions, the data and the same
// CRC-32C. Limits.MaxRaftEntry 0 (DefaultLimits, the store's) refuses the
// kind, so a store journal never reads one as data. Journal indexes are
// dense, starting at 1 (or at the index CreateEmpty or Reset named); a
// segment starting at index s holding n records is followed by a segment
// starting at s+n. A RESET file (16 bytes, drawn in raftops.go) is a Reset
// in progress, finished by Open.
//
// # Invariants
//
//  1. A record is acknowledged (LastIndex) only once an fsync covered it:
//     Write hands a batch to the page cache, Sync fdatasyncs the tail
//     segment through a descriptor of its own, outside every lock, so the
//     next batch can be written meanwhile. Append is Write then Sync. The
//     one fsync that is not a Sync's: tidwall/wal fsyncs a segment as it
//     seals it, so when a batch's last record sealed a segment whose
//     directory entry a directory fsync already covered (Open, a recovery
//     or an earlier Sync fsyncs the directory), Write itself acknowledges
//     everything written, and a Sync up to it does no I/O. A batch that
//     continues into the next segment is acknowledged whole, by a Sync.
//     Code: Journal.Write, Journal.Sync, Journal.sync, Journal.syncFileLocked,
//     Journal.Append.
//     Tests: TestWriteThenSync, TestSyncAcknowledgesDuringWrite,
//     TestNewSegmentDirectoryIsSynced, TestSealAcknowledgesWholeBatchesOnly.
//  2. A Sync that acknowledges records in a segment file created since
//     the previous Sync also fsyncs the journal directory first
//     (tidwall/wal never syncs directories). A new segment that holds no
//     record yet waits for that Sync: nothing acknowledged depends on its
//     entry.
//     Code: Journal.sync, Journal.syncSegmentDir, Journal.dirDirty,
//     Journal.dirSynced.
//     Tests: TestNewSegmentDirectoryIsSynced, TestFailedSyncNeverAcknowledgesLostPages,
//     TestFaultsStayWithTheirJournal.
//  3. Write refuses a batch whose first index does not continue the
//     written records (ErrStale), so a caller that built on records a
//     failure cut back can never leave a gap or a repeat.
//     Code: Journal.Write, ErrStale.
//     Tests: TestWriteThenSync, TestSyncFailureCutsBack.
//  4. Every record is verified (CRC, version, kind, lengths within Limits)
//     on replay. An empty entry, which is how tidwall/wal reads zero-filled
//     bytes, is damage, never data.
//     Code: ReplayDir, scan, entryAt, Frame.Parse.
//     Tests: TestFlippedByteInSealedSegment, TestMissingAndDuplicatedSegments,
//     TestSealedSegmentEndingInZerosIsCorrupt, TestScannerDamage,
//     TestDecodeRejects, FuzzScanner.
//  5. The tail segment is pre-written (prewrite.go): a background goroutine
//     writes zeros ahead of tidwall/wal's write offset, up to the segment
//     size, in chunks of 256 KiB or of 16 times the last batch if larger
//     (up to 1 MiB: each chunk is one size change that commits carry until
//     its fdatasync), each fdatasynced, so a commit's fdatasync
//     overwrites blocks that exist and carries no size or allocation change
//     (0.6-0.7x the cost of an appending one on the disk measured). Zeros
//     are written only at or after the write offset: their range is chosen
//     under the lock every Write takes and reserved before the write(2),
//     and a Write that would reach a reserved range waits for it, so they
//     never land on a record while a Write below them goes on; the entry that seals a
//     segment reaches the segment size, past every zero, so sealed segments
//     hold records only and zeros ending one are corruption. Close trims the
//     zeros; Open trims a run of zero bytes from an entry boundary to the end
//     of the last segment without a TailCut or a quarantine copy (they are
//     pre-written space, or records whose sync never returned), counting it
//     in Stats.Trimmed, unless acknowledged records were there (the floor).
//     Stats.Prewritten is the synced space ahead of the records (the space a
//     full-disk reserve can count on). From the write that opens a new
//     segment until the sync of its first records returns, pre-writing
//     rests: that sync carries the new file's blocks and directory entry,
//     and zero chunks queued ahead of it on the device made it the slowest
//     commit of every segment. A failed zero write stops pre-writing
//     for that segment, a failed zero fdatasync is treated as a failed
//     commit. Options.NoPrewrite keeps the tail append-only.
//     Code: Journal.prewriteStep, prewriteChunkFor, Journal.waitPrewriteBelow,
//     Journal.waitPrewriteLocked, Journal.kickPrewriterLocked, prewriter.held,
//     Journal.trimTailLocked, Journal.repairTail.
//     Tests: TestPrewriteOverwritesInsteadOfAppending, TestSealedSegmentsHoldRecordsOnly,
//     TestCrashStatesOfPrewriting, TestSealedSegmentEndingInZerosIsCorrupt,
//     TestPrewriteSyncFailureRecovers, TestPrewriteWriteFailureRests,
//     TestPrewriterRestsUntilNewSegmentSynced, TestWritesBelowZerosBeingWrittenGoOn,
//     TestPrewriteChunkFollowsTheCommitRate, TestNoPrewriteKeepsTailAppendOnly.
//  6. tidwall/wal's tail buffer is given its room by the journal before
//     every write (tidwall.go), so its appends never reallocate it; a
//     tidwall/wal whose layout differs makes this a no-op, never a memory
//     error. Under Options.CacheSealed (a raft log) the room grows in steps
//     with the tail (at least doubling, from minTailBuffer up to a whole
//     segment plus its largest entry), so a journal that never fills a
//     segment holds about twice its tail, not a segment. The buffer is one an earlier tail had, once tidwall/wal holds
//     it no longer (checked on its segments, never assumed), so a segment
//     change allocates nothing; and a batch whose entry seals a segment is
//     handed over in two parts, so the new tail gets its room before the
//     rest of the batch lands in it. Unless Options.CacheSealed, the sealed
//     segments' in-memory copies are dropped when the new tail first needs
//     room (entry positions first, so a Read reloads the file), and the tail
//     that was sealed gives its buffer to the next: one segment-sized buffer
//     per journal, not two. And unless Options.CacheSealed, the tail's
//     bytes do not stay in memory (tailpages.go): the tail buffer is an
//     anonymous mapping of a whole segment plus its largest entry, outside
//     the Go heap, and before each write the pages below the tail's last
//     page that earlier writes filled are released (MADV_DONTNEED, at
//     least releaseStep at a time; the pages ahead are faulted in a step
//     at a time, MADV_POPULATE_WRITE where the kernel has it), so a tail
//     holds about three releaseSteps resident instead of its size and the
//     collector's goal no longer doubles it. A released page reads as zeros, so before tidwall/wal
//     may read its buffers (Read, TruncateFront) the released part is read
//     back from the tail file, which holds the same bytes at the same
//     offsets, and the sealed segments' copies are dropped, so they reload
//     from their files. The mappings are unmapped at Close, after the Log
//     is closed.
//     Code: presizeTail, tailBuffer, tailSpares.take, tailSpares.forget, heldBy,
//     Journal.tailCapacity, Journal.growTailLocked, tailGrowth, dropSealed,
//     tailPages.mapBuffer, tailPages.adopt, tailPages.release, tailPages.unmap,
//     Journal.restoreTailLocked.
//     Tests: TestTailBufferPresized, TestTailBufferGrowsWithTheTail, TestTailBufferReused,
//     TestTailPagesReleased.
//  7. Three locks, taken in this order: wmu by everything that changes the
//     files or the wal handle (Write for its whole batch, the pre-writer
//     while it reserves a range, a recovery, TruncateFront, the reserve's
//     writes, Close), mu for the fields, in short steps only, and rmMu by
//     Reclaim's removals and by what lists the segments to act on them (a
//     recovery, TruncateFront, Close), with nothing taken under it. So a
//     Sync whose fdatasync returns acknowledges at once, never behind a
//     batch being encoded and written or a directory being listed, and a
//     Write never waits for zeros being written above it or for an unlink
//     (which can wait milliseconds on the file system's journal). A failed
//     fdatasync marks the journal broken under mu at once (from then on no
//     Sync acknowledges anything) and cuts the files back once it holds
//     wmu, after any batch being written, which the cut removes too.
//     Code: Journal.lockAll, Journal.claimFilesLocked, Journal.wmu, Journal.mu,
//     Journal.rmMu, Journal.recoverFailedSync, Journal.Reclaim.
//     Tests: TestSyncAcknowledgesDuringWrite, TestSyncFailureDuringWrite,
//     TestSyncRacingRecovery, TestWritesBelowZerosBeingWrittenGoOn,
//     TestReclaimUnlinksOutsideTheWriteLock.
//  8. SyncParked runs the commit's fdatasync through an io_uring
//     (internal/uring; the pre-writer's and the marker's always go through a
//     second ring): the waiting goroutine parks instead of holding a
//     scheduler processor in the system call, so with GOMAXPROCS=2 the
//     other processor is not the only one left for a hundred writers. A
//     completion is acknowledged exactly as a direct fdatasync's return
//     is; where the kernel refuses io_uring (or under Options.DirectSync)
//     both rings are nil and every sync runs directly. Sync stays direct:
//     for a lone committer one thread wake-up beats two. Poll lets busy
//     callers hand a completion to its waiter before the scheduler would.
//     Code: Journal.SyncParked, Journal.rings, openRing, syncFile, Journal.Poll.
//     Tests: TestRingsFollowOptions, TestWriteThenSync, TestSyncFailureCutsBack,
//     uring.TestWaiterParksInsteadOfHoldingAProcessor,
//     uring.TestPollWakesTheWaiterWithoutTheReaper.
//  9. Reclaim frees space by removing whole sealed segments, oldest first,
//     never by tidwall/wal's TruncateFront (which rewrites a segment and
//     fsyncs under the lock writes take).
//     Code: Journal.Reclaim, Journal.removeSegments.
//     Tests: TestReclaimFreesWholeSegmentsOnly, TestReclaimUnlinksOutsideTheWriteLock.
//  10. Open cuts only a torn tail of the last segment, and JudgeTail is the
//     one rule that decides it, for Open and for every kpjournal command.
//     Torn means what an interrupted append leaves: from the damaged entry
//     (inside an entry; from an entry boundary it is pre-written space, see
//     above) to the end of the file, nothing but zeros, or one entry whose length
//     is within the frame sizes a record can have, whose written bytes are
//     a consistent frame header, and which runs past the end of the file or
//     ends inside the trailing zeros. A length beyond the largest frame, a
//     header no encoder wrote, a whole non-zero entry failing its checksum,
//     non-zero bytes after the damaged entry, or a whole valid frame
//     anywhere after it (every byte offset is tried, so a damaged length
//     prefix cannot hide good records) are corruption. So is damage at or
//     below the acknowledged floor. The damaged segment is copied to the
//     quarantine directory first, and the cut is reported as a TailCut.
//     Damage anywhere else fails with a *CorruptError naming the journal
//     index, the segment and the byte offset.
//     Code: JudgeTail, framePrefixConsistent, validFrameAfter, Journal.repairTail.
//     Tests: TestJudgeTailShapes, TestTornTailEveryOffset, TestZeroFilledTail,
//     TestFlippedByteInLastSegment, TestFlippedByteInSealedSegment,
//     TestOpenRefusesDamageAtTheFloor.
//  11. The acknowledged floor: Options.Floor (the store's newest checkpoint
//     index) raised by the ACKNOWLEDGED marker, which the journal writes at
//     MarkServed, at Close and, in the background right after it returns,
//     at the first sync of each new segment (off the commit path: the
//     marker is evidence, and it only ever names records a sync made
//     durable; a crash in between leaves it one segment lower). Open
//     refuses a journal that ends below the floor, naming the missing range
//     (an emptied or shortened segment, a deleted tail).
//     Code: LoadFloor, CheckFloor, Floor.Raise, floorMarker.raise, Journal.MarkServed,
//     Journal.closeFloor, Journal.sync.
//     Tests: TestOpenRefusesDamageAtTheFloor,
//     TestOpenRefusesMissingSegmentsWithoutCreatingAny,
//     TestNewSegmentMarkerOffCommitPath, TestCrashStatesOfPrewriting.
//  12. After a failed write or sync the tidwall/wal handle is discarded (its
//     memory is not rolled back) and the files are cut back to the last
//     acknowledged record before another append: records of a failed batch,
//     and of every batch written after the last good sync, never reappear
//     on the next open. A sync that was in flight across such a recovery
//     acknowledges nothing, even if its own fdatasync succeeded. A Read
//     after such a failure does the recovery itself rather than wait for
//     the next append (a raft follower reads before it writes again); a
//     Read never reopens a journal that did not fail, which would cut an
//     unsynced batch whose fdatasync is in flight.
//     Code: Journal.failLocked, Journal.recoverLocked, Journal.recoverAfter,
//     Journal.recoverFailedSync, Journal.epoch, Journal.Read.
//     Tests: TestRecoverDropsFailedBatch, TestSyncFailureCutsBack,
//     TestSyncRacingRecovery, TestSyncFailureDuringWrite,
//     TestFailedSyncNeverAcknowledgesLostPages, TestSealAcknowledgesWholeBatchesOnly,
//     TestReadAfterAFailedWriteReopens, TestReadNeverFailsASyncInFlight.
//  13. Decoding checks every length against Limits before slicing, so
//     metadata is validated before a document is touched and a corrupted
//     length cannot make the decoder allocate beyond the bounds.
//     Code: Frame.Parse, Decode, PlausibleFrame, maxFrameSize.
//     Tests: TestDecodeRejects, TestPlausibleFrameMatchesDecode, TestFrameParseInPlace,
//     FuzzScanner.
//  14. Every fsync the journal issues consults the hooks of its own
//     Options.Faults first (a test seam; nil in real use): the commit's,
//     the marker's and the pre-writer's fdatasyncs, and, through the
//     journal's disk.FS, its directory syncs, cuts, quarantine copies and
//     reserve; a journal never runs another journal's hooks.
//     Code: Options.Faults, Journal.fs, syncFile, disk.FS.SyncDir.
//     Tests: TestFaultsStayWithTheirJournal.
//  15. A raft log's operations (raftops.go, for replica/raftlog) keep every
//     rule above: TruncateBack is the cut-back of invariant 12 to a chosen
//     index, after removing the later segments newest first, each removal
//     durable before the next (a crash leaves a longer journal, never a
//     gap), refused with a *FloorError when it would drop a record at or
//     below the floor; Reset writes its RESET marker durably before it
//     removes a segment, so a crash leaves the old journal or the new one,
//     never part of each; Read serves acknowledged records only, under
//     wmu (invariant 7 and tidwall.go: tidwall/wal is never used
//     concurrently). With Options.ExternalFloor the journal never raises
//     the ACKNOWLEDGED marker itself (invariant 11): a raft log's
//     acknowledged suffix above the commit index may still be cut, so the
//     caller raises it (RaiseFloor) to the commit index.
//     Code: Journal.TruncateBack, Journal.removeSegmentsAfter, Journal.Reset, finishReset,
//     Journal.Read, Journal.RaiseFloor, Options.ExternalFloor, FloorError.
//     Tests: TestTruncateBackAndReset, TestTruncateBackCrashLeavesNoGap, TestResetMarkerFinishedByOpen,
//     TestExternalFloorNeverRaisedByTheJournal, TestRaftFrameFormat,
//     TestRaftFrameRoundTrip, TestRaftFrameRejects.
//
// # After a failed fsync
//
// A failed fdatasync does not say which pages reached the disk, and Linux
// may mark the pages it could not write clean: a later fdatasync of the
// same file then succeeds without those bytes ever being on disk
// (PostgreSQL's "fsyncgate", 2018). So the journal never retries a sync
// and never lets a later sync vouch for bytes an earlier one failed on.
// When the fdatasync of the tail segment, or the fsync of the directory
// holding a segment the batch created, fails:
//
//  1. every caller of the batch, and of every batch written after the last
//     good sync, gets a *StorageError wrapping the cause (the store answers
//     STORAGE); LastIndex stays at the last acknowledged record;
//  2. the tidwall/wal handle and the sync descriptor are dropped, and the
//     files are cut back to the end of the last acknowledged record
//     (segments the lost batches created are removed or emptied), the cut
//     fsynced file by file, then the directory;
//  3. the journal reopens and accepts the next batch at LastIndex()+1, so
//     the lost records' indexes are written afresh and need a new,
//     successful fdatasync of their own before they count; a Sync already
//     in flight across the cut acknowledges nothing (the recovery bumps an
//     epoch it checks).
//
// Pages of the acknowledged prefix that share a page with the cut bytes
// stay correct in the page cache and are written again by the next sync.
// If the cut or the reopen fails too, the journal stays broken and every
// Write retries the recovery first, answering STORAGE until it succeeds;
// nothing is acknowledged meanwhile. TestFailedSyncNeverAcknowledgesLostPages
// pins this on the bytes of the files.
//
// # Reserve
//
// Every mutation needs journal space, a DELETE and an EXPIRE included, so
// a journal that fills its disk would leave nobody a way to free space
// through the store, and a store whose leases lapsed meanwhile could not
// reopen (its restart purge journals EXPIREs). So the journal holds space
// back: a file RESERVE of Options.ReserveBytes (DefaultReserveBytes,
// 256 KiB, when 0; none when negative) written with real bytes, fsynced,
// beside the segments. tidwall/wal and ListSegments ignore it (its name
// is not an index).
//
//   - Open only looks at it (a refused open writes nothing); MarkServed
//     writes it when it is missing, short or sparse. A disk too full for it
//     is no error: the journal serves spent.
//   - A write or sync failing with ENOSPC or EDQUOT (IsNoSpace) fails its
//     batch as any failure does (the cut-back above), and gives the reserve
//     up: the file is removed and the directory synced, so the space is
//     free for what follows. An I/O error never spends it.
//   - While it is spent (OnReserve), CheckReserve refuses with a
//     *ReserveError wrapping ErrOnReserve; the store asks it before every
//     PUT, so only deletions and expiries spend the freed space. The
//     journal itself writes whatever it is given.
//   - CheckReserve writes the reserve again, ending that mode, once the
//     file system reports room for it twice over, so no timer polls the
//     disk and a restored reserve does not fill it right back.
//
// TestFullDiskSpendsReserve pins this; the store's tests fill a real tmpfs.
package journal
