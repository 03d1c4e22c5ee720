package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesAForeignHost: kpstate serve answers 421, naming
// allowed_hosts, a request whose Host header is not loopback, its own
// address or allowed; /healthz too, before any token is looked at; a
// configured name passes.
func TestServeRefusesAForeignHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ops := newPrincipal(t, "ops", true)
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops},
		extra: "allowed_hosts = [\"state.example.com\"]\n"}
	p := startServe(t, sc.write(t, dir), nil)
	base := "http" + strings.TrimPrefix(p.start.Endpoint, "ws")
	cases := []struct {
		host, path, token string
		want              int
	}{
		{"rebound.example.net", "/api/info", ops.token, http.StatusMisdirectedRequest},
		{"rebound.example.net:8765", "/healthz", "", http.StatusMisdirectedRequest},
		{"state.example.com", "/healthz", "", http.StatusOK},
		{"localhost", "/api/info", "", http.StatusUnauthorized},
		{"", "/api/info", ops.token, http.StatusOK}, // 127.0.0.1:PORT
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", base+c.path, nil)
		if c.host != "" {
			req.Host = c.host
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || (c.want == http.StatusMisdirectedRequest && !strings.Contains(string(body), "allowed_hosts")) {
			t.Errorf("Host %q %s: HTTP %d %q, want %d", c.host, c.path, resp.StatusCode, body, c.want)
		}
	}
}
