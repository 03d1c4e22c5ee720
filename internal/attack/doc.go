// Package attack is the hostile-client suite of issue 31, kept so that
// what the attack run found stays fixed and what held stays held: each
// attack runs over loopback against a store served as kpstate serve serves
// it (Start: the Host allow-list first, the inspector's ws handler with a
// PrincipalTable, [server]'s dispatch and transport options, every
// connection under a ConnBudget), asserts the exact answers it gets, and
// meanwhile a bystander principal's session (client/, as any remote user)
// does compare-and-set on its own key in a loop, each answer within
// LivenessBound during and after the attack: no attack may stall anyone
// else. The bound is a liveness bound (a stall shows as seconds), not a
// speed figure.
//
// The server's principals: an administrator (Admin), two ordinary users
// (Alice, Bob: each owns user/<id>), a service principal without
// administrator rights (Service), and the Bystander.
//
// Sizes: Small (the default, and CI's: well under a minute on two cores
// under the race detector) and Full (issue 31's: 2,000 idle connections,
// 100 stalled sessions asking for a 16 KB document, 1,000 idle sessions
// measured for their memory), chosen by KP_ATTACK_SCALE=full or the
// tests' -attack.scale flag:
//
//	KP_ATTACK_SCALE=full go test -count=1 -v ./internal/attack
//
// An attack's figures (connections held, closing times, bytes queued at
// most, the resident set at the full scale) are in Result and in the
// tests' log. An attack whose only failure is the liveness bound is tried
// once more on a fresh server by the tests: two shared cores under the race
// detector, beside other packages' tests, can hold one answer or one
// fdatasync (LivenessError counts those) for a second now and then, while
// an attack that stalls the bystander does so every time.
//
// # Invariants
//
//  1. No connection is held for free: every unauthenticated connection that
//     made one request and idles is closed by the idle timeout, not before
//     it, and the connection budget is back to the bystander's one.
//     Code: IdleConnections, idleConns, Start.
//     Tests: TestIdleConnectionsAreClosed.
//  2. Over the connection cap a connection is answered 503 naming
//     server.max_connections and its value, and only once the cap is
//     reached; one principal's session over its cap is 429 naming "sessions
//     per principal", the principal and the value, while another principal
//     still gets a session.
//     Code: Caps, caps, ConnBoundName.
//     Tests: TestConnectionAndSessionCaps.
//  3. Sessions that ask for 16 KB documents and never read cannot make the
//     server queue more than its MaxQueuedBytes plus one answer per session
//     (the dispatcher's QueuedBytes, sampled throughout; the attack must
//     fill at least half the budget or it proves nothing), and a stalled
//     session's watch is closed BUFFER_OVERFLOW. At the full scale
//     (without the race detector) the resident set's peak stays within
//     the budget and 32 MB over what it was before the attack.
//     Code: StalledSessions, stalledSessions, Config.SendBuffer,
//     sendBufferListener.Accept.
//     Tests: TestStalledSessionsStayInBudget.
//  4. One principal's sessions get its watch quota (a quarter of the
//     store's) and then WATCH_LIMIT naming "watches per principal" and the
//     principal; an administrator and another user still get a watch.
//     Code: WatchQuota, watchQuota.
//     Tests: TestWatchQuotaPerPrincipal.
//  5. Authenticated sessions that send nothing end after the session idle
//     timeout, not before it, closed 1001 naming it; a frame header
//     announcing 2^62 bytes and then silence ends its session once the
//     message timeout has passed; the same header followed by more bytes
//     than the message bound is closed 1009.
//     Code: IdleSessions, idleSessions, RawConn.AwaitClosed, FrameHeader.
//     Tests: TestIdleSessionsEnd.
//  6. The 29 namespace spelling tricks (Tricks) are each refused
//     PERMISSION_DENIED or INVALID_ARGUMENT naming the namespace or the key,
//     and nothing is written (an administrator's Get, the store's entry
//     count and namespace list); another user's name in fields the protocol
//     does not have changes no entry's owner from the authenticated
//     principal; another user's existing and missing keys are refused alike
//     (Get, Delete, Watch).
//     Code: Namespaces, namespaces, Tricks, spoofedPut, ownerSpoofing,
//     probing.
//     Tests: TestNamespaceTricks, TestTwentyNineTricks.
//  7. Malformed input gets package dispatch's documented answer and the
//     session goes on: garbage, a truncated message and a text message are
//     INVALID_ARGUMENT "frame", a message with no request "message",
//     request_id 0 "request_id"; unknown fields are ignored; a request_id
//     reused while its first request is in flight is refused naming the id
//     and the first is answered; a message over the bound is closed 1009.
//     Code: Malformed, malformed, reusedRequestID.
//     Tests: TestMalformedInput.
//  8. Every issue 31 payload (testdoc.Issue31Payloads, the same table
//     package schema's test holds) is refused over the wire SCHEMA_INVALID
//     with its JSON path as the field and what was found in the message, and
//     none is stored.
//     Code: Guard, guard.
//     Tests: TestContentGuardOverTheWire.
//  9. A Host header that is not loopback or allowed is 421 whatever the
//     token (a name that only looks loopback too); a foreign Origin is 403
//     with a valid token; a wrong, unknown or missing token is 401; no
//     refusal echoes the token or opens a session.
//     Code: Handshakes, handshakes, RawConn.Upgrade.
//     Tests: TestHandshakeRefusals.
//  10. A watch whose snapshot is over 64 entries or 65,536 encoded bytes is
//     WATCH_TOO_BROAD naming which bound, a narrower prefix is served, and a
//     session's watch over its 16 is WATCH_LIMIT naming "watches per
//     session".
//     Code: WatchBounds, watchBounds.
//     Tests: TestWatchAndSnapshotBounds.
//  11. Run fails an attack whose bystander waited over LivenessBound (the
//     awaited call included) or failed, during the attack or in the answers
//     after it, whatever the attack itself reported.
//     Code: Run, BystanderSession.Window, BystanderSession.Await,
//     LivenessError.
//     Tests: TestRunFailsAStalledBystander, TestRunReportsTheAttacksError,
//     TestEveryAttackHasItsTest.
package attack
