// Package wstransport serves the state store's wire protocol
// (keeppeek.statestore.v1, package dispatch) over WebSocket, so that a
// browser can reach the store, and dials it from Go.
//
// Framing: every ClientMessage and every ServerMessage is exactly one
// binary WebSocket message holding the encoded protobuf message. The
// WebSocket message boundary is the frame, so there is no length prefix
// (package framing is for byte streams only). A text message is not a
// ClientMessage: it is answered StateStoreResult{request_id 0,
// INVALID_ARGUMENT, field "frame"} and the session goes on, exactly like a
// frame that does not decode.
//
// The origin check follows the browser's same-origin rule: a request
// without an Origin header (a non-browser client) or whose Origin host
// equals the request's Host passes; any other origin must match one of
// Options.OriginPatterns (path.Match patterns over the origin's host, or
// host:port). Browsers always send Origin on a WebSocket handshake, so a
// page of another site cannot ride on a user's credentials.
//
// # Invariants
//
//  1. One WebSocket connection is one dispatcher session: its watches are
//     removed when the connection ends, for whatever reason (the peer
//     closed it, the network dropped it, a write missed its deadline, the
//     Handler was closed).
//     Code: Handler.ServeHTTP, Handler.Close, msgConn.Close, dispatch.Server.Serve.
//     Tests: TestSessionEndRemovesItsWatches, TestStalledReaderIsDisconnectedByTheWriteTimeout,
//     TestOversizedMessageClosesTheConnectionWith1009.
//  2. Nothing is upgraded before the request passed the origin check (403
//     otherwise) and the Authenticator (401 otherwise, with the
//     Authenticator's reason): a refused request never opens a session.
//     Code: Handler.ServeHTTP, checkOrigin, TokenAuthenticator.Authenticate, PrincipalTable.Authenticate.
//     Tests: TestRefusedBeforeTheUpgrade, TestEndSessionsEndsOnlyThatPrincipal.
//  3. A client message over Options.MaxMessageBytes is never read whole:
//     the connection is closed with status 1009 (message too big) naming
//     the bound, and the session ends. A message whose first frame header
//     came must arrive whole within Options.MessageTimeout, or the
//     connection is closed and the session ends with a
//     MessageTimeoutError: a header announcing 2^62 bytes and then
//     silence holds nothing.
//     Code: Handler.ServeHTTP, msgConn.Recv, msgConn.read.
//     Tests: TestOversizedMessageClosesTheConnectionWith1009, TestAMessageThatStopsMidwayEndsTheSession.
//  4. Memory per connection is bounded against a slow or stalled peer.
//     The dispatcher's outbound queue is bounded (dispatch.Options.MaxQueued)
//     and each write has Options.WriteTimeout: a peer that stops reading is
//     closed when a write misses its deadline, and a peer that reads but
//     stops acknowledging loses its watches to the store's own bounds
//     (BUFFER_OVERFLOW at the unacknowledged-update bound, ACK_TIMEOUT at
//     the ack deadline), reported in StateStoreWatchClosed. Nothing is
//     buffered without limit.
//     Code: msgConn.Send, Options.WriteTimeout, dispatch.outbox.offer.
//     Tests: TestStalledReaderIsDisconnectedByTheWriteTimeout,
//     TestNonAcknowledgingClientLosesItsWatchToBufferOverflow,
//     TestUnacknowledgedUpdateClosesTheWatchWithAckTimeout, dispatch.TestOutboxBounds.
//  5. A PrincipalTable holds no token, only its SHA-256 (TokenHash), and no
//     refusal echoes the token it was given. Replace swaps the whole table
//     at once or, refusing an entry (no ID, a duplicate ID or hash, an
//     unset hash), changes nothing; a request authenticates against the
//     old table or the new one, never a mix.
//     Code: PrincipalTable.Replace, PrincipalTable.Authenticate, HashToken, ParseTokenHash.
//     Tests: TestPrincipalTable, TestPrincipalTableReplaceWhileAuthenticating, TestParseTokenHash.
//  6. After EndSessions(id) returns, with id's credentials already
//     withdrawn from the Authenticator, no session of id is left: the ones
//     being served end (status 1008, after the messages queued for them,
//     such as the AUTHORIZATION_LOST closures of a SetPrincipal made just
//     before, are sent), and a handshake authenticated before the call
//     authenticates again before its first request. Likewise after
//     Reauthenticate no handshake authenticated before it serves with a
//     principal the Authenticator no longer gives.
//     Code: Handler.EndSessions, Handler.Reauthenticate, Handler.recheck, msgConn.Recv, msgConn.Close, dispatch.ErrEnded.
//     Tests: TestEndSessionsEndsOnlyThatPrincipal, TestAHandshakeInFlightDuringAReloadAuthenticatesAgain,
//     dispatch.TestEndedSessionSendsWhatWasQueued.
//  7. No connection is held for free. A ConnBudget caps the connections of
//     the listeners it wraps, plain and upgraded alike, counted from Accept
//     to Close; one over the cap is answered 503 naming the bound (closed
//     under TLS) and never reaches the HTTP server. The cap a server takes
//     from ConnectionsForDescriptors leaves a reserve of descriptors free
//     whatever the clients do, so a flood cannot make the store's files fail
//     to open. A principal holding Options.MaxSessionsPerPrincipal sessions
//     is refused 429 naming the bound before the upgrade.
//     Code: ConnBudget.Listen, budgetListener.Accept, budgetConn.Close, ConnectionsForDescriptors, Handler.begin.
//     Tests: TestConnBudgetRefusesOverTheCap, TestConnectionsForDescriptorsKeepsTheReserve,
//     TestSessionsPerPrincipalAnswered429, TestSessionLimitBodyNamesTheBound.
//  8. A request whose Host header is neither a loopback name nor on a
//     HostAllowList is answered 421 before the handler behind it runs, so
//     a page that DNS rebinding pointed at the server cannot try a token.
//     A name that only looks loopback (127.0.0.1.example.net) is not.
//     Code: HostAllowList.Allows, HostAllowList.Handler, NewHostAllowList.
//     Tests: TestHostAllowList, TestHostRefusedBeforeAuthentication.
//  9. A client's PutState is decoded without copying its document: the
//     server side's Recv decodes a ClientMessage that is one put_state,
//     each field at most once with its own wire type and its strings
//     UTF-8, to what proto.Unmarshal gives, its document referring to the
//     read buffer; anything else goes to proto.Unmarshal as before. The
//     buffer is read into again only after the dispatcher released the
//     message (dispatch.Releaser), once the request ran and its answer,
//     which carries that document, was sent.
//     Code: decodePutInPlace, heldMessages.decode, heldMessages.release, msgConn.Recv, msgConn.Release, dispatch.Releaser.
//     Tests: TestPutInPlaceDecodesAsUnmarshal, TestPutInPlaceFieldNumbers, FuzzPutInPlace, TestPipelinedPutsKeepTheirDocuments.
package wstransport
