// Package dispatch serves the state store's wire protocol
// (keeppeek.statestore.v1) on one authenticated session: it reads
// ClientMessages from a Conn, runs them against a statestore.Store with the
// session's principal, and sends every answer, watch snapshot, update and
// closure as ServerMessages on the same ordered connection. It is
// transport-agnostic: NewStreamConn puts it on any byte stream with
// package framing; an embedder with its own control channel implements
// Conn.
//
// # Invariants
//
//  1. Every request is answered exactly once, and its answer carries its
//     request_id: GetState and PutState with the entry, DeleteState with the
//     revision it produced, WatchState with the snapshot, UnwatchState with
//     ok, WatchStateAck with a StateWatchAckResult, any failure with a
//     StateStoreError naming the field or bound. Requests of one session run
//     concurrently (at most Options.MaxInFlight at once; when all are
//     running, the next frame is not read until one finishes), so answers
//     come in completion order; correlate by request_id.
//     Code: session.admit, session.execute, session.run, session.reply, session.read.
//     Tests: TestEveryRequestIsAnswered, TestReusedInFlightRequestID,
//     TestMaxInFlightStopsTheReading, TestRequestsAnsweredWhileAPutWaitsForSync, FuzzDispatch.
//  2. A watch's snapshot answer is sent before any of its updates, its
//     updates follow in commit order with watch_sequence 1, 2, 3, ..., and a
//     StateStoreWatchClosed is its last message: the store's watch registry
//     delivers them through this session's sink in that order, and the sink
//     queues them on the one outbound queue in the order received.
//     A commit's updates for a session with nothing queued in the registry
//     are queued by the committing goroutine itself (sink.OfferUpdates,
//     watch.DirectSink), so the writer is the one hand-off. An answer that
//     finds nothing queued and nobody sending is sent by its request's
//     goroutine holding the sending token, so it never overtakes a message
//     queued or being sent before it, and what queues meanwhile follows it.
//     Code: sink.Deliver, sink.OfferUpdates, outbox.run, outbox.accept, outbox.sent, outbox.offerUpdates, watch.Session.run.
//     Tests: TestScenario3WatchDuringWrites, TestStalledPeerIsBounded,
//     TestScenario2LeaseExpiryReachesEveryWatcher, TestSequenceDiagram, TestDirectReplyKeepsTheOrder.
//  3. Bounded memory against a stalled peer: the outbound queue holds at
//     most Options.MaxQueued messages plus a fixed margin. An answer waits
//     for room (so a peer that stops reading soon stops being read from); a
//     watch update that finds no room closes its watch with BUFFER_OVERFLOW,
//     exactly like the store's own per-watch bound; snapshots and closures
//     (at most a few per watch) use the margin.
//     Code: outbox.accept, outbox.offer, outbox.offerUpdates, outbox.force, Server.Serve.
//     Tests: TestOutboxBounds, TestOfferUpdatesTakesAPrefix, TestStalledPeerIsBounded, TestReplyWaitsForRoom.
//  4. The session's watches are removed when it ends, for whatever reason.
//     Code: Server.Serve, statestore.Session.Close.
//     Tests: TestDisconnectRemovesTheSessionsWatches.
//  5. A session ended for ErrEnded sends every message queued before the
//     end (the closures that say why its watches went) before its
//     connection closes, within a bound for a peer that does not read;
//     any other end drops what is queued.
//     Code: Server.Serve, ErrEnded, outbox.close.
//     Tests: TestEndedSessionSendsWhatWasQueued.
//  6. Without a store (NewUnavailable) every request is answered UNAVAILABLE
//     naming the cause, Capabilities lists nothing, and nothing is written.
//     Code: NewUnavailable, Server.unavailable, Server.Capabilities, session.admit.
//     Tests: TestUnavailableModeWithACorruptJournal, TestCapabilityOnlyWhileTheStoreIsOpen.
//  7. An idle session does not hold its connection: one that receives no
//     frame, runs no request, has nothing queued and no watch open for
//     Options.IdleTimeout ends (after at most twice it) with an
//     *IdleError, told to the peer when the Conn is a CauseCloser. A
//     session that watches is not idle; the watch bounds end a watcher
//     that stopped listening.
//     Code: session.watchIdle, session.idleNow, session.read, Server.Serve, CauseCloser.
//     Tests: TestIdleSessionsEnd, TestIdleUnavailableSessionsEnd, wstransport.TestIdleSessionIsClosedGoingAway.
//  8. Bounded memory across sessions: the bytes queued to clients over all
//     of a Server's sessions, the message being written included, stay
//     within Options.MaxQueuedBytes, plus at most one answer per session
//     and the snapshots and closures the watch bounds allow. Each session
//     draws up to its share (the bound over the sessions served, at least
//     64 KiB): a request reserves its answer's worst case before it runs,
//     so a session over its share is not read from until its queue drains,
//     and a watch update finding no room closes its watch with
//     BUFFER_OVERFLOW. A session holding nothing always gets one message
//     through, so stalled sessions never starve a bystander.
//     Code: byteBudget.acquire, byteBudget.tryAcquire, byteBudget.tryAcquireEach, byteBudget.waitUnder, byteBudget.leave, outbox.accept, outbox.offer, session.admit, session.read.
//     Tests: TestByteBudgetAccounting, TestByteBudgetShareFollowsTheSessions, TestStalledSessionsStayWithinTheBudget,
//     TestOfferUpdatesTakesAPrefix.
//  9. Encoded once per commit: on a Conn that is an EncodedSender (the
//     framing's, WebSocket's), a watch update is queued as the registry
//     delivered it and sent in its wire form, the part its commit's
//     updates share encoded once for every watch and session it reaches
//     (wire.AppendUpdate); the peer receives proto.Marshal's bytes of
//     UpdateMessage, and the outbox and the byte budget count exactly
//     those bytes, as for the built message. Any other Conn, and an
//     update that does not encode, get the built message.
//     Code: outbox.offerUpdate, outbox.updateQueued, outbox.deliver, encodedUpdate.AppendTo, wire.AppendCheckedUpdate, EncodedSender, Server.Serve.
//     Tests: TestEncodedUpdatesAreTheMessages, TestEncodedUpdatesDecodeAsTheMessages, wire.TestAppendUpdateIsProtoMarshal.
//  10. One write for what queued: on a Conn that is a BatchSender (the
//     framing's), the session's writer sends every message that queued up
//     while it was busy, in order, as one batch (at most 64 messages, and
//     it stops after the one reaching 64 KiB), so a commit's updates for a
//     session's watches cost one write and one wake-up of the peer; the
//     byte budget holds a batch's bytes until its write returns, and a
//     failed batch ends the session as a failed send does. Direct answers
//     (an idle session's) still go out alone, with no hand-off.
//     Code: outbox.takeLocked, outbox.deliverTaken, BatchSender, framing.Conn.SendBatch.
//     Tests: TestWriterBatchesWhatQueued, framing.TestSendBatchIsOneWriteOfTheFrames.
//  11. A message of a Conn that is a Releaser (wstransport's, which decodes
//     a PutState's document in place, in its read buffer) is released
//     once, when nothing refers to it any more: at once for a request
//     answered without running or a WatchState (its snapshot is the
//     store's entries), else once its answer's send returned (a Put's
//     answer carries the document it was sent), or when the answer was
//     not accepted; an answer dropped unsent leaves it to the collector.
//     Code: Releaser, session.done, session.read, session.execute, session.reply, outbox.accept, outbox.run.
//     Tests: wstransport.TestPipelinedPutsKeepTheirDocuments, client.TestConcurrentCallsKeepTheirOwnAnswers.
//
// # Bad input
//
// Bad input never panics, hangs, or touches the session's other watches.
// The documented answers:
//
//	input                                     answer
//	frame over the maximum frame size,        StateStoreResult{request_id 0, INVALID_ARGUMENT,
//	  or a malformed length prefix              field "frame"}, then the session ends (the
//	                                            stream cannot be resynchronised)
//	stream cut inside a frame                 the session ends
//	frame that is not a ClientMessage         StateStoreResult{request_id 0, INVALID_ARGUMENT,
//	                                            field "frame"}; the session goes on
//	ClientMessage with no request set (also   StateStoreResult{request_id 0, INVALID_ARGUMENT,
//	  a request kind this version lacks)        field "message"}
//	request_id 0                              StateStoreResult{request_id 0, INVALID_ARGUMENT,
//	                                            field "request_id"}; nothing runs
//	request_id equal to one still in flight   StateStoreResult{request_id 0, INVALID_ARGUMENT,
//	  (its answer not yet queued)               field "request_id", the id in the message};
//	                                            nothing runs, the first request is unaffected
//
// request_id 0 is reserved for answers that cannot be attributed to a
// request. Client messages carry no enum fields, so unknown enum values can
// only reach a client: proto3 enums are open, and a client keeps the number.
// An id may be reused once its answer was queued.
//
// # What runs where
//
// A session has these goroutines, and no others:
//
//   - the reader: one goroutine at a time receives frames and checks each
//     envelope (request kind, request_id, a free slot). It answers what
//     fails the checks itself, through the outbound queue: it never writes
//     to the connection, so a peer that writes before it reads (over an
//     unbuffered pipe, say) cannot stall the reading behind its own unread
//     answer.
//   - the request's goroutine: a request that passed the checks runs on the
//     goroutine that read it, which first hands the reading to another
//     goroutine. So a request starts without waiting for a goroutine to be
//     scheduled (the reader's hand-off happens beside the request, not
//     before it), and the next frame is still read at once: an ack, a get or an unwatch
//     is answered while a put of the same session waits for its fdatasync,
//     and a reused request_id is refused while the first is in flight.
//     Every kind runs this way, the fast ones (get, ack, unwatch) too:
//     running one on the reader would save the hand-off but make the
//     reader send its answer, which the previous point rules out.
//   - spares: a goroutine whose request is answered parks, two per
//     session at most, and takes the reading over at a later hand-off; a
//     fresh goroutine per request would grow its stack to the store's
//     depth each time. Spares end with the session.
//   - the writer: sends what is queued, in order. Watch updates are queued
//     by the registry's delivery goroutine, or, when the registry has
//     nothing of the session's queued, by the committing goroutine. An answer that finds the
//     queue empty and nobody sending is sent by its request's goroutine,
//     saving a hand-off; the sending token keeps one sender at a time, so
//     answers, snapshots, updates and closures still leave in the order
//     they were queued.
//   - Serve's own goroutine waits for the reading to end, then ends the
//     session; it runs no request, so a failed connection ends the session
//     even while a request is still running.
package dispatch
