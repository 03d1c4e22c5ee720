package inspector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// byToken authenticates two principals by their tokens.
var byToken = wstransport.AuthenticatorFunc(func(r *http.Request) (statestore.Principal, error) {
	switch r.Header.Get("Authorization") {
	case "Bearer admin":
		return admin, nil
	case "Bearer alice":
		return statestore.Principal{ID: "alice"}, nil
	}
	return statestore.Principal{}, errors.New("unknown token")
})

func get(t *testing.T, srv *httptest.Server, path, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestInfoIsAuthenticatedAndListsOnlyReadableNamespaces(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, ns := range []string{"service/a", "user/alice", "user/bob"} {
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: "k", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	ins, err := inspector.New(inspector.Config{Store: s, Auth: byToken, Version: "v9.9.9-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	srv := httptest.NewServer(ins)
	defer srv.Close()

	if code, body := get(t, srv, "/api/info", ""); code != http.StatusUnauthorized || !strings.Contains(body, "unknown token") {
		t.Fatalf("api/info without a token: %d %q, want 401 naming the refusal", code, body)
	}
	if code, _ := get(t, srv, "/ws", ""); code != http.StatusUnauthorized {
		t.Fatalf("ws without a token: %d, want 401", code)
	}
	cases := []struct {
		tok  string
		want string
	}{
		{"admin", "[service/a user/alice user/bob]"},
		{"alice", "[user/alice]"},
	}
	for _, c := range cases {
		code, body := get(t, srv, "/api/info", c.tok)
		var info inspector.Info
		if err := json.Unmarshal([]byte(body), &info); code != http.StatusOK || err != nil {
			t.Fatalf("api/info as %s: %d %q %v", c.tok, code, body, err)
		}
		var names []string
		for _, n := range info.Namespaces {
			names = append(names, n.Name)
		}
		if fmt.Sprint(names) != c.want {
			t.Errorf("api/info as %s lists %v, want %s", c.tok, names, c.want)
		}
		if !info.Available || len(info.Capabilities) != 1 || info.Capabilities[0] != statestore.Capability || info.Version != "v9.9.9-test" {
			t.Errorf("api/info as %s: available %v capabilities %v version %q", c.tok, info.Available, info.Capabilities, info.Version)
		}
	}
	// The page and its script load without credentials: they hold none.
	for _, p := range []string{"/", "/inspector.js", "/keeppeek.mjs"} {
		if code, body := get(t, srv, p, ""); code != http.StatusOK || len(body) < 1000 {
			t.Errorf("GET %s: %d, %d bytes", p, code, len(body))
		}
	}
}

func TestInfoWithoutAStoreSaysWhy(t *testing.T) {
	t.Parallel()
	ins, err := inspector.New(inspector.Config{Cause: errors.New("LOCK held by pid 42"), Auth: byToken})
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	srv := httptest.NewServer(ins)
	defer srv.Close()
	code, body := get(t, srv, "/api/info", "admin")
	var info inspector.Info
	if err := json.Unmarshal([]byte(body), &info); code != http.StatusOK || err != nil {
		t.Fatalf("api/info: %d %q %v", code, body, err)
	}
	if info.Available || info.Cause != "LOCK held by pid 42" || len(info.Capabilities) != 0 || len(info.Namespaces) != 0 {
		t.Fatalf("api/info without a store: %+v", info)
	}
}

func TestNewRequiresAnAuthenticator(t *testing.T) {
	t.Parallel()
	_, err := inspector.New(inspector.Config{})
	var oe *wstransport.OptionError
	if !errors.As(err, &oe) || oe.Field != "Authenticator" {
		t.Fatalf("New without Auth = %v, want an OptionError naming Authenticator", err)
	}
}

// TestCloseEndsEverySession: once Close returns, the WebSocket sessions it
// served are gone, and with them their watches on the store, without a
// browser.
func TestCloseEndsEverySession(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ins, err := inspector.New(inspector.Config{Store: s, Auth: byToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ins)
	defer srv.Close()
	c, err := wstransport.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wstransport.DialOptions{Header: http.Header{"Authorization": {"Bearer admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	if err := c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{RequestId: 1, WatchId: "w", Namespace: "service/a"}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Recv(); err != nil || m.GetResult().GetWatch() == nil {
		t.Fatalf("WatchState answered %v, %v", m, err)
	}
	if n := s.Stats().Watches.Open; n != 1 {
		t.Fatalf("%d watches open, want 1", n)
	}
	if err := ins.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Watches; st.Open != 0 || st.Sessions != 0 {
		t.Fatalf("after Close: %d watches and %d sessions open, want none", st.Open, st.Sessions)
	}
}

func TestNoPageServesOnlyTheProtocol(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ins, err := inspector.New(inspector.Config{Store: s, Auth: byToken, NoPage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	srv := httptest.NewServer(ins)
	defer srv.Close()
	for _, p := range []string{"/", "/inspector.js", "/keeppeek.mjs", "/favicon.ico"} {
		if code, _ := get(t, srv, p, "admin"); code != http.StatusNotFound {
			t.Errorf("GET %s with NoPage: %d, want 404", p, code)
		}
	}
	if code, body := get(t, srv, "/api/info", "admin"); code != http.StatusOK || !strings.Contains(body, `"available":true`) {
		t.Errorf("api/info with NoPage: %d %q", code, body)
	}
	c, err := wstransport.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wstransport.DialOptions{Header: http.Header{"Authorization": {"Bearer admin"}}})
	if err != nil {
		t.Fatalf("ws with NoPage: %v", err)
	}
	c.Close()
}
