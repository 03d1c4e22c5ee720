package workerproc_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/testtls"
	"github.com/keeppeek/statestore/internal/workerproc"
	"github.com/keeppeek/statestore/worker/mediasim"
)

// The binaries TestMain builds once: kpstate serve is the store's server
// and kpworker the worker, each run as child processes as an operator
// would run them.
var kpstateBin, kpworkerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "workerproc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/keeppeek/statestore/cmd/kpstate", "github.com/keeppeek/statestore/internal/workerproc/cmd/kpworker")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	kpstateBin, kpworkerBin = filepath.Join(dir, "kpstate"), filepath.Join(dir, "kpworker")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guard bounds every wait: far longer than anything takes, so only a hang
// trips it.
const guard = 30 * time.Second

// lockedBuffer is a child's stderr, written by exec's copier and read by
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a process the test started: its stdout as lines on a channel,
// its stderr kept for failure messages. It is killed by its PID and
// reaped at the end of the test if it is still running.
type child struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	lines  chan string // stdout, closed at its end
	stderr *lockedBuffer
	exited chan struct{} // closed once reaped
	code   int           // the exit code, once exited is closed
}

func startChild(t *testing.T, name, bin string, args ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, cmd: command(bin, args...), lines: make(chan string, 4096),
		stderr: &lockedBuffer{}, exited: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.cmd.Wait() // after the pipe is read to its end, as Wait closes it
		c.code = c.cmd.ProcessState.ExitCode()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			select {
			case <-c.exited:
			case <-time.After(guard):
				t.Errorf("%s (pid %d) was killed but not reaped", name, c.cmd.Process.Pid)
			}
		}
		if out := c.stderr.String(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector reported:\n%s", name, out)
		}
	})
	return c
}

// command runs bin. Under the race detector the children run with it too,
// without its one-second pause at exit, which every token new and every
// stopped worker would otherwise add.
func command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	if raceEnabled {
		cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	return cmd
}

// signal sends sig to the child's PID.
func (c *child) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %s to %s: %v", sig, c.name, err)
	}
}

// wait returns the exit code once the child has exited.
func (c *child) wait() int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.code
	case <-time.After(guard):
		c.t.Fatalf("%s did not exit\n%s", c.name, c.stderr)
		return -1
	}
}

// kill ends the child with SIGKILL, as a crash would, and reaps it.
func (c *child) kill() {
	c.t.Helper()
	c.signal(syscall.SIGKILL)
	if code := c.wait(); code != -1 {
		c.t.Fatalf("%s exited %d after SIGKILL, want killed by the signal", c.name, code)
	}
}

// server is a running kpstate serve.
type server struct {
	*child
	endpoint string // wss://127.0.0.1:PORT
	addr     string // 127.0.0.1:PORT
}

// startServer runs kpstate serve --json on the configuration file and
// waits for its start line.
func startServer(t *testing.T, config string) *server {
	t.Helper()
	c := startChild(t, "kpstate serve", kpstateBin, "serve", "--json", "--config", config)
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("kpstate serve printed no start line: exit %d\n%s", c.wait(), c.stderr)
		}
		var start struct{ Endpoint, State string }
		if err := json.Unmarshal([]byte(line), &start); err != nil || start.State != "open" {
			t.Fatalf("start line %q: %v", line, err)
		}
		return &server{child: c, endpoint: start.Endpoint, addr: strings.TrimPrefix(start.Endpoint, "wss://")}
	case <-time.After(guard):
		t.Fatalf("kpstate serve printed no start line\n%s", c.stderr)
		return nil
	}
}

// principal is one made with kpstate token new: its token in a file for
// the worker, and its [[principal]] entry for the server's configuration.
type principal struct {
	id, token, tokenFile, entry string
}

func newPrincipal(t *testing.T, dir, id string, admin bool) principal {
	t.Helper()
	args := []string{"token", "new", "--id", id}
	if admin {
		args = append(args, "--admin")
	}
	out, err := command(kpstateBin, args...).Output()
	tok, entry, ok := strings.Cut(string(out), "\n")
	if err != nil || !ok || tok == "" {
		t.Fatalf("kpstate token new --id %s: %v, %q", id, err, out)
	}
	p := principal{id: id, token: tok, tokenFile: filepath.Join(dir, id+".token"), entry: entry}
	if err := os.WriteFile(p.tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeConfig writes kpstate.toml for a TLS server on listen.
func writeConfig(t *testing.T, file, dataDir, listen string, tlsFiles testtls.Files, principals []principal) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\nlisten = %q\nlog_format = \"json\"\nlog_level = \"info\"\n", dataDir, listen)
	fmt.Fprintf(&b, "\n[tls]\ncert_file = %q\nkey_file = %q\n", tlsFiles.Cert, tlsFiles.Key)
	for _, p := range principals {
		b.WriteString("\n" + p.entry)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dial is a client of the test's own, as p.
func dial(t *testing.T, s *server, p principal, tc *testtls.CA) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.endpoint}, Token: p.token, TLS: tlsFor(tc), MaxBackoff: 250 * time.Millisecond})
	if err != nil {
		t.Fatalf("dial as %s: %v", p.id, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// worker is a running kpworker: its events, decoded, in order.
type worker struct {
	*child
	events  chan workerproc.Line
	backlog []workerproc.Line // read, not yet returned by waitFor
	history []workerproc.Line // every event read, for failure messages
}

// startWorker runs kpworker with args and waits for its first snapshot.
func startWorker(t *testing.T, name string, args ...string) *worker {
	t.Helper()
	w := &worker{child: startChild(t, name, kpworkerBin, args...), events: make(chan workerproc.Line, 4096)}
	go func() {
		defer close(w.events)
		for line := range w.lines {
			var l workerproc.Line
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Kind == "" {
				l = workerproc.Line{Kind: "not-an-event", Detail: line}
			}
			w.events <- l
		}
	}()
	if l := w.waitFor(workerproc.KindStarted, ""); !strings.Contains(l.Detail, "principal ") {
		t.Fatalf("%s: started %q", name, l.Detail)
	}
	w.waitFor("resynced", "")
	return w
}

// waitFor returns the first event of kind for intent ("": any) that no
// earlier waitFor returned and that every match accepts, reading events
// until one arrives. Events it passes over are kept for later waits, so
// the order in which a worker reports intents does not matter. The guard
// only turns a hang into a failure.
func (w *worker) waitFor(kind, intent string, match ...func(workerproc.Line) bool) workerproc.Line {
	w.t.Helper()
	ok := func(l workerproc.Line) bool {
		if l.Kind != kind || (intent != "" && l.Intent != intent) {
			return false
		}
		for _, m := range match {
			if !m(l) {
				return false
			}
		}
		return true
	}
	for i, l := range w.backlog {
		if ok(l) {
			w.backlog = append(w.backlog[:i], w.backlog[i+1:]...)
			return l
		}
	}
	deadline := time.After(guard)
	for {
		select {
		case l, open := <-w.events:
			if !open {
				w.t.Fatalf("%s exited (code %d) before a %s event for %q\n%s\nstderr:\n%s", w.name, w.wait(), kind, intent, w.seen(), w.stderr)
			}
			w.history = append(w.history, l)
			if l.Kind == "not-an-event" {
				w.t.Fatalf("%s printed a line that is not an event: %q", w.name, l.Detail)
			}
			if ok(l) {
				return l
			}
			w.backlog = append(w.backlog, l)
		case <-deadline:
			w.t.Fatalf("%s: no %s event for %q\n%s\nstderr:\n%s", w.name, kind, intent, w.seen(), w.stderr)
		}
	}
}

// mark forgets the events read so far and those already waiting, so the
// next waits see only what happens from now on.
func (w *worker) mark() {
	for {
		select {
		case l, open := <-w.events:
			if !open {
				return
			}
			w.history = append(w.history, l)
			continue
		default:
		}
		break
	}
	w.backlog = nil
}

// noneSeen fails if the worker reported an event of kind that no waitFor
// returned, among those it printed so far.
func (w *worker) noneSeen(kind string) {
	w.t.Helper()
	for {
		select {
		case l, open := <-w.events:
			if open {
				w.history = append(w.history, l)
				w.backlog = append(w.backlog, l)
				continue
			}
		default:
		}
		break
	}
	for _, l := range w.backlog {
		if l.Kind == kind {
			w.t.Fatalf("%s: unexpected %s %s: %s", w.name, l.Kind, l.Intent, l.Detail)
		}
	}
}

// seen renders the events read so far.
func (w *worker) seen() string {
	var b strings.Builder
	for _, l := range w.history {
		fmt.Fprintf(&b, "  %s %s %s: %s %s\n", l.Time.Format("15:04:05.000"), l.Kind, l.Intent, l.Detail, l.Error)
	}
	return b.String()
}

// detail matches an event whose detail contains s.
func detail(s string) func(workerproc.Line) bool {
	return func(l workerproc.Line) bool { return strings.Contains(l.Detail, s) }
}

// startRecord is one StartPublication as the media server's stand-in
// received it: who sent it, when, and the lease as the store held it at
// that moment.
type startRecord struct {
	principal string
	at        time.Time
	lease     statestore.Entry
	leaseErr  error
}

// ownerChange is a change of who owns the output variant, sampled after
// every change of the simulator.
type ownerChange struct {
	at    time.Time
	owner string // "" when nobody publishes it
}

// media is the media server's stand-in: a mediasim.Server in the test
// process, served over loopback HTTP by its Handler, behind a recorder
// that reads the lease at every StartPublication and can drop joins.
type media struct {
	sim *mediasim.Server
	url string

	mu        sync.Mutex
	starts    []startRecord
	owners    []ownerChange
	twoOwners []string // samples with two publications of the output at once
	dropJoins int      // answer this many joins 503, as a media server that is down would
	joins     []string // every join request, as "principal group"
}

// newMedia serves sim on loopback. leaseOf reads the lease of the output
// variant (as an administrator of the test's own) for every
// StartPublication before the simulator sees it; output names the
// variant whose owners are followed.
func newMedia(t *testing.T, sim *mediasim.Server, output string, leaseOf func(context.Context) (statestore.Entry, error)) *media {
	m := &media{sim: sim}
	api := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := r.Header.Get(mediasim.PrincipalHeader)
		switch r.URL.Path {
		case "/v1/publication/start":
			rec := startRecord{principal: who, at: time.Now()}
			ctx, cancel := context.WithTimeout(r.Context(), guard)
			rec.lease, rec.leaseErr = leaseOf(ctx)
			cancel()
			m.mu.Lock()
			m.starts = append(m.starts, rec)
			m.mu.Unlock()
		case "/v1/join":
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct{ Group string }
			json.Unmarshal(body, &req) // the simulator judges the body; this only records it
			m.mu.Lock()
			drop := m.dropJoins > 0
			if drop {
				m.dropJoins--
			}
			m.joins = append(m.joins, who+" "+req.Group)
			m.mu.Unlock()
			if drop {
				http.Error(w, "the media server is restarting", http.StatusServiceUnavailable)
				return
			}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		last := ""
		for {
			changed := sim.Changed() // before reading, so no change is missed
			var owners []string
			for _, b := range sim.Bindings() {
				if b.Publish && b.VariantID == output {
					owners = append(owners, b.Principal)
				}
			}
			now := ""
			if len(owners) > 0 {
				now = owners[0]
			}
			m.mu.Lock()
			if len(owners) > 1 {
				m.twoOwners = append(m.twoOwners, strings.Join(owners, ", "))
			}
			if now != last || len(m.owners) == 0 {
				m.owners = append(m.owners, ownerChange{at: time.Now(), owner: now})
				last = now
			}
			m.mu.Unlock()
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return m
}

// calls returns the commands principal sent, in order.
func (m *media) calls(principal string) []string {
	var out []string
	for _, c := range m.sim.Calls() {
		if c.Principal == principal {
			out = append(out, callString(c))
		}
	}
	return out
}

// callString is a command as "Command variant" (the variant asked for, or
// for Unsubscribe and StopPublication the binding ended), with " error"
// when refused.
func callString(c mediasim.Call) string {
	v := c.Pub.VariantID
	switch c.Command {
	case "Subscribe":
		v = c.Sub.VariantID
	case "Unsubscribe", "StopPublication":
		v = c.ID
	}
	s := c.Command + " " + v
	if c.Err != nil {
		s += " error"
	}
	return s
}

// joinRequests returns every join request so far, as "principal group".
func (m *media) joinRequests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.joins...)
}

// dropNextJoins makes the next n joins fail with 503.
func (m *media) dropNextJoins(n int) {
	m.mu.Lock()
	m.dropJoins += n
	m.mu.Unlock()
}

// startsBy returns the StartPublication records of principal.
func (m *media) startsBy(principal string) []startRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []startRecord
	for _, s := range m.starts {
		if s.principal == principal {
			out = append(out, s)
		}
	}
	return out
}

// ownerLog returns the owner changes so far and the samples that saw two
// owners.
func (m *media) ownerLog() ([]ownerChange, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ownerChange(nil), m.owners...), append([]string(nil), m.twoOwners...)
}

// leaseEvent is one change of the lease key, as the test's own watch saw it.
type leaseEvent struct {
	kind     string // PUT, DELETE, EXPIRE, or SNAPSHOT (the key as a snapshot holds it)
	owner    string
	revision uint64
	updated  int64 // ms
	expires  int64 // ms
}

// leaseLog follows one key with a watch of the test's own and keeps every
// change, across re-snapshots.
type leaseLog struct {
	mu     sync.Mutex
	events []leaseEvent
	more   chan struct{} // capacity 1: events grew
}

func followLease(t *testing.T, c *client.Client, ns, key string) *leaseLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, ns, key)
	if err != nil {
		t.Fatal(err)
	}
	l := &leaseLog{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := w.Next(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				continue // a re-watch refused while the server restarts: Next tries again
			}
			l.mu.Lock()
			switch ev.Kind {
			case client.EventSnapshot, client.EventResnapshot:
				for _, e := range ev.Entries {
					if e.Key == key {
						l.events = append(l.events, leaseEvent{kind: "SNAPSHOT", owner: e.Owner, revision: e.Revision, updated: e.UpdatedMs, expires: e.ExpiresMs})
					}
				}
			case client.EventUpdate:
				if ev.Key == key {
					le := leaseEvent{kind: ev.Update.String(), revision: ev.Revision}
					if ev.Entry != nil {
						le.owner, le.updated, le.expires = ev.Entry.Owner, ev.Entry.UpdatedMs, ev.Entry.ExpiresMs
					}
					l.events = append(l.events, le)
				}
			}
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Close()
		<-done
	})
	return l
}

// since returns the lease events from index i on.
func (l *leaseLog) since(i int) []leaseEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaseEvent(nil), l.events[min(i, len(l.events)):]...)
}

// len is how many events the log holds.
func (l *leaseLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// waitUntil returns the events from index from on once cond holds for
// them, failing the test if it does not within the guard.
func (l *leaseLog) waitUntil(t *testing.T, from int, what string, cond func([]leaseEvent) bool) []leaseEvent {
	t.Helper()
	deadline := time.After(guard)
	for {
		evs := l.since(from)
		if cond(evs) {
			return evs
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("the lease's watch never showed %s; it saw %+v", what, evs)
		}
	}
}

// tlsFor trusts the test's CA.
func tlsFor(ca *testtls.CA) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
}
