package wstransport_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

func TestRefusedBeforeTheUpgrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{transport: wstransport.Options{OriginPatterns: []string{"app.example.com"}}})
	cases := []struct {
		name   string
		header http.Header
		query  string
		want   int // HTTP status; 0 = accepted
	}{
		{"no credentials", nil, "", http.StatusUnauthorized},
		{"wrong bearer token", bearer("nope"), "", http.StatusUnauthorized},
		{"not a bearer scheme", http.Header{"Authorization": {"Basic " + token}}, "", http.StatusUnauthorized},
		{"wrong query token", nil, "?access_token=nope", http.StatusUnauthorized},
		{"foreign origin, right token", http.Header{"Authorization": {"Bearer " + token}, "Origin": {"https://evil.example.net"}}, "", http.StatusForbidden},
		{"foreign origin, no token", http.Header{"Origin": {"https://evil.example.net"}}, "", http.StatusForbidden},
		{"bearer token", bearer(token), "", 0},
		{"query token (browsers)", nil, "?access_token=" + token, 0},
		{"allowed origin", http.Header{"Authorization": {"Bearer " + token}, "Origin": {"https://app.example.com"}}, "", 0},
		{"same origin", http.Header{"Origin": {e.srv.URL}}, "?access_token=" + token, 0},
	}
	// The cases run one by one: they share e, whose session count and
	// Ended channel each case reads as its own.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := wstransport.Dial(ctx, e.url+c.query, wstransport.DialOptions{Header: c.header})
			if c.want == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				conn.Close()
				if err := e.waitEnded(); err != nil {
					t.Errorf("session ended with %v, want a clean close", err)
				}
				return
			}
			var de *wstransport.DialError
			if !errors.As(err, &de) || de.Status != c.want {
				t.Fatalf("Dial = %v, want HTTP %d", err, c.want)
			}
			if n := e.h.Sessions(); n != 0 {
				t.Errorf("%d sessions after a refusal", n)
			}
			select {
			case err := <-e.ended:
				t.Errorf("a refused request ran a session (ended with %v)", err)
			default:
			}
		})
	}
}

func TestNewHandlerNamesTheBadOption(t *testing.T) {
	t.Parallel()
	auth := wstransport.TokenAuthenticator{Token: token, Principal: admin}
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := dispatch.New(s, dispatch.Options{})
	cases := []struct {
		field string
		opts  wstransport.Options
	}{
		{"Authenticator", wstransport.Options{}},
		{"MaxMessageBytes", wstransport.Options{Authenticator: auth, MaxMessageBytes: -1}},
		{"WriteTimeout", wstransport.Options{Authenticator: auth, WriteTimeout: -time.Second}},
		{"OriginPatterns", wstransport.Options{Authenticator: auth, OriginPatterns: []string{"[bad"}}},
	}
	for _, c := range cases {
		_, err := wstransport.NewHandler(srv, c.opts)
		var oe *wstransport.OptionError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("NewHandler(%+v) = %v, want an OptionError naming %s", c.opts, err, c.field)
		}
	}
}

func TestRequestsAndOrderedUpdatesOverWebSocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.dial()
	const ns = "service/transcoder-a"
	snap := watch(t, c, 1, "intents", ns)
	if len(snap.GetEntries()) != 0 {
		t.Fatalf("snapshot of an empty namespace holds %v", snap.GetEntries())
	}
	doc := testdoc.MediaIntent(300, 1)
	zero := uint64(0)
	send(t, c, &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{
		RequestId: 2, Namespace: ns, Key: "k", Schema: schema.MediaIntentV1, Document: doc, ExpectedRevision: &zero}}})
	// The answer and the update may come in either order: correlate.
	var entry *pb.StateEntry
	var update *pb.StateStoreWatchUpdate
	for entry == nil || update == nil {
		m := recv(t, c)
		switch {
		case m.GetResult().GetRequestId() == 2:
			entry = m.GetResult().GetEntry()
			if entry == nil {
				t.Fatalf("create-only put answered %v", m)
			}
		case m.GetWatchUpdate() != nil:
			update = m.GetWatchUpdate()
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if update.GetWatchSequence() != 1 || update.GetRevision() != entry.GetRevision() || string(update.GetEntry().GetDocument()) != string(doc) {
		t.Fatalf("update %v does not report the put %v", update, entry)
	}
	// A second create-only put conflicts and names the current revision.
	send(t, c, &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{
		RequestId: 3, Namespace: ns, Key: "k", Schema: schema.MediaIntentV1, Document: doc, ExpectedRevision: &zero}}})
	m := recv(t, c)
	if er := m.GetResult().GetError(); er.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_CONFLICT || er.GetCurrentRevision() != entry.GetRevision() {
		t.Fatalf("second create-only put answered %v, want CONFLICT at revision %d", m, entry.GetRevision())
	}
	// Updates from other writers arrive in commit order, sequence 2, 3, ...
	var revs []uint64
	for i := range 5 {
		revs = append(revs, e.put(ns, "other", i).Revision)
	}
	for i, rev := range revs {
		u := recv(t, c).GetWatchUpdate()
		if u.GetWatchSequence() != uint64(i+2) || u.GetRevision() != rev {
			t.Fatalf("update %d = %v, want sequence %d revision %d", i, u, i+2, rev)
		}
	}
}

// exchange writes one raw WebSocket message and decodes the answer.
func exchange(t *testing.T, raw *websocket.Conn, typ websocket.MessageType, data []byte) *pb.ServerMessage {
	t.Helper()
	if err := raw.Write(ctx, typ, data); err != nil {
		t.Fatal(err)
	}
	_, b, err := raw.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := new(pb.ServerMessage)
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTextAndUndecodableMessagesAreAnsweredAndTheSessionGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	// A raw connection, to send what the protocol forbids.
	raw, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: bearer(token)})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.CloseNow()
	for _, bad := range []struct {
		typ  websocket.MessageType
		data []byte
	}{
		{websocket.MessageText, []byte(`{"get_state":{}}`)},
		{websocket.MessageBinary, []byte{0xff, 0xff, 0xff}},
	} {
		m := exchange(t, raw, bad.typ, bad.data)
		er := m.GetResult().GetError()
		if m.GetResult().GetRequestId() != 0 || er.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_INVALID_ARGUMENT || er.GetField() != "frame" {
			t.Fatalf("%v message %q answered %v, want INVALID_ARGUMENT field frame", bad.typ, bad.data, m)
		}
	}
	get, _ := proto.Marshal(&pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: 9, Namespace: "service/a", Key: "missing"}}})
	m := exchange(t, raw, websocket.MessageBinary, get)
	if m.GetResult().GetRequestId() != 9 || m.GetResult().GetError().GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND {
		t.Fatalf("get after the bad messages answered %v, want NOT_FOUND for request 9", m)
	}
}

func TestOversizedMessageClosesTheConnectionWith1009(t *testing.T) {
	t.Parallel()
	const max = 1024
	e := newEnv(t, envOptions{transport: wstransport.Options{MaxMessageBytes: max}})
	c := e.dial()
	watch(t, c, 1, "w", "service/a")
	if e.openWatches() != 1 {
		t.Fatalf("%d watches open, want 1", e.openWatches())
	}
	big := &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: 2, Namespace: "service/a", Key: "k",
		Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(max+1, 1)}}}
	send(t, c, big)
	_, err := c.Recv()
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("after a %d-byte message the client read %v (status %v), want closure 1009", proto.Size(big), err, got)
	}
	if err := e.waitEnded(); err == nil || !strings.Contains(err.Error(), "maximum frame size 1024") {
		t.Fatalf("session ended with %v, want the frame-size bound named", err)
	}
	if n := e.openWatches(); n != 0 {
		t.Fatalf("%d watches open after the session ended", n)
	}
}

func TestSessionEndRemovesItsWatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		end  func(e *env, c *wstransport.ClientConn)
	}{
		{"clean close", func(_ *env, c *wstransport.ClientConn) { c.Close() }},
		{"dropped connection", func(_ *env, c *wstransport.ClientConn) { c.Abort() }},
		{"handler closed", func(e *env, _ *wstransport.ClientConn) { e.h.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			keep, gone := e.dial(), e.dial()
			watch(t, keep, 1, "a", "service/a")
			watch(t, gone, 1, "a", "service/a")
			watch(t, gone, 2, "b", "service/b")
			if n := e.openWatches(); n != 3 {
				t.Fatalf("%d watches open, want 3", n)
			}
			if tc.name == "handler closed" {
				// Close ends every session and returns once they are gone.
				tc.end(e, gone)
				if n := e.openWatches(); n != 0 {
					t.Fatalf("%d watches open after Close returned", n)
				}
				// A closing handshake (1001), not a reset: the client's
				// Recv reports it as the end of input.
				if _, err := gone.Recv(); !errors.Is(err, io.EOF) {
					t.Fatalf("after Close the client read %v, want io.EOF from the closing handshake", err)
				}
				_, derr := wstransport.Dial(ctx, e.url, wstransport.DialOptions{Header: bearer(token)})
				var de *wstransport.DialError
				if !errors.As(derr, &de) || de.Status != http.StatusServiceUnavailable {
					t.Fatalf("dial after Close = %v, want HTTP 503", derr)
				}
				return
			}
			tc.end(e, gone)
			e.waitEnded()
			if n := e.openWatches(); n != 1 {
				t.Fatalf("%d watches open after one session ended, want the other session's 1", n)
			}
			// The other session is unaffected: its watch still delivers.
			rev := e.put("service/a", "k", 1).Revision
			if u := recv(t, keep).GetWatchUpdate(); u.GetWatchSequence() != 1 || u.GetRevision() != rev {
				t.Fatalf("surviving watch got %v", u)
			}
		})
	}
}

func TestNonAcknowledgingClientLosesItsWatchToBufferOverflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.dial()
	watch(t, c, 1, "w", "service/a")
	bound := e.store.Limits().MaxUnackedUpdates
	// The client reads every update but acknowledges none. Each is read
	// before the next write, so none is still queued when the watch
	// closes (a closed watch's queued updates are dropped, by contract).
	for i := range bound {
		e.put("service/a", "k", i)
		if u := recv(t, c).GetWatchUpdate(); u.GetWatchSequence() != uint64(i+1) {
			t.Fatalf("message %d = %v, want update %d", i, u, i+1)
		}
	}
	e.put("service/a", "k", bound)
	cl := recv(t, c).GetWatchClosed()
	if cl.GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW {
		t.Fatalf("after %d unacknowledged updates got %v, want BUFFER_OVERFLOW", bound, cl)
	}
	if n := e.openWatches(); n != 0 {
		t.Fatalf("%d watches open after the overflow", n)
	}
	// The session itself goes on.
	watch(t, c, 2, "w2", "service/a")
}

func TestUnacknowledgedUpdateClosesTheWatchWithAckTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.dial()
	watch(t, c, 1, "w", "service/a")
	e.put("service/a", "k", 1)
	if u := recv(t, c).GetWatchUpdate(); u.GetWatchSequence() != 1 {
		t.Fatalf("got %v, want update 1", u)
	}
	e.clk.Advance(e.store.Limits().AckDeadline)
	cl := recv(t, c).GetWatchClosed()
	if cl.GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_ACK_TIMEOUT || cl.GetWatchId() != "w" {
		t.Fatalf("after the ack deadline got %v, want ACK_TIMEOUT for w", cl)
	}
}

func TestAcknowledgingClientKeepsItsWatchPastTheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.dial()
	watch(t, c, 1, "w", "service/a")
	bound := e.store.Limits().MaxUnackedUpdates
	n := 3 * bound
	// The writer keeps at most bound-1 writes ahead of the acknowledgements
	// the server has applied (a writer that outruns the acknowledgement
	// round trip overflows the buffer legitimately): what is tested is that
	// acknowledging keeps the watch open past the bound in total.
	credits := make(chan struct{}, bound-1)
	for range bound - 1 {
		credits <- struct{}{}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			<-credits
			e.put("service/a", "k", i)
		}
	}()
	id := uint64(1)
	for seq := uint64(1); seq <= uint64(n); {
		m := recv(t, c)
		if u := m.GetWatchUpdate(); u != nil {
			if u.GetWatchSequence() != seq {
				t.Fatalf("update %v, want sequence %d", u, seq)
			}
			id++
			send(t, c, &pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{RequestId: id, WatchId: "w", AppliedSequence: seq}}})
			seq++
			continue
		}
		if m.GetAckResult() == nil {
			t.Fatalf("unexpected %v", m)
		}
		// The server has applied an acknowledgement: one more write may go.
		select {
		case credits <- struct{}{}:
		default: // the writer is done
		}
	}
	wg.Wait()
	for reason, n := range e.store.Stats().Watches.Closed {
		if n != 0 {
			t.Fatalf("%d watches closed with %v", n, reason)
		}
	}
	if e.openWatches() != 1 {
		t.Fatalf("the acknowledging watch was closed")
	}
}

func TestStalledReaderIsDisconnectedByTheWriteTimeout(t *testing.T) {
	// Serial: timing on two cores; the snapshot write before the stall must
	// not miss the 200 ms write timeout under the other tests' load.
	// A peer that stops reading: the answers pile up in the kernel's
	// buffers until a write misses its deadline; then the session ends
	// and its watch goes, instead of the server buffering without limit.
	e := newEnv(t, envOptions{
		dispatch:  dispatch.Options{MaxQueued: 8, MaxInFlight: 4},
		transport: wstransport.Options{WriteTimeout: 200 * time.Millisecond},
	})
	if _, err := e.store.Put(ctx, admin, statestore.PutRequest{Namespace: "service/a", Key: "big", Schema: schema.MediaIntentV1,
		Document: testdoc.MediaIntent(16<<10, 1)}); err != nil {
		t.Fatal(err)
	}
	c := e.dial()
	watch(t, c, 1, "w", "service/a")
	// Never read again; request the 16 KiB entry until the server gives up.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := uint64(2); ; id++ {
			err := c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: "service/a", Key: "big"}}})
			if err != nil {
				return
			}
		}
	}()
	err := e.waitEnded()
	if err == nil || !strings.Contains(err.Error(), "timeout 200ms") {
		t.Fatalf("session ended with %v, want the write timeout named", err)
	}
	if n := e.openWatches(); n != 0 {
		t.Fatalf("%d watches open after the stalled session was cut", n)
	}
	c.Abort()
	<-done
}
