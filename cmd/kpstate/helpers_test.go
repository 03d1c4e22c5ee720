package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/internal/testtls"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// kpstateBin is the kpstate binary TestMain builds once: the serve tests
// run it as a child process, as an operator would.
var kpstateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kpstate-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	kpstateBin = filepath.Join(dir, "kpstate")
	args := []string{"build", "-o", kpstateBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build kpstate: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guard bounds every wait for the server: far longer than anything takes,
// so only a real hang trips it.
const guard = 30 * time.Second

// kp runs kpstate in-process and returns its exit code and output.
func kp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// principal is one made with kpstate token new: its token and the
// [[principal]] lines for the configuration.
type principal struct {
	id, token, entry string
}

func newPrincipal(t *testing.T, id string, admin bool) principal {
	t.Helper()
	args := []string{"token", "new", "--id", id}
	if admin {
		args = append(args, "--admin")
	}
	code, out, errs := kp(t, args...)
	tok, entry, ok := strings.Cut(out, "\n")
	if code != exitOK || !ok || tok == "" {
		t.Fatalf("token new: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	return principal{id: id, token: tok, entry: entry}
}

// serverConfig is what a test's kpstate.toml says.
type serverConfig struct {
	dataDir    string
	listen     string // default 127.0.0.1:0
	principals []principal
	tls        *testTLS
	extra      string // more top-level keys
	inspector  bool
	metrics    bool
	logFormat  string // default json, which the tests' waitLog parses
}

// write writes the configuration as dir/kpstate.toml and returns its path.
func (sc serverConfig) write(t *testing.T, dir string) string {
	t.Helper()
	if sc.listen == "" {
		sc.listen = "127.0.0.1:0"
	}
	if sc.logFormat == "" {
		sc.logFormat = "json"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\nlisten = %q\nlog_format = %q\nlog_level = \"debug\"\ninspector = %t\n", sc.dataDir, sc.listen, sc.logFormat, sc.inspector)
	if sc.metrics {
		b.WriteString("metrics_listen = \"127.0.0.1:0\"\n")
	}
	b.WriteString(sc.extra)
	if sc.tls != nil {
		fmt.Fprintf(&b, "\n[tls]\ncert_file = %q\nkey_file = %q\n", sc.tls.certFile, sc.tls.keyFile)
	}
	for _, p := range sc.principals {
		b.WriteString("\n" + p.entry)
	}
	file := filepath.Join(dir, "kpstate.toml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// testTLS is a CA and a server certificate for 127.0.0.1 made for one test.
type testTLS struct {
	certFile, keyFile string
	caFile            string         // the CA's certificate, for a client's --cacert
	pool              *x509.CertPool // trusts the CA
}

func newTLS(t *testing.T, dir string) *testTLS {
	t.Helper()
	ca := testtls.New(t, "kpstate test CA")
	f := ca.WriteFiles(t, dir)
	return &testTLS{certFile: f.Cert, keyFile: f.Key, caFile: f.CA, pool: ca.Pool}
}

// proc is a running `kpstate serve` child process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	start  startLine
	client *http.Client // trusts the test CA under TLS
	exited chan int     // the exit code, once

	// The log: every line of stderr, the JSON records among them, and a
	// cursor: waitLog reads each record once. The reader never blocks on
	// the test, so the server never blocks on its stderr.
	mu      sync.Mutex
	stderr  []string
	records []map[string]any
	cursor  int
	more    chan struct{} // capacity 1: records grew
	logEnd  chan struct{} // stderr ended
}

// startServe runs kpstate serve --json --config file and waits for its
// start line. The process is killed (by PID) and reaped at the end of the
// test, if it has not exited by then.
func startServe(t *testing.T, file string, tt *testTLS) *proc {
	t.Helper()
	return startServeCmd(t, exec.Command(kpstateBin, "serve", "--json", "--config", file), tt)
}

// startServeCmd is startServe for a command line of the test's own (one
// under prlimit, say) that runs kpstate serve --json in the same process.
func startServeCmd(t *testing.T, cmd *exec.Cmd, tt *testTLS) *proc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, exited: make(chan int, 1), client: &http.Client{Timeout: guard}, more: make(chan struct{}, 1), logEnd: make(chan struct{})}
	if tt != nil {
		p.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tt.pool}}
	}
	lines := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		defer readers.Done()
		defer close(p.logEnd)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			isJSON := json.Unmarshal(sc.Bytes(), &rec) == nil
			p.mu.Lock()
			p.stderr = append(p.stderr, sc.Text())
			if isJSON {
				p.records = append(p.records, rec)
			}
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		cmd.Wait()
		p.exited <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("kpstate serve printed no start line: exit %d\n%s", <-p.exited, p.log())
		}
		if err := json.Unmarshal([]byte(line), &p.start); err != nil {
			t.Fatalf("start line %q: %v", line, err)
		}
	case <-time.After(guard):
		t.Fatalf("kpstate serve printed no start line in %v\n%s", guard, p.log())
	}
	return p
}

// log returns the process's stderr so far.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr, "\n")
}

// waitLog returns the next log record with message msg and the records
// before it since the last waitLog, failing the test if none comes.
func (p *proc) waitLog(msg string) (map[string]any, []map[string]any) {
	p.t.Helper()
	return p.scanLog(msg, func(map[string]any) bool { return true }, true)
}

// findLog returns a log record with message msg for which match holds,
// wherever it is in the log (waitLog's cursor neither read nor moved).
func (p *proc) findLog(msg string, match func(map[string]any) bool) map[string]any {
	p.t.Helper()
	rec, _ := p.scanLog(msg, match, false)
	return rec
}

func (p *proc) scanLog(msg string, match func(map[string]any) bool, next bool) (map[string]any, []map[string]any) {
	p.t.Helper()
	timeout := time.After(guard)
	for {
		p.mu.Lock()
		from := 0
		if next {
			from = p.cursor
		}
		for i := from; i < len(p.records); i++ {
			if p.records[i]["msg"] == msg && match(p.records[i]) {
				rec, before := p.records[i], slices.Clone(p.records[from:i])
				if next {
					p.cursor = i + 1
				}
				p.mu.Unlock()
				return rec, before
			}
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.logEnd:
			select {
			case <-p.more: // a last line came with the end
				continue
			default:
			}
			p.t.Fatalf("the server's log ended before %q\n%s", msg, p.log())
		case <-timeout:
			p.t.Fatalf("no %q in the server's log\n%s", msg, p.log())
		}
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait returns the exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case code := <-p.exited:
		p.exited <- code // for the cleanup
		return code
	case <-time.After(guard):
		p.t.Fatalf("kpstate serve did not exit\n%s", p.log())
		return -1
	}
}

// get makes an HTTP GET of path on the server, with tok as bearer token
// unless empty, and returns the status and body.
func (p *proc) get(path, tok string) (int, string) {
	p.t.Helper()
	base := "http" + strings.TrimPrefix(p.start.Endpoint, "ws")
	if strings.HasPrefix(path, "http") {
		base = ""
	}
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dial opens a WebSocket session as tok's principal.
func (p *proc) dial(tok string) (*wstransport.ClientConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c, err := wstransport.Dial(ctx, p.start.URL, wstransport.DialOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}, HTTPClient: p.client})
	if err == nil {
		p.t.Cleanup(func() { c.Abort() })
	}
	return c, err
}

func (p *proc) mustDial(tok string) *session {
	p.t.Helper()
	c, err := p.dial(tok)
	if err != nil {
		p.t.Fatalf("dial: %v", err)
	}
	return &session{t: p.t, c: c}
}

// session is one WebSocket session: requests numbered from 1; watch
// messages that arrive while a request waits for its answer are kept for
// recv, in order.
type session struct {
	t       *testing.T
	c       *wstransport.ClientConn
	id      uint64
	pending []*pb.ServerMessage
}

// recv returns the next server message, or the error that ended the
// connection.
func (s *session) recv() (*pb.ServerMessage, error) {
	if len(s.pending) > 0 {
		m := s.pending[0]
		s.pending = s.pending[1:]
		return m, nil
	}
	type res struct {
		m   *pb.ServerMessage
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := s.c.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(guard):
		s.t.Fatal("no message from the server")
		return nil, nil
	}
}

func (s *session) mustRecv() *pb.ServerMessage {
	s.t.Helper()
	m, err := s.recv()
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	return m
}

// call sends request s.id and returns its answer.
func (s *session) call(m *pb.ClientMessage) *pb.StateStoreResult {
	s.t.Helper()
	if err := s.c.Send(m); err != nil {
		s.t.Fatalf("send: %v", err)
	}
	var held []*pb.ServerMessage
	defer func() { s.pending = append(held, s.pending...) }()
	for {
		m, err := s.c.Recv()
		if err != nil {
			s.t.Fatalf("recv, waiting for the answer to request %d: %v", s.id, err)
		}
		if r := m.GetResult(); r.GetRequestId() == s.id {
			return r
		}
		held = append(held, m)
	}
}

func (s *session) put(ns, key string, seed int) *pb.StateStoreResult {
	s.t.Helper()
	s.id++
	return s.call(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: s.id,
		Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, seed)}}})
}

func (s *session) getState(ns, key string) *pb.StateStoreResult {
	s.t.Helper()
	s.id++
	return s.call(&pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: s.id, Namespace: ns, Key: key}}})
}

func (s *session) watch(watchID, ns string) *pb.StateStoreResult {
	s.t.Helper()
	s.id++
	return s.call(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{RequestId: s.id, WatchId: watchID, Namespace: ns}}})
}

// errCode is the error code of an answer (UNSPECIFIED for a success).
func errCode(r *pb.StateStoreResult) pb.StateStoreErrorCode { return r.GetError().GetCode() }
