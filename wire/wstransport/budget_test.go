package wstransport_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/attack"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// budgetServer serves h on a loopback listener wrapped by a budget of max
// connections.
func budgetServer(t *testing.T, max int, h http.Handler) (*wstransport.ConnBudget, string) {
	t.Helper()
	b, err := wstransport.NewConnBudget(max, "test.max_connections")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: hangGuard}
	go srv.Serve(b.Listen(ln, true))
	t.Cleanup(func() { srv.Close() })
	return b, ln.Addr().String()
}

// getOn makes one GET / on c (kept alive) and returns the answer,
// failing the test when none comes.
func getOn(t *testing.T, c *attack.RawConn) attack.Response {
	t.Helper()
	resp, err := c.Request("/", "127.0.0.1", http.Header{})
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

// dialRaw opens a raw connection to addr, closed at the test's end.
func dialRaw(t *testing.T, addr string) *attack.RawConn {
	t.Helper()
	c, err := attack.DialRaw(ctx, addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnBudgetRefusesOverTheCap: connections up to the cap are served and
// stay counted while open (kept alive, idle), the next one is answered 503
// naming the bound, and closing one makes room again.
func TestConnBudgetRefusesOverTheCap(t *testing.T) {
	t.Parallel()
	b, addr := budgetServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var held []*attack.RawConn
	for i := range 2 {
		c := dialRaw(t, addr)
		if resp := getOn(t, c); resp.Status != http.StatusOK {
			t.Fatalf("connection %d under the cap: HTTP %d", i, resp.Status)
		}
		held = append(held, c)
	}
	if n := b.Active(); n != 2 {
		t.Fatalf("Active = %d with two idle keep-alive connections", n)
	}
	over := dialRaw(t, addr)
	resp := getOn(t, over)
	if resp.Status != http.StatusServiceUnavailable ||
		!strings.Contains(resp.Body, "test.max_connections") || !strings.Contains(resp.Body, "2 connections") {
		t.Fatalf("over the cap: HTTP %d %q, want 503 naming test.max_connections and its value", resp.Status, resp.Body)
	}
	if b.Refused() != 1 {
		t.Errorf("Refused = %d", b.Refused())
	}
	// The refused connection is closed by the server once answered.
	if err := over.AwaitEOF(hangGuard); err != nil {
		t.Errorf("the refused connection was not closed: %v", err)
	}
	held[0].Close()
	deadline := time.Now().Add(hangGuard)
	for b.Active() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection is still counted: Active = %d", b.Active())
		}
		// The server notices the close on its next read: poll, within
		// the guard.
		<-time.After(5 * time.Millisecond)
	}
	if resp := getOn(t, dialRaw(t, addr)); resp.Status != http.StatusOK {
		t.Fatalf("after a close: HTTP %d, want room again", resp.Status)
	}
}

func TestNewConnBudgetRefusesANonPositiveCap(t *testing.T) {
	t.Parallel()
	for _, max := range []int{0, -1} {
		var oe *wstransport.OptionError
		if _, err := wstransport.NewConnBudget(max, "x"); !errors.As(err, &oe) || oe.Field != "MaxConnections" {
			t.Errorf("NewConnBudget(%d) = %v, want an OptionError naming MaxConnections", max, err)
		}
	}
}

// TestConnectionsForDescriptorsKeepsTheReserve: the connections' share is
// the soft limit less what is open, the reserve and the refusals, and a
// reserve that leaves nothing is an error naming RLIMIT_NOFILE.
func TestConnectionsForDescriptorsKeepsTheReserve(t *testing.T) {
	t.Parallel()
	d, err := wstransport.ConnectionsForDescriptors(64)
	if err != nil {
		t.Fatal(err)
	}
	if d.Open < 3 || d.Connections != d.Limit-d.Open-64-wstransport.MaxRefusing-1 {
		t.Fatalf("%+v", d)
	}
	if _, err := wstransport.ConnectionsForDescriptors(d.Limit); err == nil || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Fatalf("a reserve of the whole limit: %v, want an error naming RLIMIT_NOFILE", err)
	}
}

// TestSessionsPerPrincipalAnswered429: a principal at its session bound
// is refused 429 naming the bound, before the upgrade; another principal
// is not, and an ended session frees its place.
func TestSessionsPerPrincipalAnswered429(t *testing.T) {
	t.Parallel()
	auth := wstransport.AuthenticatorFunc(func(r *http.Request) (statestore.Principal, error) {
		return statestore.Principal{ID: r.URL.Query().Get("p")}, nil
	})
	e := newEnv(t, envOptions{transport: wstransport.Options{Authenticator: auth, MaxSessionsPerPrincipal: 2}})
	dial := func(p string) (*wstransport.ClientConn, error) {
		return wstransport.Dial(ctx, e.url+"?p="+p, wstransport.DialOptions{})
	}
	var alice []*wstransport.ClientConn
	for range 2 {
		c, err := dial("alice")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		alice = append(alice, c)
	}
	_, err := dial("alice")
	var de *wstransport.DialError
	if !errors.As(err, &de) || de.Status != http.StatusTooManyRequests {
		t.Fatalf("alice's third session: %v, want HTTP 429", err)
	}
	if n := e.h.Sessions(); n != 2 {
		t.Errorf("%d sessions after the refusal", n)
	}
	bob, err := dial("bob")
	if err != nil {
		t.Fatalf("bob is refused for alice's sessions: %v", err)
	}
	defer bob.Abort()
	alice[0].Close()
	if err := e.waitEnded(); err != nil {
		t.Fatal(err)
	}
	c, err := dial("alice")
	if err != nil {
		t.Fatalf("after one of alice's sessions ended: %v", err)
	}
	c.Abort()
}

// TestSessionLimitBodyNamesTheBound reads the 429's body: the principal,
// the bound's name and its value.
func TestSessionLimitBodyNamesTheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{transport: wstransport.Options{MaxSessionsPerPrincipal: 1}})
	e.dial()
	req, _ := http.NewRequest("GET", e.srv.URL, nil)
	req.Header = bearer(token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), wstransport.BoundSessionsPerPrincipal) ||
		!strings.Contains(string(body), `"coordinator"`) || !strings.Contains(string(body), " 1 ") {
		t.Fatalf("HTTP %d %q, want 429 naming the principal, %q and 1", resp.StatusCode, body, wstransport.BoundSessionsPerPrincipal)
	}
}

// rawUpgrade opens a TCP connection to the env's server and makes the
// WebSocket handshake by hand, so a test can then send bytes no client
// library would.
func rawUpgrade(t *testing.T, e *env) *attack.RawConn {
	t.Helper()
	c := dialRaw(t, strings.TrimPrefix(e.srv.URL, "http://"))
	if err := c.Upgrade("127.0.0.1", attack.UpgradeHeader(token)); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return c
}

// TestAMessageThatStopsMidwayEndsTheSession: a frame header announcing
// 2^62 bytes, then nothing: the session ends once Options.MessageTimeout
// has passed since the header, with a MessageTimeoutError, and the
// connection is closed.
func TestAMessageThatStopsMidwayEndsTheSession(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	e := newEnv(t, envOptions{transport: wstransport.Options{MessageTimeout: timeout}})
	c := rawUpgrade(t, e)
	header, _ := attack.FrameHeader(attack.OpBinary, 1<<62)
	if _, err := c.Write(header); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	err := e.waitEnded()
	var mt *wstransport.MessageTimeoutError
	if !errors.As(err, &mt) || mt.Timeout != timeout {
		t.Fatalf("the session ended with %v, want a MessageTimeoutError naming %v", err, timeout)
	}
	if d := time.Since(sent); d < timeout {
		t.Errorf("ended %v after the header, before the %v bound", d, timeout)
	}
	if err := c.AwaitEOF(hangGuard); err != nil {
		t.Errorf("the connection was not closed: %v", err)
	}
}

// TestIdleSessionIsClosedGoingAway: over WebSocket, a session the
// dispatcher ends idle is closed 1001 with the reason, and Ended gets the
// IdleError.
func TestIdleSessionIsClosedGoingAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dispatch: dispatch.Options{IdleTimeout: 100 * time.Millisecond}})
	// The library's own client: wstransport.ClientConn reports a 1001 as
	// io.EOF.
	c, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: bearer(token)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	rctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	_, _, err = c.Read(rctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), "idle for 100ms") {
		t.Fatalf("the idle session's end: %v, want close 1001 \"idle for 100ms\"", err)
	}
	if err := e.waitEnded(); !errors.Is(err, dispatch.ErrIdle) {
		t.Fatalf("Ended got %v, want dispatch.ErrIdle", err)
	}
}
