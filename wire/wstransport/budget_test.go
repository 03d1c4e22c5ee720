package wstransport_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
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

// getOn sends one GET on c and returns the response.
func getOn(t *testing.T, c net.Conn, r *bufio.Reader) *http.Response {
	t.Helper()
	c.SetDeadline(time.Now().Add(hangGuard))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Header.Set("X-Body", string(body))
	return resp
}

// TestConnBudgetRefusesOverTheCap: connections up to the cap are served and
// stay counted while open (kept alive, idle), the next one is answered 503
// naming the bound, and closing one makes room again.
func TestConnBudgetRefusesOverTheCap(t *testing.T) {
	t.Parallel()
	b, addr := budgetServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var held []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp := getOn(t, c, bufio.NewReader(c)); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d under the cap: HTTP %d", i, resp.StatusCode)
		}
		held = append(held, c)
	}
	if n := b.Active(); n != 2 {
		t.Fatalf("Active = %d with two idle keep-alive connections", n)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	resp := getOn(t, over, bufio.NewReader(over))
	if body := resp.Header.Get("X-Body"); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(body, "test.max_connections") || !strings.Contains(body, "2 connections") {
		t.Fatalf("over the cap: HTTP %d %q, want 503 naming test.max_connections and its value", resp.StatusCode, body)
	}
	if b.Refused() != 1 {
		t.Errorf("Refused = %d", b.Refused())
	}
	// The refused connection is closed by the server once answered.
	over.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
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
	again, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if resp := getOn(t, again, bufio.NewReader(again)); resp.StatusCode != http.StatusOK {
		t.Fatalf("after a close: HTTP %d, want room again", resp.StatusCode)
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
