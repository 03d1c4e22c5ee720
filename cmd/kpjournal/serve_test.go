package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/buildinfo"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

func TestServeAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		remote bool
		want   string // "" = refused
	}{
		{":8765", false, "127.0.0.1:8765"},
		{"127.0.0.1:0", false, "127.0.0.1:0"},
		{"localhost:8765", false, "localhost:8765"},
		{"[::1]:8765", false, "[::1]:8765"},
		{"0.0.0.0:8765", false, ""},
		{"192.0.2.7:8765", false, ""},
		{"0.0.0.0:8765", true, "0.0.0.0:8765"},
		{"8765", false, ""},
	}
	for _, c := range cases {
		got, err := serveAddr(c.in, c.remote)
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "--listen")):
			t.Errorf("serveAddr(%q, %v) = %q, %v; want an error naming --listen", c.in, c.remote, got, err)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("serveAddr(%q, %v) = %q, %v; want %q", c.in, c.remote, got, err, c.want)
		}
	}
}

func TestServeRefusesANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	code, _, errs := kp(t, "serve", "--dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if code != exitUsage || !strings.Contains(errs, "--allow-remote") {
		t.Fatalf("exit %d, stderr %q; want a refusal naming --allow-remote", code, errs)
	}
}

// served is a running `kpjournal serve`.
type served struct {
	base  string // http://127.0.0.1:PORT
	token string
	stop  context.CancelFunc
	exit  chan int
	errb  *bytes.Buffer
	start serveStart
}

// startServe runs kpjournal serve on an ephemeral loopback port until the
// test stops it, as Ctrl-C would.
func startServe(t *testing.T, dir string) *served {
	t.Helper()
	return startServeArgs(t, dir, "tok", "--dev-token", "tok")
}

// startServeArgs is startServe with the token flags of the test's own;
// want is the token the URL must carry.
func startServeArgs(t *testing.T, dir, want string, tokenArgs ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	orig := stopContext
	stopContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { stopContext = orig })
	pr, pw := io.Pipe()
	s := &served{stop: cancel, exit: make(chan int, 1), errb: new(bytes.Buffer)}
	go func() {
		s.exit <- run(append([]string{"serve", "--dir", dir, "--listen", "127.0.0.1:0", "--json"}, tokenArgs...), pw, s.errb)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("serve printed nothing: exit %d, stderr %s", <-s.exit, s.errb)
	}
	if err := json.Unmarshal(sc.Bytes(), &s.start); err != nil {
		t.Fatalf("serve --json printed %q: %v", sc.Text(), err)
	}
	base, token, ok := strings.Cut(s.start.URL, "/#token=")
	if !ok || token != want {
		t.Fatalf("url %q does not carry the token", s.start.URL)
	}
	s.base, s.token = base, token
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		<-s.exit
	})
	return s
}

func (s *served) info(t *testing.T) inspector.Info {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/api/info", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info inspector.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("api/info: HTTP %d, %v", resp.StatusCode, err)
	}
	return info
}

// call sends one request over the WebSocket and returns its answer.
func (s *served) call(t *testing.T, m *pb.ClientMessage) *pb.ServerMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := wstransport.Dial(ctx, "ws"+strings.TrimPrefix(s.base, "http")+"/ws?access_token="+s.token, wstransport.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(m); err != nil {
		t.Fatal(err)
	}
	a, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestServeServesTheStoreAndClosesItOnInterrupt(t *testing.T) {
	// Serial: startServe swaps the package-level stopContext.
	dir := t.TempDir()
	s := startServe(t, dir)
	if s.start.Store != "open" || s.start.Cause != "" {
		t.Fatalf("serve --json printed %+v, want the store open", s.start)
	}
	if info := s.info(t); !info.Available || info.Principal != servePrincipal.ID || info.Version != buildinfo.Read().String() {
		t.Fatalf("api/info = %+v, want the store available to %s, and the build's version", info, servePrincipal.ID)
	}
	a := s.call(t, &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: 1,
		Namespace: "service/a", Key: "k", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, 1)}}})
	if a.GetResult().GetEntry().GetRevision() != 1 {
		t.Fatalf("put over the WebSocket answered %v", a)
	}
	if ns := s.info(t).Namespaces; len(ns) != 1 || ns[0].Name != "service/a" || ns[0].Entries != 1 {
		t.Fatalf("api/info lists %+v after the put", ns)
	}
	s.stop()
	if code := <-s.exit; code != exitOK {
		t.Fatalf("serve exited %d: %s", code, s.errb)
	}
	s.exit <- exitOK // for the cleanup
	// The store was closed: it opens again, with the write.
	st, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopen after serve: %v", err)
	}
	defer st.Close()
	if _, err := st.Get(context.Background(), servePrincipal, "service/a", "k"); err != nil {
		t.Fatalf("the write made through serve: %v", err)
	}
}

func TestServeAStoreThatCannotOpenAnswersUnavailable(t *testing.T) {
	// Serial: startServe swaps the package-level stopContext.
	dir := t.TempDir()
	held, err := statestore.Open(statestore.Options{Dir: dir}) // holds the LOCK
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s := startServe(t, dir)
	if s.start.Store != "unavailable" || !strings.Contains(s.start.Cause, "LOCK") {
		t.Fatalf("serve --json printed %+v, want the store unavailable naming the LOCK", s.start)
	}
	info := s.info(t)
	if info.Available || !strings.Contains(info.Cause, "LOCK") || len(info.Capabilities) != 0 {
		t.Fatalf("api/info = %+v, want unavailable naming the held LOCK and no capability", info)
	}
	a := s.call(t, &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: 1, Namespace: "service/a", Key: "k"}}})
	if e := a.GetResult().GetError(); e.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.GetMessage(), "LOCK") {
		t.Fatalf("get answered %v, want UNAVAILABLE naming the cause", a)
	}
	if !strings.Contains(s.errb.String(), "serving it UNAVAILABLE") {
		t.Errorf("stderr %q does not say the store is served UNAVAILABLE", s.errb)
	}
}

func TestDevToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "good"), filepath.Join(dir, "empty")
	os.WriteFile(good, []byte("  from-file \nsecond line\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	cases := []struct {
		flag, file, env string
		want            string // "" = refused; "random" = 32 hex digits
	}{
		{"", good, "", "from-file"},
		{"", good, "from-env", "from-file"},
		{"from-flag", "", "from-env", "from-flag"},
		{"", "", " from-env\n", "from-env"},
		{"", "", "", "random"},
		{"from-flag", good, "", ""},
		{"", empty, "", ""},
		{"", filepath.Join(dir, "missing"), "", ""},
	}
	for _, c := range cases {
		got, err := devToken(c.flag, c.file, c.env)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%+v: %q, want a refusal", c, got)
		case c.want == "random" && (err != nil || len(got) != 32):
			t.Errorf("%+v: %q, %v; want a random token", c, got, err)
		case c.want != "" && c.want != "random" && (err != nil || got != c.want):
			t.Errorf("%+v: %q, %v; want %q", c, got, err, c.want)
		}
	}
}

func TestServeTakesTheTokenFromAFileOrTheEnvironment(t *testing.T) {
	// Serial: startServe swaps the package-level stopContext, and the
	// environment is the process's.
	file := filepath.Join(t.TempDir(), "dev.token")
	if err := os.WriteFile(file, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServeArgs(t, t.TempDir(), "file-token", "--dev-token-file", file)
	if info := s.info(t); info.Principal != servePrincipal.ID {
		t.Fatalf("api/info with the file's token: %+v", info)
	}
	s.stop()
	<-s.exit
	s.exit <- exitOK
	t.Setenv(devTokenEnv, "env-token")
	s = startServeArgs(t, t.TempDir(), "env-token")
	if info := s.info(t); info.Principal != servePrincipal.ID {
		t.Fatalf("api/info with the environment's token: %+v", info)
	}
}

// TestServeRefusesAForeignHost: a request whose Host is not loopback is
// answered 421 before the token is looked at (it carries none).
func TestServeRefusesAForeignHost(t *testing.T) {
	// Serial: startServe swaps the package-level stopContext.
	s := startServe(t, t.TempDir())
	req, _ := http.NewRequest("GET", s.base+"/api/info", nil)
	req.Host = "rebound.example.net"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "--allowed-host") {
		t.Fatalf("HTTP %d %q, want 421 naming --allowed-host", resp.StatusCode, body)
	}
	req, _ = http.NewRequest("GET", s.base+"/api/info", nil)
	req.Host = strings.Replace(strings.TrimPrefix(s.base, "http://"), "127.0.0.1", "localhost", 1)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Host localhost without a token: HTTP %d, want 401 (past the Host check)", resp.StatusCode)
	}
}
