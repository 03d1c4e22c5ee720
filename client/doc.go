// Package client is the typed Go client of a state-store server (kpstate
// serve, or an embedder serving ops/inspector or wire/wstransport): the
// store's Get, Put, Delete and Watch over the wire protocol
// (keeppeek.statestore.v1 over WebSocket), with the store's own types and
// errors, so code written against the library in process works unchanged
// against a server.
//
//	c, err := client.Dial(ctx, client.Config{Endpoints: []string{"wss://state.example:8765"}, Token: token})
//	...
//	e, err := c.Put(ctx, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
//		Schema: schema.MediaIntentV1, Document: doc, Expect: statestore.CreateOnly})
//	var se *statestore.Error
//	if errors.As(err, &se) && se.Code == statestore.Conflict { ... se.CurrentRevision ... }
//
// One Client is one WebSocket connection, one session on the server, run
// as the principal its token authenticates: the server decides every
// authorization. Requests may be concurrent; they are pipelined on the
// connection. When the connection is lost the client reconnects in the
// background (exponential backoff with full jitter, round-robin over the
// endpoints); calls made meanwhile wait for it up to their deadline. A
// write whose connection was lost before its answer came has an unknown
// outcome: it fails UNAVAILABLE (field "connection") and may have been
// applied.
//
// A Watch follows one prefix by the specification's rules and hides the
// re-watching: Next returns the snapshot, the updates in order, and an
// EventResnapshot whenever the watch had to be replaced. Linked is the raw
// watch protocol for the worker kit (worker/reconcile, worker/lease,
// worker/watchcache), which follow their own watches.
//
// # Invariants
//
//  1. Every answer reaches the call that sent its request_id, and only it:
//     request_ids are the client's own counter, never reused; requests are
//     pipelined, so answers may come in any order. A call waits up to its
//     context's deadline and RequestTimeout; an answer arriving after that
//     is dropped, never given to another call. A write that cannot finish
//     (a server that stopped reading) holds its caller for RequestTimeout
//     at most, then closes the connection.
//     Code: Client.request, conn.register, conn.call, conn.abandon, conn.route, conn.take, conn.write, wsconn.Deadline.
//     Tests: TestEveryVerb, TestConcurrentRequestsArePipelined, TestConcurrentCallsKeepTheirOwnAnswers, TestRequestTimeoutBoundsACall,
//     TestRequestTimeoutBoundsAStuckWrite.
//  2. A refusal is the store's own error: a StateStoreError becomes a
//     *statestore.Error with the same code, field, message and current
//     revision, so errors.Is, errors.As and statestore.CodeOf work as in
//     process; authorization is the server's decision for the token's
//     principal.
//     Code: reply.result, wirestore.StoreError.
//     Tests: TestEveryErrorCode, TestPrincipalIsTheServersDecision.
//  3. A lost connection fails every call in flight on it UNAVAILABLE
//     (field "connection", the outcome of a write unknown), after which the
//     client reconnects with backoff and jitter, trying the endpoints
//     round-robin from the one after the failed one; a call made while
//     disconnected waits for the reconnection up to its deadline, then
//     fails UNAVAILABLE. A refused handshake while reconnecting is logged
//     and retried at MaxBackoff. A connection that silently stops carrying
//     anything is noticed by an unanswered ping. A request the node
//     answers UNAVAILABLE (a cluster node without a leader, or behind and
//     not catching up) returns that answer and, with several endpoints,
//     moves the client: no new call goes to that connection, which ends
//     once the calls in flight on it have their answers (RequestTimeout at
//     most), and the client reconnects from the next endpoint.
//     Code: conn.end, conn.ping, Client.detach, Client.lost, Client.reconnect, backoff.next, Client.acquire, Client.install,
//     conn.retire, conn.retireOn, conn.endIfRetired.
//     Tests: TestInFlightCallsFailWhenTheConnectionDrops, TestCallsWaitForTheReconnection, TestBackoffDoublesWithFullJitter,
//     TestReconnectAfterTheServerWentAway, TestReconnectTriesTheNextEndpoint, TestRefusedReconnectIsRetried,
//     TestSilentNetworkDropIsDetected, TestUnavailableAnswerMovesToAnotherEndpoint.
//  4. A Watch delivers its snapshot first, then updates strictly in
//     watch_sequence order, each once. A sequence gap, a closure by the
//     server for any reason, or a lost connection replaces the watch (a
//     new watch_id, the old one unwatched if the server may still hold
//     it) and delivers the new snapshot as an EventResnapshot naming the
//     cause; nothing of the replaced watch is delivered after it.
//     A closure UNAVAILABLE (a cluster node that lost its leader, which
//     refuses writes, linearizable reads and new watches) also moves the
//     client: with several endpoints it drops that connection and
//     reconnects from the next endpoint, so every watch re-snapshots on
//     another node, each one's cause naming UNAVAILABLE whichever closure
//     was read first; with one it stays and re-watches there.
//     Code: Client.Watch, Watch.Next, Watch.replace, follow.update, follow.closed, follow.lost, conn.leave.
//     Tests: TestWatchFollowsUpdatesInOrder, TestSequenceGapResnapshots, TestReconnectAfterTheServerWentAway,
//     TestStalledReaderIsClosedAndResnapshots, TestUnavailableClosureMovesToAnotherEndpoint.
//  5. An update is acknowledged only when Next is called again, so a
//     reader that stops calling Next is closed by the server
//     (BUFFER_OVERFLOW, ACK_TIMEOUT) and then re-snapshots; and a Watch
//     holds at most Config.WatchBuffer updates Next has not returned,
//     re-snapshotting past that, so memory stays bounded whatever the
//     server sends.
//     Code: Watch.Next, follow.update.
//     Tests: TestStalledReaderIsClosedAndResnapshots, TestUnacknowledgedUpdateTimesOutAndResnapshots,
//     TestWatchFollowsUpdatesInOrder, TestClientBufferIsBounded, TestDefaultWatchBufferIsTheStoresBound.
//  6. A Linked delivers every message of its watches to its Link in
//     arrival order from one goroutine of its own; the Link hears
//     Disconnected after the last message of a lost connection and
//     Reconnected once a new one is up, before any of its messages; a
//     refused Deliver closes that watch as the store's registry would.
//     Code: Client.Link, Linked.run, Linked.deliver, Client.install, Client.lost, linkRoute.snapshot.
//     Tests: TestLinkedDeliversInOrderAndHearsTheConnection, TestReconcilerOverTheWireSurvivesDroppedSessions,
//     TestLinkedRefusedDeliveryClosesTheWatch, TestLinkedDeliverMayCallBack.
//  7. Bad input changes nothing: a Config error names its field and
//     nothing is dialled; a negative TTL is TTL_INVALID before anything is
//     sent. A refused handshake is a *HandshakeError naming the endpoint,
//     the status and the server's reason, and Dial does not retry a 401 or
//     403; an unreachable, untrusted or silent endpoint (no answer within
//     DialTimeout) is a *DialError naming it; a refused Info is an
//     *InfoError with the status and the reason.
//     Code: Config.check, parseEndpoint, Dial, Client.dial, readReason, Client.Info, wirestore.PutState.
//     Tests: TestBadConfigNamesTheField, TestWrongTokenIsAHandshakeError, TestTLS, TestReconnectTriesTheNextEndpoint,
//     TestEveryErrorCode, TestInfoRefusal, TestForbiddenHandshakeIsNotRetried, TestDialTimeoutBoundsAHandshake.
//  8. Close ends the session with a normal closure (the server removes its
//     watches), makes every call in flight and every later call return
//     ErrClosed, and returns once the client's goroutines have ended.
//     Code: Client.Close, Watch.Close, Linked.Close, conn.end.
//     Tests: TestCloseEndsTheSession, TestCloseLeavesNoGoroutine.
package client
