package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/internal/testtls"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// Every test ends its clients and servers, so nothing may be left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// hangGuard bounds every wait: far longer than any answer takes, so only a
// real hang trips it.
const hangGuard = 20 * time.Second

// The test servers' principals, by bearer token.
const (
	adminToken = "admin-token"
	aliceToken = "alice-token"
)

var (
	admin  = statestore.Principal{ID: "coordinator", Admin: true}
	alice  = statestore.Principal{ID: "alice"}
	tokens = map[string]statestore.Principal{adminToken: admin, aliceToken: alice}
)

// errUnknownToken is the test authenticator's refusal, which a refused
// client must be able to read.
var errUnknownToken = errors.New("the token names no principal of this test server")

// authenticate maps bearer tokens to principals, as an embedder's session
// layer would.
func authenticate(r *http.Request) (statestore.Principal, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return statestore.Principal{}, errors.New("no bearer token")
	}
	p, ok := tokens[tok]
	if !ok {
		return statestore.Principal{}, errUnknownToken
	}
	return p, nil
}

// serverOptions shape a test server.
type serverOptions struct {
	limits      quota.Limits
	clock       clock.Clock // nil: the wall clock
	faults      *fault.Hooks
	schemas     *schema.Registry // nil: the built-in schemas
	tls         *tls.Config      // serve wss:// with it
	unavailable error            // serve no store: every request is UNAVAILABLE with this cause
	addr        string           // listen here ("" picks a port on 127.0.0.1)
	dir         string           // the store's directory ("" makes one)
	// refuse, when set and true, makes the authenticator refuse everyone.
	refuse *atomic.Bool
}

// server is a state store served by ops/inspector (the wire protocol at
// /ws and /api/info) over net/http on a loopback listener.
type server struct {
	opts    serverOptions
	dir     string
	ownDir  bool
	store   *statestore.Store
	insp    atomic.Pointer[inspector.Server]
	ended   chan error // one per session that ended
	srv     *http.Server
	served  chan struct{}
	addr    string
	url     string // the client's endpoint: ws://ADDR or wss://ADDR
	handled atomic.Int64
}

// newServer starts a server; it needs no testing.T, so the examples use it.
func newServer(o serverOptions) (*server, error) {
	s := &server{}
	if o.dir == "" {
		dir, err := os.MkdirTemp("", "client-test-")
		if err != nil {
			return nil, err
		}
		o.dir, s.ownDir = dir, true
	}
	if err := s.start(o); err != nil {
		s.removeDir()
		return nil, err
	}
	return s, nil
}

// start opens the store in o.dir and serves it on o.addr.
func (s *server) start(o serverOptions) error {
	s.opts, s.dir, s.ended, s.served = o, o.dir, make(chan error, 64), make(chan struct{})
	if o.unavailable == nil {
		st, err := statestore.Open(statestore.Options{Dir: s.dir, Limits: o.limits, Clock: o.clock, Faults: o.faults, Schemas: o.schemas, CheckpointBytes: -1})
		if err != nil {
			return err
		}
		s.store = st
	}
	insp, err := s.newInspector()
	if err != nil {
		s.closeStore()
		return err
	}
	s.insp.Store(insp)
	addr := o.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		insp.Close()
		s.closeStore()
		return err
	}
	s.addr = ln.Addr().String()
	s.url = "ws://" + s.addr
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
		s.url = "wss://" + s.addr
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ErrorLog: log.New(io.Discard, "", 0)}
	go func(srv *http.Server, served chan struct{}) {
		defer close(served)
		srv.Serve(ln)
	}(s.srv, s.served)
	return nil
}

func (s *server) newInspector() (*inspector.Server, error) {
	auth := wstransport.AuthenticatorFunc(func(r *http.Request) (statestore.Principal, error) {
		if s.opts.refuse != nil && s.opts.refuse.Load() {
			return statestore.Principal{}, errors.New("tokens are being rotated")
		}
		return authenticate(r)
	})
	return inspector.New(inspector.Config{Store: s.store, Cause: s.opts.unavailable, Auth: auth,
		Transport: wstransport.Options{Ended: func(_ statestore.Principal, err error) {
			select {
			case s.ended <- err:
			default:
			}
		}}})
}

func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.handled.Add(1)
	s.insp.Load().ServeHTTP(w, r)
}

// startServer starts a server ended with the test.
func startServer(t testing.TB, o serverOptions) *server {
	t.Helper()
	s, err := newServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// stop ends every session (1001, going away), the listener and the store,
// and keeps the store's directory for restart. It is idempotent, so a test
// may stop a server its cleanup stops again.
func (s *server) stop() {
	if s.srv == nil {
		return
	}
	s.insp.Load().Close()
	s.srv.Close()
	<-s.served
	s.srv = nil
	s.closeStore()
}

// close stops the server for good, removing the directory it made.
func (s *server) close() {
	s.stop()
	s.removeDir()
}

func (s *server) closeStore() {
	if s.store != nil {
		s.store.Close()
		s.store = nil
	}
}

func (s *server) removeDir() {
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
}

// restart stops the server and starts it again on the same address with
// the store reopened from the same directory, as a server restart would.
func (s *server) restart(t testing.TB) {
	t.Helper()
	s.stop()
	o := s.opts
	o.addr, o.dir = s.addr, s.dir
	if err := s.start(o); err != nil {
		t.Fatal(err)
	}
}

// dropSessions ends every session (1001) and goes on serving: the store
// stays open, new sessions are accepted.
func (s *server) dropSessions(t testing.TB) {
	t.Helper()
	n, err := s.newInspector()
	if err != nil {
		t.Fatal(err)
	}
	s.insp.Swap(n).Close()
}

// waitEnded returns the error of the next session to end.
func (s *server) waitEnded(t testing.TB) error {
	t.Helper()
	select {
	case err := <-s.ended:
		return err
	case <-time.After(hangGuard):
		t.Fatal("no session ended")
		return nil
	}
}

// put writes a media intent directly into the store.
func (s *server) put(t testing.TB, ns, key string, seed int) statestore.Entry {
	t.Helper()
	e, err := s.store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, seed)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// dial connects a client to urls with the admin token and a fast backoff,
// closed with the test.
func dial(t testing.TB, mod func(*client.Config), urls ...string) *client.Client {
	t.Helper()
	cfg := client.Config{Endpoints: urls, Token: adminToken, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// putReq is a request writing a media intent of about 300 bytes.
func putReq(ns, key string, seed int) statestore.PutRequest {
	return statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, seed)}
}

// mustPut writes through c.
func mustPut(t testing.TB, c *client.Client, req statestore.PutRequest) statestore.Entry {
	t.Helper()
	e, err := c.Put(ctx, req)
	if err != nil {
		t.Fatalf("put %s/%s: %v", req.Namespace, req.Key, err)
	}
	return e
}

// next returns the watch's next event, failing on an error or a hang.
func next(t testing.TB, w *client.Watch) client.WatchEvent {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	ev, err := w.Next(cctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return ev
}

// wantCode fails unless err is a *statestore.Error with code (and, when
// field is not "", that field).
func wantCode(t testing.TB, err error, code statestore.Code, field string) *statestore.Error {
	t.Helper()
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != code || statestore.CodeOf(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if field != "" && se.Field != field {
		t.Fatalf("got %v naming field %q, want %q", err, se.Field, field)
	}
	return se
}

// eventually waits, bounded, until cond holds: for state only the server
// can see (how many watches it holds).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(hangGuard)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not after %v", what, hangGuard)
		}
	}
}

// recordLink is a stateclient.Link that records what reaches it, in order,
// and signals each arrival.
type recordLink struct {
	mu      sync.Mutex
	log     []string
	refuse  func(watch.Message) error // nil: accept everything
	arrived chan string
}

func newRecordLink() *recordLink { return &recordLink{arrived: make(chan string, 1024)} }

func (l *recordLink) add(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
	l.arrived <- s
}

func (l *recordLink) Deliver(m watch.Message) error {
	var s string
	switch m := m.(type) {
	case *watch.Snapshot:
		s = fmt.Sprintf("snapshot %s %d entries", m.WatchID, len(m.Entries))
	case *watch.Update:
		s = fmt.Sprintf("update %s %d %s %s", m.WatchID, m.Sequence, m.Kind, m.Key)
	case *watch.Closed:
		s = fmt.Sprintf("closed %s %s", m.WatchID, m.Reason)
	}
	l.mu.Lock()
	refuse := l.refuse
	l.mu.Unlock()
	var err error
	if refuse != nil {
		err = refuse(m)
	}
	l.add(s)
	return err
}

// setRefuse makes Deliver return refuse's error (nil: accept everything).
func (l *recordLink) setRefuse(refuse func(watch.Message) error) {
	l.mu.Lock()
	l.refuse = refuse
	l.mu.Unlock()
}

func (l *recordLink) Disconnected() { l.add("disconnected") }
func (l *recordLink) Reconnected()  { l.add("reconnected") }

// waitFor reads arrivals until one equal to want, returning those before.
func (l *recordLink) waitFor(t testing.TB, want string) []string {
	t.Helper()
	var before []string
	deadline := time.After(hangGuard)
	for {
		select {
		case s := <-l.arrived:
			if s == want {
				return before
			}
			before = append(before, s)
		case <-deadline:
			t.Fatalf("the link never saw %q; saw %v", want, before)
		}
	}
}

// logRecorder is a slog.Handler keeping every record's message and
// attributes, so a test can wait for what the client reports.
type logRecorder struct {
	mu      sync.Mutex
	records []string
	added   chan struct{} // signalled on every record
}

func newLogRecorder() *logRecorder { return &logRecorder{added: make(chan struct{}, 1)} }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, b.String())
	h.mu.Unlock()
	select {
	case h.added <- struct{}{}:
	default:
	}
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// waitFor returns the first record from the n-th on (0: any) that match
// accepts, and the index after it.
func (h *logRecorder) waitFor(t testing.TB, from int, what string, match func(string) bool) (string, int) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		h.mu.Lock()
		for i := from; i < len(h.records); i++ {
			if r := h.records[i]; match(r) {
				h.mu.Unlock()
				return r, i + 1
			}
		}
		h.mu.Unlock()
		select {
		case <-h.added:
		case <-deadline:
			t.Fatalf("the client never logged %s", what)
			return "", 0
		}
	}
}

// containing matches records holding s.
func containing(s string) func(string) bool {
	return func(r string) bool { return strings.Contains(r, s) }
}

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it:
// the server's TLS config and a pool trusting the CA.
func testCA(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	ca := testtls.New(t, "client test CA")
	return ca.Server, ca.Pool
}

// scripted is a WebSocket server playing a test's script instead of the
// dispatcher, for what a real server never does (a sequence gap) or does
// at moments a test cannot choose (dropping a connection while a request
// is in flight). It answers UnwatchState itself (ok), so a client's Close
// does not wait for the script.
type scripted struct {
	url   string
	conns chan *scriptConn
	srv   *http.Server
	done  chan struct{} // closed at cleanup: every handler returns
}

type scriptConn struct {
	t  testing.TB
	ws *websocket.Conn
	in chan *pb.ClientMessage // closed when the connection ends
}

func startScripted(t testing.TB) *scripted {
	t.Helper()
	s := &scripted{conns: make(chan *scriptConn, 16), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "ws://" + ln.Addr().String()
	s.srv = &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		c := &scriptConn{t: t, ws: ws, in: make(chan *pb.ClientMessage, 256)}
		read := make(chan struct{})
		go func() {
			defer close(read)
			c.read()
		}()
		s.conns <- c
		select {
		case <-read:
		case <-s.done:
		}
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
		<-served
	})
	return s
}

// read receives the client's messages until the connection ends (so a
// client's closing handshake is answered at once).
func (c *scriptConn) read() {
	defer close(c.in)
	for {
		_, b, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		m := &pb.ClientMessage{}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		if u := m.GetUnwatchState(); u != nil {
			c.write(&pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: u.GetRequestId(),
				Result: &pb.StateStoreResult_Ok{Ok: &pb.StateStoreOk{}}}}})
		}
		c.in <- m
	}
}

// accept returns the next connection.
func (s *scripted) accept(t testing.TB) *scriptConn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(hangGuard):
		t.Fatal("the client never connected")
		return nil
	}
}

func (c *scriptConn) recv() *pb.ClientMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatal("scripted server: the connection ended")
		}
		return m
	case <-time.After(hangGuard):
		c.t.Fatal("scripted server: nothing received")
		return nil
	}
}

func (c *scriptConn) send(m *pb.ServerMessage) {
	c.t.Helper()
	if err := c.write(m); err != nil {
		c.t.Fatalf("scripted server: write: %v", err)
	}
}

func (c *scriptConn) write(m *pb.ServerMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageBinary, b)
}

// snapshotAnswer answers a WatchState with an empty snapshot at rev.
func snapshotAnswer(w *pb.WatchState, rev uint64) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: w.GetRequestId(),
		Result: &pb.StateStoreResult_Watch{Watch: &pb.StateStoreWatchSnapshot{WatchId: w.GetWatchId(), SnapshotRevision: rev}}}}}
}

// deleteUpdate is a DELETE update of key.
func deleteUpdate(watchID string, seq, rev uint64, key string) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{WatchId: watchID,
		WatchSequence: seq, Revision: rev, Kind: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_DELETE, Key: key}}}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func slogOf(h slog.Handler) *slog.Logger { return slog.New(h) }

// proxy relays loopback TCP connections to a server and can freeze the
// ones open now: they stay open but carry nothing more, as a network that
// silently stopped delivering packets would. Connections made later are
// relayed normally.
type proxy struct {
	url string
	ln  net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	frozen chan struct{} // closed by freeze; a new one for later connections
	conns  []net.Conn
	closed bool
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "ws://" + ln.Addr().String(), ln: ln, frozen: make(chan struct{})}
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				in.Close()
				out.Close()
				return
			}
			p.conns = append(p.conns, in, out)
			frozen := p.frozen
			p.mu.Unlock()
			p.wg.Go(func() { relay(out, in, frozen) })
			p.wg.Go(func() { relay(in, out, frozen) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// relay copies src to dst until either fails; once frozen is closed it
// drops what it reads instead.
func relay(dst, src net.Conn, frozen <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		select {
		case <-frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

// freeze stops the connections open now from carrying anything.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.frozen)
	p.frozen = make(chan struct{})
}
