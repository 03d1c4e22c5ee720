package wstransport_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

var (
	alice = statestore.Principal{ID: "alice"}
	bob   = statestore.Principal{ID: "bob"}
)

func entry(tok string, p statestore.Principal) wstransport.TokenPrincipal {
	return wstransport.TokenPrincipal{Hash: wstransport.HashToken(tok), Principal: p}
}

func TestParseTokenHash(t *testing.T) {
	t.Parallel()
	h := wstransport.HashToken("secret")
	cases := []struct {
		in   string
		want string // "" = refused
	}{
		{h.String(), h.String()},
		{"2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b", "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"},
		{strings.ToUpper(h.String()), ""},
		{h.String()[:63], ""},
		{h.String() + "0", ""},
		{strings.Repeat("g", 64), ""},
		{"", ""},
	}
	for _, c := range cases {
		got, err := wstransport.ParseTokenHash(c.in)
		switch {
		case c.want == "" && !errors.Is(err, wstransport.ErrBadTokenHash):
			t.Errorf("ParseTokenHash(%q) = %v, %v; want ErrBadTokenHash", c.in, got, err)
		case c.want != "" && (err != nil || got.String() != c.want):
			t.Errorf("ParseTokenHash(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	// The SHA-256 of "secret", as sha256sum prints it.
	if got := wstransport.HashToken("secret").String(); got != "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" {
		t.Errorf("HashToken(secret) = %s", got)
	}
}

func TestPrincipalTable(t *testing.T) {
	t.Parallel()
	table, err := wstransport.NewPrincipalTable([]wstransport.TokenPrincipal{entry("tok-a", alice), entry("tok-admin", admin)})
	if err != nil {
		t.Fatal(err)
	}
	req := func(header, query string) *http.Request {
		r := httptest.NewRequest("GET", "/ws"+query, nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		return r
	}
	auth := []struct {
		name string
		r    *http.Request
		want statestore.Principal
		err  error
	}{
		{"bearer header", req("Bearer tok-a", ""), alice, nil},
		{"query token", req("", "?access_token=tok-admin"), admin, nil},
		{"header wins over query", req("Bearer tok-a", "?access_token=tok-admin"), alice, nil},
		{"no token", req("", ""), statestore.Principal{}, wstransport.ErrNoToken},
		{"another scheme", req("Basic tok-a", ""), statestore.Principal{}, wstransport.ErrNoToken},
		{"unknown token", req("Bearer tok-x", ""), statestore.Principal{}, wstransport.ErrUnknownToken},
		{"a hash is not a token", req("Bearer "+wstransport.HashToken("tok-a").String(), ""), statestore.Principal{}, wstransport.ErrUnknownToken},
	}
	for _, c := range auth {
		p, err := table.Authenticate(c.r)
		if p != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: Authenticate = %+v, %v; want %+v, %v", c.name, p, err, c.want, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "tok-") {
			t.Errorf("%s: the refusal %q echoes the token", c.name, err)
		}
	}
	if got := fmt.Sprint(table.Principals()); got != "[{alice false false} {coordinator true false}]" {
		t.Errorf("Principals = %s", got)
	}

	bad := []struct {
		name    string
		entries []wstransport.TokenPrincipal
		index   int
		field   string
	}{
		{"empty ID", []wstransport.TokenPrincipal{entry("t1", alice), entry("t2", statestore.Principal{})}, 1, "Principal.ID"},
		{"the server's own principal", []wstransport.TokenPrincipal{entry("t1", statestore.System())}, 0, "Principal.ID"},
		{"duplicate ID", []wstransport.TokenPrincipal{entry("t1", alice), entry("t2", bob), entry("t3", alice)}, 2, "Principal.ID"},
		{"duplicate hash", []wstransport.TokenPrincipal{entry("t1", alice), entry("t1", bob)}, 1, "Hash"},
		{"hash not set", []wstransport.TokenPrincipal{{Principal: bob}}, 0, "Hash"},
	}
	for _, c := range bad {
		err := table.Replace(c.entries)
		var te *wstransport.PrincipalTableError
		if !errors.As(err, &te) || te.Index != c.index || te.Field != c.field {
			t.Errorf("%s: Replace = %v, want entry %d's %s refused", c.name, err, c.index, c.field)
		}
		// Refused: the old table still authenticates.
		if p, err := table.Authenticate(req("Bearer tok-a", "")); p != alice || err != nil {
			t.Errorf("%s: after the refused Replace tok-a gives %+v, %v", c.name, p, err)
		}
	}
	if err := table.Replace([]wstransport.TokenPrincipal{entry("tok-b", bob)}); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Authenticate(req("Bearer tok-a", "")); !errors.Is(err, wstransport.ErrUnknownToken) {
		t.Errorf("a token removed by Replace: %v, want ErrUnknownToken", err)
	}
	if p, err := table.Authenticate(req("Bearer tok-b", "")); p != bob || err != nil {
		t.Errorf("a token added by Replace: %+v, %v", p, err)
	}
}

// Replace while requests authenticate: every answer is the old table's or
// the new one's (and the race detector sees no race).
func TestPrincipalTableReplaceWhileAuthenticating(t *testing.T) {
	t.Parallel()
	table, _ := wstransport.NewPrincipalTable([]wstransport.TokenPrincipal{entry("tok", alice)})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest("GET", "/ws?access_token=tok", nil)
			for range 2000 {
				p, err := table.Authenticate(r)
				if !(p == alice && err == nil) && !(p == bob && err == nil) {
					errs <- fmt.Errorf("Authenticate = %+v, %v", p, err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		p := []statestore.Principal{alice, bob}[i%2]
		if err := table.Replace([]wstransport.TokenPrincipal{entry("tok", p)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// principalsEnv serves a store through a PrincipalTable and records each
// session's end with its principal.
type principalsEnv struct {
	*env
	table *wstransport.PrincipalTable
}

func newPrincipalsEnv(t *testing.T, auth wstransport.Authenticator) *principalsEnv {
	t.Helper()
	table, err := wstransport.NewPrincipalTable([]wstransport.TokenPrincipal{entry("tok-alice", alice), entry("tok-bob", bob), entry(token, admin)})
	if err != nil {
		t.Fatal(err)
	}
	if auth == nil {
		auth = table
	}
	pe := &principalsEnv{table: table}
	pe.env = newEnv(t, envOptions{transport: wstransport.Options{Authenticator: auth}})
	return pe
}

func (pe *principalsEnv) dialAs(tok string) *wstransport.ClientConn {
	pe.t.Helper()
	c, err := wstransport.Dial(ctx, pe.url, wstransport.DialOptions{Header: bearer(tok)})
	if err != nil {
		pe.t.Fatal(err)
	}
	pe.t.Cleanup(func() { c.Abort() })
	return c
}

// wantEnd reads c until its connection ends and checks it ended with
// status 1008 and a reason containing says.
func wantEnd(t *testing.T, c *wstransport.ClientConn, says string) {
	t.Helper()
	m, err := recvOrEnd(t, c)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, says) {
		t.Fatalf("the client read %v, %v; want the connection closed 1008 saying %q", m, err, says)
	}
}

func TestEndSessionsEndsOnlyThatPrincipal(t *testing.T) {
	t.Parallel()
	pe := newPrincipalsEnv(t, nil)
	a1, a2, b := pe.dialAs("tok-alice"), pe.dialAs("tok-alice"), pe.dialAs("tok-bob")
	watch(t, a1, 1, "own", "user/alice")
	watch(t, a2, 1, "own", "user/alice")
	watch(t, b, 1, "own", "user/bob")
	if n := pe.h.Sessions(); n != 3 {
		t.Fatalf("%d sessions, want 3", n)
	}
	// What a reload removing alice does, in this order.
	if err := pe.table.Replace([]wstransport.TokenPrincipal{entry("tok-bob", bob), entry(token, admin)}); err != nil {
		t.Fatal(err)
	}
	if n := pe.store.SetPrincipal(alice.ID, statestore.Principal{}, true); n != 2 {
		t.Fatalf("SetPrincipal closed %d watches, want 2", n)
	}
	if n := pe.h.EndSessions(alice.ID, errors.New("removed from the configuration")); n != 2 {
		t.Fatalf("EndSessions ended %d sessions, want 2", n)
	}
	for _, c := range []*wstransport.ClientConn{a1, a2} {
		// The closure queued by SetPrincipal arrives before the end.
		if cl := recv(t, c).GetWatchClosed(); cl.GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_AUTHORIZATION_LOST {
			t.Fatalf("alice's session read %v, want AUTHORIZATION_LOST", cl)
		}
		wantEnd(t, c, "removed from the configuration")
	}
	for range 2 {
		err := pe.waitEnded()
		var ee *wstransport.EndedError
		if !errors.As(err, &ee) || ee.Principal != alice.ID || !strings.Contains(err.Error(), "removed from the configuration") {
			t.Fatalf("alice's session ended with %v, want an EndedError naming alice and the cause", err)
		}
	}
	if n := pe.h.Sessions(); n != 1 {
		t.Fatalf("%d sessions after EndSessions, want bob's 1", n)
	}
	// Bob's session goes on: his watch still delivers.
	if _, err := pe.store.Put(ctx, bob, statestore.PutRequest{Namespace: "user/bob", Key: "k", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, 1)}); err != nil {
		t.Fatal(err)
	}
	if u := recv(t, b).GetWatchUpdate(); u.GetWatchSequence() != 1 {
		t.Fatalf("bob's watch got %v, want update 1", u)
	}
	// Alice's token is refused now, with the table's reason.
	_, err := wstransport.Dial(ctx, pe.url, wstransport.DialOptions{Header: bearer("tok-alice")})
	var de *wstransport.DialError
	if !errors.As(err, &de) || de.Status != http.StatusUnauthorized {
		t.Fatalf("redial as alice = %v, want HTTP 401", err)
	}
}

// gatedAuth answers from a principal table, but its first call waits at a
// gate: the test changes the table while a handshake is being
// authenticated.
type gatedAuth struct {
	table   *wstransport.PrincipalTable
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (g *gatedAuth) Authenticate(r *http.Request) (statestore.Principal, error) {
	p, err := g.table.Authenticate(r)
	g.once.Do(func() {
		g.entered <- struct{}{}
		<-g.gate
	})
	return p, err
}

// TestAHandshakeInFlightDuringAReloadAuthenticatesAgain: a handshake
// authenticated before the table changed, whose session starts after,
// runs only if the new table gives the same principal.
func TestAHandshakeInFlightDuringAReloadAuthenticatesAgain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(pe *principalsEnv) // with the handshake authenticated, before its session starts
		says   string                  // "" = the session serves
	}{
		{"rights changed", func(pe *principalsEnv) {
			pe.table.Replace([]wstransport.TokenPrincipal{entry("tok-alice", statestore.Principal{ID: "alice", Admin: true})})
			pe.h.Reauthenticate()
		}, "rights changed"},
		{"principal removed", func(pe *principalsEnv) {
			pe.table.Replace(nil)
			pe.h.EndSessions(alice.ID, errors.New("removed"))
		}, "withdrawn"},
		{"nothing changed for it", func(pe *principalsEnv) {
			pe.table.Replace([]wstransport.TokenPrincipal{entry("tok-alice", alice)})
			pe.h.Reauthenticate()
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := &gatedAuth{entered: make(chan struct{}, 1), gate: make(chan struct{})}
			pe := newPrincipalsEnv(t, g)
			g.table = pe.table
			dialed := make(chan *wstransport.ClientConn, 1)
			go func() {
				c, err := wstransport.Dial(ctx, pe.url, wstransport.DialOptions{Header: bearer("tok-alice")})
				if err != nil {
					t.Error(err)
				}
				dialed <- c
			}()
			<-g.entered // authenticated as alice; not yet serving
			c.change(pe)
			close(g.gate)
			conn := <-dialed
			if conn == nil {
				return
			}
			defer conn.Abort()
			if c.says == "" {
				watch(t, conn, 1, "own", "user/alice")
				return
			}
			wantEnd(t, conn, c.says)
			err := pe.waitEnded()
			var ee *wstransport.EndedError
			if !errors.As(err, &ee) || ee.Principal != alice.ID {
				t.Fatalf("the session ended with %v, want an EndedError naming alice", err)
			}
			if n := pe.store.Stats().Watches.Sessions; n != 0 {
				t.Fatalf("%d store sessions open after the end", n)
			}
		})
	}
}
