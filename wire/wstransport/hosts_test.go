package wstransport_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/wire/wstransport"
)

func TestHostAllowList(t *testing.T) {
	t.Parallel()
	l, err := wstransport.NewHostAllowList([]string{"state.example.com", "*.internal.example", "192.0.2.7", "2001:db8::1"}, "allowed_hosts")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:8765", true},
		{"LOCALHOST:8765", true},
		{"127.0.0.1:8765", true},
		{"127.1.2.3", true},
		{"[::1]:8765", true},
		{"state.example.com:443", true},
		{"State.Example.COM", true},
		{"state.example.com.", true},
		{"a.internal.example", true},
		{"192.0.2.7:8765", true},
		{"[2001:db8::1]:8765", true},
		{"evil.example.net", false},           // a rebound name
		{"127.0.0.1.evil.example.net", false}, // looks loopback, is not
		{"localhost.evil.example.net", false},
		{"internal.example", false}, // *. needs a label
		{"192.0.2.8", false},
		{"", false},
	}
	for _, c := range cases {
		if got := l.Allows(c.host); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.host, got, c.want)
		}
	}
	for _, bad := range []string{"", "[bad", "a/b", "host:80"} {
		var oe *wstransport.OptionError
		if _, err := wstransport.NewHostAllowList([]string{bad}, "allowed_hosts"); !errors.As(err, &oe) || !strings.Contains(err.Error(), "allowed_hosts") {
			t.Errorf("pattern %q: %v, want an OptionError naming allowed_hosts", bad, err)
		}
	}
}

// TestHostRefusedBeforeAuthentication: a request for another host is
// answered 421 naming it and the list, and the handler behind (where
// authentication happens) never runs.
func TestHostRefusedBeforeAuthentication(t *testing.T) {
	t.Parallel()
	l, err := wstransport.NewHostAllowList(nil, "--allowed-host")
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusUnauthorized)
	})))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/api/info", nil)
	req.Host = "rebound.example.net:8765"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "rebound.example.net") || !strings.Contains(string(body), "--allowed-host") || reached != 0 {
		t.Fatalf("HTTP %d %q (handler reached %d times), want 421 naming the host and the list before the handler", resp.StatusCode, body, reached)
	}
	resp, err = http.Get(srv.URL + "/api/info") // Host 127.0.0.1:PORT
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || reached != 1 {
		t.Fatalf("a loopback host: HTTP %d, handler reached %d times", resp.StatusCode, reached)
	}
}
