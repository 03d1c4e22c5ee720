// Package watch is the store's watch registry: it fans committed mutations
// out to the watches that match them, numbers each watch's updates, holds
// them until they are acknowledged, and closes watches that break a bound.
//
// The store owns the commit order. It calls Add (which registers a watch and
// enqueues its Snapshot) and Publish (which enqueues the updates of a
// committed batch) while holding its commit-order lock, so the registry sees
// registrations and mutations in one total order. Neither call blocks on a
// session's Sink: both only append to in-memory queues, and one delivery
// goroutine per session drains its queue into the Sink. A Sink that is a
// DirectSink (the wire dispatcher's, whose own writer goroutine sends what
// it queues) gets a commit's updates from Publish itself, in one call per
// session, when nothing of the session's is queued or being delivered:
// one goroutine hand-off per session per commit instead of two. An embedder without
// a control channel of its own can use [ChanSink], a bounded buffered
// channel.
//
// # Invariants
//
//  1. No gap: a watch's Snapshot is the first message enqueued for it, and
//     every event published after Add that matches the watch (same namespace,
//     key with the watch's prefix) becomes exactly one Update after it.
//     Events published before Add are in the snapshot the store captured.
//     Code: Registry.Add, Registry.Publish, Session.push.
//     Tests: TestNoGapUnderConcurrentWrites, TestSequencesPerWatch, TestMatching, TestOtherPrefixGetsNothing.
//  2. Order: a watch's Updates carry watch_sequence 1, 2, 3, ... with no
//     hole, in commit order, and reach the Sink in that order. Messages of
//     one session reach its Sink in enqueue order, one call at a time:
//     from its delivery goroutine, or, for a DirectSink, from Publish
//     (OfferUpdates) only while the session has nothing queued or in
//     delivery, Drain not asked for.
//     Code: Registry.Publish, Registry.offerLocked, Session.idleLocked, Session.run.
//     Tests: TestSequencesPerWatch, TestNoGapUnderConcurrentWrites, TestConcurrentChurn,
//     TestDirectSinks, TestDirectSinkTakesACommitAtOnce, TestDirectSinkNothingAfterDrain.
//  3. A Closed message is the last message a watch ever produces: once a
//     watch is closed (overflow, ack timeout, authorization lost, snapshot
//     delivery failure, store closed, restored, unavailable) nothing more is delivered
//     for it, its queued updates are dropped, and its slot no longer counts
//     against the limits. A Snapshot still queued is delivered (before the
//     Closed): it answers the client's WatchState request. Remove ends a
//     watch silently (the client asked for it); Session.Close drops
//     everything (nobody is listening).
//     An update a DirectSink refuses closes its watch with BufferOverflow,
//     as one Deliver refuses does.
//     Code: Registry.closeLocked, Registry.unindexLocked, Registry.Remove, Registry.offerLocked, Session.Close, Session.run.
//     Tests: TestBufferOverflowBoundary, TestCloseKeepsQueuedSnapshot, TestCloseDropsQueued,
//     TestSinkFailureOnSnapshot, TestSinkFailureOnUpdate, TestLimits, TestSessionClose, TestConcurrentChurn,
//     TestDirectSinkRefusal.
//  4. Bounded memory: a watch holds at most Limits.MaxUnacked updates that
//     are enqueued but not acknowledged, and at most that many in its
//     session's queue; the next one closes it with BufferOverflow. So a
//     session's queue holds at most MaxUnacked updates + 1 Snapshot + 1
//     Closed per watch.
//     Code: Registry.Publish, watch.queued, Registry.Ack, Registry.offerLocked.
//     Tests: TestBufferOverflowBoundary, TestAckFreesBuffer, TestQueueBoundedDespiteEarlyAcks, TestOlderAckKeepsBufferFreed,
//     TestDirectSinkFreesTheQueue.
//  5. Ack deadline: a watch whose oldest unacknowledged update was enqueued
//     at least Limits.AckDeadline ago (by the injected clock) is closed with
//     AckTimeout. One timer serves the whole registry.
//     Code: Registry.timerLoop, Registry.expire, Registry.deadline.
//     Tests: TestAckDeadline, TestAckDeadlineFollowsOldestUnacked, TestFullyAckedNeverTimesOut.
//  6. No leaks: Session.Close stops the session's goroutine; Registry.Stop
//     delivers StoreClosed, then stops every goroutine and the timer;
//     Session.Drain delivers what is queued, then stops the session's
//     goroutine.
//     Code: Session.Close, Session.run, Session.Drain, Registry.Stop.
//     Tests: TestSessionClose, TestStop, TestDrainDeliversWhatIsQueued.
//  7. Fair shares: a principal's watches over all its sessions number at
//     most Limits.MaxPerPrincipal (default a quarter of MaxWatches), so
//     one principal cannot take every watch of the store; the refusal is a
//     *LimitError naming BoundWatchesPerPrincipal and the principal, and
//     a watch that ends (however) gives its place back.
//     Code: Registry.Add, Registry.unindexLocked, Limits.withDefaults.
//     Tests: TestLimits, TestLimitsDefaults, statestore.TestWatchPerPrincipalQuota.
//  8. Encoded once per commit: every Update one published event produces
//     carries the same Memo, and no Update of another event carries it, so
//     what the event's updates have in common is encoded at most once
//     however many watches it reaches (the wire layer fills the Memo).
//     Code: Registry.Publish, Memo.Encoded.
//     Tests: TestUpdatesOfOneEventShareAMemo, wire.TestMemoEncodesOncePerEvent.
package watch
