package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/ops/inspector"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

const (
	codeDenied      = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_PERMISSION_DENIED
	codeUnavailable = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE
	reasonAuthLost  = pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_AUTHORIZATION_LOST
)

// binaryVersion is what the built kpstate prints for --version.
func binaryVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(kpstateBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestServeOverTheWire runs kpstate serve without and with TLS and uses
// it as its principals would: the probes, api/info, the WebSocket with an
// administrator and a plain principal, refused tokens, metrics and the
// inspector page.
func TestServeOverTheWire(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ops, alice := newPrincipal(t, "ops", true), newPrincipal(t, "alice", false)
			// config.toml declares a settings-backed namespace, and one
			// browser origin besides the server's own is allowed.
			mediaConfig := filepath.Join(dir, "config.toml")
			if err := os.WriteFile(mediaConfig, []byte("[state_store]\nnamespaces = [\"group/living-room\"]\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops, alice}, metrics: true, inspector: !withTLS,
				extra: fmt.Sprintf("config_toml = %q\nallowed_origins = [\"app.example.com\"]\n", mediaConfig)}
			if withTLS {
				sc.tls = newTLS(t, dir)
			}
			p := startServe(t, sc.write(t, dir), sc.tls)
			scheme := map[bool]string{false: "ws://", true: "wss://"}[withTLS]
			if !strings.HasPrefix(p.start.URL, scheme+"127.0.0.1:") || !strings.HasSuffix(p.start.URL, "/ws") || p.start.State != "open" || p.start.Cause != "" {
				t.Fatalf("start line %+v", p.start)
			}
			if rec, _ := p.waitLog("listening"); rec["tls"] != withTLS {
				t.Errorf("the listening log says tls=%v", rec["tls"])
			}

			// The probes need no token.
			if code, body := p.get("/healthz", ""); code != http.StatusOK || body != "ok\n" {
				t.Errorf("/healthz: %d %q", code, body)
			}
			if code, body := p.get("/readyz", ""); code != http.StatusOK {
				t.Errorf("/readyz: %d %q", code, body)
			}
			// api/info: the principal, and the server's version, which is
			// the binary's own --version.
			code, body := p.get("/api/info", alice.token)
			var info inspector.Info
			if err := json.Unmarshal([]byte(body), &info); code != http.StatusOK || err != nil {
				t.Fatalf("/api/info: %d %q %v", code, body, err)
			}
			if v := binaryVersion(t); info.Version != v || p.start.Version != v || !strings.HasPrefix(v, "github.com/keeppeek/statestore ") {
				t.Errorf("api/info version %q, start line version %q, kpstate --version %q", info.Version, p.start.Version, v)
			}
			if !info.Available || info.Principal != "alice" || len(info.Capabilities) != 1 || info.Capabilities[0] != statestore.Capability {
				t.Errorf("api/info as alice: %+v", info)
			}

			// Refused tokens: 401 with the reason, never the token.
			for _, c := range []struct{ path, tok, says string }{
				{"/api/info", "", "no bearer token"},
				{"/api/info", "not-a-token-of-this-server", "the token matches no principal of this server"},
				{"/ws", "not-a-token-of-this-server", "the token matches no principal of this server"},
				{"/ws", ops.id, "the token matches no principal of this server"}, // the ID is not the token
			} {
				code, body := p.get(c.path, c.tok)
				if code != http.StatusUnauthorized || !strings.Contains(body, c.says) || (c.tok != "" && strings.Contains(body, c.tok)) {
					t.Errorf("GET %s with token %q: %d %q, want 401 saying %q", c.path, c.tok, code, body, c.says)
				}
			}
			_, err := p.dial("not-a-token-of-this-server")
			var de *wstransport.DialError
			if !errors.As(err, &de) || de.Status != http.StatusUnauthorized {
				t.Errorf("dial with a wrong token: %v, want HTTP 401", err)
			}

			// The administrator writes service/ and reads it back.
			admin := p.mustDial(ops.token)
			if r := admin.put("service/transcoder-a", "intents/front-door", 1); r.GetEntry().GetRevision() != 1 {
				t.Fatalf("admin put: %v", r)
			}
			if r := admin.getState("service/transcoder-a", "intents/front-door"); r.GetEntry().GetOwner() != "ops" || r.GetEntry().GetRevision() != 1 {
				t.Fatalf("admin get: %v", r)
			}
			// alice may not touch service/, but owns user/alice.
			a := p.mustDial(alice.token)
			if r := a.put("service/transcoder-a", "intents/x", 2); errCode(r) != codeDenied {
				t.Errorf("alice put on service/: %v, want PERMISSION_DENIED", r)
			}
			if r := a.getState("service/transcoder-a", "intents/front-door"); errCode(r) != codeDenied {
				t.Errorf("alice get on service/: %v, want PERMISSION_DENIED", r)
			}
			if r := a.put("user/alice", "groups", 3); r.GetEntry().GetRevision() != 1 || r.GetEntry().GetOwner() != "alice" {
				t.Errorf("alice put on user/alice: %v", r)
			}
			if r := a.put("user/bob", "groups", 3); errCode(r) != codeDenied {
				t.Errorf("alice put on user/bob: %v, want PERMISSION_DENIED", r)
			}
			if rec, _ := p.waitLog("session started"); rec["principal"] != "ops" {
				t.Errorf("the first session logged is %v's", rec["principal"])
			}
			// A settings-backed namespace is written into config.toml.
			if r := admin.put("group/living-room", "members/alice", 4); r.GetEntry().GetRevision() != 1 {
				t.Fatalf("admin put on the settings-backed namespace: %v", r)
			}
			b, err := os.ReadFile(mediaConfig)
			if err != nil {
				t.Fatal(err)
			}
			if sec, err := settings.Parse(b); err != nil || len(sec.Entries) != 1 || sec.Entries[0].Key != "members/alice" {
				t.Errorf("config.toml after the put: %+v, %v\n%s", sec, err, b)
			}
			// Origins: the allowed one connects, another is refused (403).
			c, err := wstransport.Dial(t.Context(), p.start.URL, wstransport.DialOptions{HTTPClient: p.client,
				Header: http.Header{"Authorization": {"Bearer " + alice.token}, "Origin": {"https://app.example.com"}}})
			if err != nil {
				t.Errorf("dial from the allowed origin: %v", err)
			} else {
				c.Close()
			}
			_, err = wstransport.Dial(t.Context(), p.start.URL, wstransport.DialOptions{HTTPClient: p.client,
				Header: http.Header{"Authorization": {"Bearer " + alice.token}, "Origin": {"https://evil.example.net"}}})
			if !errors.As(err, &de) || de.Status != http.StatusForbidden {
				t.Errorf("dial from another origin: %v, want HTTP 403", err)
			}

			// Metrics, on their own listener, over TLS too when configured.
			if code, body := p.get(p.start.Metrics, ""); code != http.StatusOK || !strings.Contains(body, "keeppeek_state_store_") {
				t.Errorf("%s: %d, %d bytes", p.start.Metrics, code, len(body))
			}
			// The inspector page only where the configuration asks for it.
			want, page := http.StatusNotFound, ""
			if sc.inspector {
				want, page = http.StatusOK, "http://"+strings.TrimPrefix(p.start.Endpoint, "ws://")+"/"
			}
			if code, _ := p.get("/", ""); code != want || p.start.Page != page {
				t.Errorf("GET / with inspector = %v: %d (start line page %q), want %d", sc.inspector, code, p.start.Page, want)
			}
			p.signal(syscall.SIGTERM)
			if code := p.wait(); code != exitOK {
				t.Errorf("exit %d after SIGTERM\n%s", code, p.log())
			}
			// The log names principals, never their tokens.
			for _, tok := range []string{ops.token, alice.token} {
				if strings.Contains(p.log(), tok) {
					t.Errorf("the server's log holds a token")
				}
			}
		})
	}
}

// TestServeAStoreThatCannotOpenIsUnavailable: another open store holds the
// LOCK; the server runs, says why, and answers UNAVAILABLE.
func TestServeAStoreThatCannotOpenIsUnavailable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	held, err := statestore.Open(statestore.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ops := newPrincipal(t, "ops", true)
	p := startServe(t, serverConfig{dataDir: data, principals: []principal{ops}}.write(t, dir), nil)
	if p.start.State != "unavailable" || !strings.Contains(p.start.Cause, "LOCK") {
		t.Fatalf("start line %+v, want unavailable naming the LOCK", p.start)
	}
	if code, body := p.get("/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "LOCK") {
		t.Errorf("/readyz: %d %q, want 503 naming the LOCK", code, body)
	}
	if code, _ := p.get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200: the process serves", code)
	}
	s := p.mustDial(ops.token)
	if r := s.getState("service/a", "k"); errCode(r) != codeUnavailable || !strings.Contains(r.GetError().GetMessage(), "LOCK") {
		t.Errorf("get: %v, want UNAVAILABLE naming the LOCK", r)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != exitOK {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// TestServeRefusals: what is wrong with the configuration or its files
// stops serve before it listens, with exit 2 and the field named.
func TestServeRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tt := newTLS(t, dir)
	other := newTLS(t, t.TempDir())
	ops := newPrincipal(t, "ops", true)
	data := filepath.Join(dir, "data")
	cases := []struct {
		name string
		sc   serverConfig
		says []string
	}{
		{"non-loopback listen without TLS", serverConfig{listen: "0.0.0.0:0"}, []string{"listen", "0.0.0.0:0", "not a loopback address", "--insecure"}},
		{"non-loopback metrics without TLS", serverConfig{extra: "metrics_listen = \"0.0.0.0:0\"\n"}, []string{"metrics_listen", "--insecure"}},
		{"a certificate with another key", serverConfig{tls: &testTLS{certFile: tt.certFile, keyFile: other.keyFile}}, []string{"tls", tt.certFile, other.keyFile, "not a certificate and its key"}},
		{"a missing certificate", serverConfig{tls: &testTLS{certFile: filepath.Join(dir, "nope.pem"), keyFile: tt.keyFile}}, []string{"tls.cert_file", "nope.pem"}},
		{"limits the store refuses", serverConfig{extra: "\n[limits]\nmin_ttl = \"2h\"\nmax_ttl = \"1h\"\n"}, []string{"limits", "MinTTL"}},
	}
	for _, c := range cases {
		c.sc.dataDir, c.sc.principals = data, []principal{ops}
		code, out, errs := kp(t, "serve", "--config", c.sc.write(t, t.TempDir()))
		if code != exitUsage || out != "" {
			t.Errorf("%s: exit %d, stdout %q", c.name, code, out)
		}
		for _, s := range c.says {
			if !strings.Contains(errs, s) {
				t.Errorf("%s: stderr %q does not say %q", c.name, errs, s)
			}
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a refused start created %s (%v)", data, err)
	}
	if code, _, errs := kp(t, "serve"); code != exitUsage || !strings.Contains(errs, "--config is required") {
		t.Errorf("serve without --config: exit %d, %q", code, errs)
	}
}

// TestServeStopsOnSIGTERM: SIGTERM ends the sessions, closes the store
// (it opens again here, with what was written) and exits 0, logging each
// step.
func TestServeStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ops := newPrincipal(t, "ops", true)
	p := startServe(t, serverConfig{dataDir: data, principals: []principal{ops}}.write(t, dir), nil)
	s := p.mustDial(ops.token)
	if r := s.watch("w", "service/a"); r.GetWatch() == nil {
		t.Fatalf("watch: %v", r)
	}
	if r := s.put("service/a", "k", 1); r.GetEntry().GetRevision() != 1 {
		t.Fatalf("put: %v", r)
	}
	s.mustRecv() // the watch's update
	p.signal(syscall.SIGTERM)
	if _, err := s.recv(); websocket.CloseStatus(err) != websocket.StatusGoingAway && !errors.Is(err, io.EOF) {
		t.Errorf("the session read %v at the shutdown, want the closing handshake (going away)", err)
	}
	if code := p.wait(); code != exitOK {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.log())
	}
	for _, step := range []string{"stopping", "stopped accepting connections", "WebSocket sessions ended, their watches removed", "HTTP servers shut down", "store closed"} {
		p.waitLog(step) // in this order
	}
	st, err := statestore.Open(statestore.Options{Dir: data})
	if err != nil {
		t.Fatalf("reopen after the shutdown: %v", err)
	}
	defer st.Close()
	if e, err := st.Get(t.Context(), statestore.Principal{ID: "ops", Admin: true}, "service/a", "k"); err != nil || e.Revision != 1 {
		t.Errorf("the write made through the server: %+v, %v", e, err)
	}
}

// TestServeStartLineText: without --json the start line is one sentence
// with the URL, the store's state and the version; with log_format
// "text" the log on stderr is slog's text form, one key=value record a
// line.
func TestServeStartLineText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := serverConfig{dataDir: filepath.Join(dir, "data"), logFormat: "text"}.write(t, dir)
	cmd := exec.Command(kpstateBin, "serve", "--config", file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	var got string
	select {
	case got = <-line:
	case <-time.After(guard):
		t.Fatal("no start line")
	}
	want := regexp.MustCompile(`^kpstate serving ws://127\.0\.0\.1:[0-9]+/ws \(store open, version github\.com/keeppeek/statestore \S+ revision=\S+ modified=\S+\)\n$`)
	if !want.MatchString(got) {
		t.Errorf("start line %q", got)
	}
	// The listener's record, logged before the start line, in text form.
	listening := regexp.MustCompile(`^time=\S+ level=INFO msg=listening key=listen addr=127\.0\.0\.1:[0-9]+ tls=false$`)
	type scan struct {
		found bool
		seen  []string
	}
	scanned := make(chan scan, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		var r scan
		for !r.found && sc.Scan() {
			r.found = listening.MatchString(sc.Text())
			r.seen = append(r.seen, sc.Text())
		}
		scanned <- r
	}()
	select {
	case r := <-scanned:
		if !r.found {
			t.Errorf("no text record of the listener on stderr:\n%s", strings.Join(r.seen, "\n"))
		}
	case <-time.After(guard):
		t.Fatal("no text record of the listener on stderr")
	}
}
