package mediasim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// TestMain fails the package on a goroutine left running: a Remote's
// poller must end with Close, and a long poll with its client.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit only bounds a wait for something that must happen; no test
// sleeps to let something happen.
const waitLimit = 10 * time.Second

// fast backs off in milliseconds, so an outage's recovery is seen at once.
var fast = mediasim.RemoteOptions{RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond}

// serve serves h on a loopback server for the test. Its Close runs after
// the Remotes' (cleanups run last-registered first), so no long poll
// holds it open.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func dial(t *testing.T, baseURL, principal string, opts mediasim.RemoteOptions) *mediasim.Remote {
	t.Helper()
	r, err := mediasim.Dial(baseURL, principal, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(waitLimit):
		t.Fatalf("Changed did not close after %s", what)
	}
}

// gate holds every long poll (a GET /v1/changed with a wait) before the
// simulator's handler sees it, until the test releases it, so a test
// decides exactly what happens while a poll is on its way.
type gate struct {
	next  http.Handler
	polls chan chan struct{}
}

func newGate(next http.Handler) *gate { return &gate{next: next, polls: make(chan chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/changed" && r.URL.Query().Has("wait") {
		release := make(chan struct{})
		select {
		case g.polls <- release:
		case <-r.Context().Done():
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// held returns the release of the next long poll, once it has arrived.
func (g *gate) held(t *testing.T) chan struct{} {
	t.Helper()
	select {
	case rel := <-g.polls:
		return rel
	case <-time.After(waitLimit):
		t.Fatal("no long poll arrived")
		return nil
	}
}

// api is what a worker calls, in process or remote.
type api interface {
	reconcile.Media
	Source(id string) (reconcile.Source, bool)
	Join(ctx context.Context, groupID string) error
}

// inProcess is the reference: the Server and its Client, directly.
type inProcess struct {
	*mediasim.Client
	sim       *mediasim.Server
	principal string
}

func (p inProcess) Source(id string) (reconcile.Source, bool) { return p.sim.Source(id) }

func (p inProcess) Join(_ context.Context, groupID string) error {
	return p.sim.Join(p.principal, groupID)
}

type sourceResult struct {
	Src reconcile.Source
	OK  bool
}

// TestRemoteMatchesInProcess runs one sequence of operations on two
// identical simulators, one in process and one through Handler and
// Remote, and requires the same result and the same error (type, code,
// message, fields) at every step, and the same logged calls, bindings and
// group state at the end.
func TestRemoteMatchesInProcess(t *testing.T) {
	t.Parallel()
	setup := func(sim *mediasim.Server) {
		sim.Connect("src", spec())
		if err := sim.MarkReady("src", "cam"); err != nil {
			t.Fatal(err)
		}
		sim.AddGroup("g", "w1")
	}
	local, remoteSim := mediasim.New(), mediasim.New()
	setup(local)
	setup(remoteSim)
	srv := serve(t, remoteSim.Handler())
	apis := map[string][2]api{}
	for _, p := range []string{"w1", "w2", "v"} {
		apis[p] = [2]api{inProcess{local.Client(p), local, p}, dial(t, srv.URL, p, fast)}
	}
	src, _ := local.Source("src")
	session := src.SessionID
	pub := reconcile.PublicationRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "out", OutputProfile: "out", RecordingMode: intent.RecordingInherit}
	withPub := func(mod func(*reconcile.PublicationRequest)) reconcile.PublicationRequest {
		r := pub
		mod(&r)
		return r
	}
	sub := func(variant, session string) reconcile.SubscribeRequest {
		return reconcile.SubscribeRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: variant}
	}
	// id returns the binding ID an earlier step returned (the same on both
	// sides, which the step compared).
	results := map[string]any{}
	id := func(step string) string { return results[step].(reconcile.Binding).ID }
	const joinRefused reconcile.ErrorCode = "join refused"
	steps := []struct {
		name, principal string
		want            reconcile.ErrorCode // "" for success
		do              func(a api) (any, error)
	}{
		{"source advertised", "w1", "", func(a api) (any, error) { s, ok := a.Source("src"); return sourceResult{s, ok}, nil }},
		{"source without a session", "w1", "", func(a api) (any, error) { s, ok := a.Source("nope"); return sourceResult{s, ok}, nil }},
		{"source with an empty id", "w1", "", func(a api) (any, error) { s, ok := a.Source(""); return sourceResult{s, ok}, nil }},
		{"subscribe to the ready variant", "v", "", func(a api) (any, error) { return a.Subscribe(ctx, sub("cam", session)) }},
		{"subscribe by automatic selection", "v", "", func(a api) (any, error) { return a.Subscribe(ctx, sub("", session)) }},
		{"subscribe to a variant not advertised", "v", reconcile.SubscribeVariantUnavailable, func(a api) (any, error) { return a.Subscribe(ctx, sub("x", session)) }},
		{"subscribe on a stale session", "v", reconcile.SubscribeSourceUnavailable, func(a api) (any, error) { return a.Subscribe(ctx, sub("cam", "old")) }},
		{"unsubscribe an unknown id", "v", reconcile.SubscribeNotFound, func(a api) (any, error) { return nil, a.Unsubscribe(ctx, "sub-99") }},
		{"unsubscribe another principal's subscription", "w1", reconcile.SubscribeNotFound, func(a api) (any, error) {
			return nil, a.Unsubscribe(ctx, id("subscribe to the ready variant"))
		}},
		{"unsubscribe", "v", "", func(a api) (any, error) { return nil, a.Unsubscribe(ctx, id("subscribe to the ready variant")) }},
		{"start a publication", "w1", "", func(a api) (any, error) { return a.StartPublication(ctx, pub) }},
		{"start it as another principal", "w2", reconcile.PublicationConflict, func(a api) (any, error) { return a.StartPublication(ctx, pub) }},
		{"stop another principal's publication", "w2", reconcile.PublicationNotFound, func(a api) (any, error) {
			return nil, a.StopPublication(ctx, id("start a publication"))
		}},
		{"unsubscribe a publication", "w1", reconcile.SubscribeNotFound, func(a api) (any, error) {
			return nil, a.Unsubscribe(ctx, id("start a publication"))
		}},
		{"zero recording mode", "w1", reconcile.PublicationRecordingModeInvalid, func(a api) (any, error) {
			return a.StartPublication(ctx, withPub(func(r *reconcile.PublicationRequest) { r.RecordingMode = "" }))
		}},
		{"unknown profile", "w1", reconcile.PublicationUnsupported, func(a api) (any, error) {
			return a.StartPublication(ctx, withPub(func(r *reconcile.PublicationRequest) { r.OutputProfile, r.VariantID = "8k", "o8k" }))
		}},
		{"publish into a group without membership", "w1", reconcile.PublicationPermissionDenied, func(a api) (any, error) {
			return a.StartPublication(ctx, withPub(func(r *reconcile.PublicationRequest) { r.Group, r.VariantID = "g", "grp" }))
		}},
		{"join a group that does not admit", "w2", joinRefused, func(a api) (any, error) { return nil, a.Join(ctx, "g") }},
		{"join a group that does not exist", "w1", joinRefused, func(a api) (any, error) { return nil, a.Join(ctx, "nope") }},
		{"join", "w1", "", func(a api) (any, error) { return nil, a.Join(ctx, "g") }},
		{"publish into the group", "w1", "", func(a api) (any, error) {
			return a.StartPublication(ctx, withPub(func(r *reconcile.PublicationRequest) { r.Group, r.VariantID = "g", "grp" }))
		}},
		{"source with the publications' variants", "w2", "", func(a api) (any, error) { s, ok := a.Source("src"); return sourceResult{s, ok}, nil }},
		{"stop the publication", "w1", "", func(a api) (any, error) { return nil, a.StopPublication(ctx, id("start a publication")) }},
		{"stop it again", "w1", reconcile.PublicationNotFound, func(a api) (any, error) {
			return nil, a.StopPublication(ctx, id("start a publication"))
		}},
	}
	// The steps run in order, not in parallel: each acts on the state the
	// ones before left.
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			a := apis[st.principal]
			wantRes, wantErr := st.do(a[0])
			gotRes, gotErr := st.do(a[1])
			results[st.name] = wantRes
			if !reflect.DeepEqual(gotRes, wantRes) {
				t.Errorf("result %+v, in process %+v", gotRes, wantRes)
			}
			sameError(t, gotErr, wantErr)
			var je *mediasim.JoinRefusedError
			switch {
			case st.want == "" && wantErr != nil:
				t.Fatalf("in process: %v, want success", wantErr)
			case st.want == joinRefused && !errors.As(wantErr, &je):
				t.Fatalf("in process: %v, want a refused join", wantErr)
			case st.want != "" && st.want != joinRefused && code(wantErr) != st.want:
				t.Fatalf("in process: %v, want %s", wantErr, st.want)
			}
		})
	}
	type call struct {
		mediasim.Call
		Err string
	}
	calls := func(sim *mediasim.Server) []call {
		var out []call
		for _, c := range sim.Calls() {
			e := ""
			if c.Err != nil {
				e = c.Err.Error()
			}
			c.Err = nil
			out = append(out, call{c, e})
		}
		return out
	}
	if got, want := calls(remoteSim), calls(local); !reflect.DeepEqual(got, want) {
		t.Errorf("calls logged through HTTP:\n%+v\nin process:\n%+v", got, want)
	}
	if got, want := remoteSim.Bindings(), local.Bindings(); !reflect.DeepEqual(got, want) {
		t.Errorf("bindings %+v, in process %+v", got, want)
	}
	if got, want := remoteSim.GroupState("g"), local.GroupState("g"); !reflect.DeepEqual(got, want) {
		t.Errorf("group state %+v, in process %+v", got, want)
	}
}

// sameError requires got to be what errors.As, errors.Is and reconcile's
// code checks take for want.
func sameError(t *testing.T, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("error %v, in process %v", got, want)
	}
	if want == nil {
		return
	}
	if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) || got.Error() != want.Error() || !reflect.DeepEqual(got, want) {
		t.Fatalf("error %T %q, in process %T %q", got, got, want, want)
	}
	if c := code(want); c != "" && !errors.Is(got, &reconcile.CommandError{Code: c}) {
		t.Fatalf("errors.Is(%v, CommandError{%s}) is false", got, c)
	}
	var re *mediasim.RequestError
	if errors.As(got, &re) {
		t.Fatalf("a refusal came back as a request failure: %v", got)
	}
}

// TestChangedFiresOnServerSideChanges: every change made on the Server
// closes the Remote's channel, which an unchanged long-poll answer does
// not, and Source then reads the change.
func TestChangedFiresOnServerSideChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*mediasim.Server) error
	}{
		{"Connect", func(s *mediasim.Server) error { s.Connect("src", spec()); return nil }},
		{"Disconnect", func(s *mediasim.Server) error { s.Disconnect("src"); return nil }},
		{"AddVariant", func(s *mediasim.Server) error {
			return s.AddVariant("src", reconcile.Variant{ID: "cam-low", MediaKind: intent.Video, Codec: "h264"})
		}},
		{"MarkReady", func(s *mediasim.Server) error { return s.MarkReady("src", "cam") }},
		{"RemoveVariant", func(s *mediasim.Server) error { return s.RemoveVariant("src", "cam") }},
		{"a publication by another principal", func(s *mediasim.Server) error {
			src, _ := s.Source("src")
			_, err := s.Client("w2").StartPublication(ctx, reconcile.PublicationRequest{SourceSessionID: src.SessionID,
				MediaKind: intent.Video, VariantID: "out", OutputProfile: "out", RecordingMode: intent.RecordingInherit})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sim := mediasim.New()
			sim.Connect("src", spec())
			g := newGate(sim.Handler())
			opts := fast
			opts.PollWait = time.Millisecond // unchanged answers come at once
			r := dial(t, serve(t, g).URL, "w1", opts)
			first := r.Changed()
			waitClosed(t, first, "the first answer") // a channel taken before any answer
			c := r.Changed()
			// Two long polls arrive, so the unchanged answer of the first
			// was taken in between: it must leave c open.
			close(g.held(t))
			rel := g.held(t)
			if closed(c) {
				t.Fatal("an answer with an unchanged counter closed Changed")
			}
			if err := tc.change(sim); err != nil {
				t.Fatal(err)
			}
			close(rel)
			waitClosed(t, c, tc.name)
			got, gotOK := r.Source("src")
			want, wantOK := sim.Source("src")
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Fatalf("after %s: Source %+v %v, server %+v %v", tc.name, got, gotOK, want, wantOK)
			}
		})
	}
}

// TestChangedNeverMissesAChange provokes the windows a change could slip
// through: while the long poll is on its way to the server (a poll that
// waited for "the next change" from its arrival would miss it), and
// between two Changed calls, after the first channel closed and before
// the poller asked again. The poll waits far longer than the test, so
// only the counter can close the channel.
func TestChangedNeverMissesAChange(t *testing.T) {
	t.Parallel()
	addVariant := func(t *testing.T, sim *mediasim.Server, id string) {
		t.Helper()
		if err := sim.AddVariant("src", reconcile.Variant{ID: id, MediaKind: intent.Video}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T, sim *mediasim.Server, g *gate, r *mediasim.Remote)
	}{
		{"a change while the poll is on its way", func(t *testing.T, sim *mediasim.Server, g *gate, r *mediasim.Remote) {
			c := r.Changed()
			rel := g.held(t)
			addVariant(t, sim, "a")
			if again := r.Changed(); again != c {
				t.Fatal("a second Changed before any answer handed out another channel")
			}
			close(rel)
			waitClosed(t, c, "a change made while the poll was on its way")
		}},
		{"a change between two Changed calls", func(t *testing.T, sim *mediasim.Server, g *gate, r *mediasim.Remote) {
			c1 := r.Changed()
			rel := g.held(t)
			addVariant(t, sim, "a")
			close(rel)
			waitClosed(t, c1, "the first change")
			c2 := r.Changed()
			rel = g.held(t) // the poll after the first change's answer
			addVariant(t, sim, "b")
			close(rel)
			waitClosed(t, c2, "the second change")
			if src, _ := r.Source("src"); len(src.Variants) != 3 {
				t.Fatalf("variants %+v, want cam, a and b", src.Variants)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sim := mediasim.New()
			sim.Connect("src", spec())
			g := newGate(sim.Handler())
			r := dial(t, serve(t, g).URL, "w1", fast) // PollWait: MaxPollWait
			waitClosed(t, r.Changed(), "the first answer")
			tc.run(t, sim, g, r)
		})
	}
}

// outage drops every request while down: the connection closes before
// any answer, as when the server process is gone.
type outage struct {
	next http.Handler
	down atomic.Bool
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.down.Load() {
		dropConnection(w)
		return
	}
	o.next.ServeHTTP(w, r)
}

func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // httptest's HTTP/1.1 server always hijacks
	}
	conn.Close()
}

// TestOutageKeepsSourceAndWakesChanged: while the server is unreachable
// Source answers what it last answered, a command fails with a
// RequestError, and Changed stays open; once the server answers again
// Changed closes although nothing changed, so the failed command is
// retried.
func TestOutageKeepsSourceAndWakesChanged(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	session := sim.Connect("src", spec())
	o := &outage{next: sim.Handler()}
	srv := serve(t, o)
	failed := make(chan *mediasim.RequestError, 64)
	opts := fast
	opts.OnRequestError = func(e *mediasim.RequestError) {
		select {
		case failed <- e:
		default: // enough seen; the test reads the first few
		}
	}
	r := dial(t, srv.URL, "v", opts)
	before, ok := r.Source("src")
	if !ok {
		t.Fatal("src is not advertised")
	}
	waitClosed(t, r.Changed(), "the first answer")
	c := r.Changed()
	serverChanged := sim.Changed()

	o.down.Store(true)
	if got, ok := r.Source("src"); !ok || !reflect.DeepEqual(got, before) {
		t.Fatalf("Source during the outage: %+v %v, want the last answer %+v", got, ok, before)
	}
	if _, ok := r.Source("never-seen"); ok {
		t.Fatal("Source made up a source it never saw")
	}
	_, err := r.Subscribe(ctx, reconcile.SubscribeRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "cam"})
	var re *mediasim.RequestError
	if !errors.As(err, &re) || re.Op != "Subscribe" || re.URL != srv.URL+"/v1/subscribe" || re.Status != 0 || code(err) != "" {
		t.Fatalf("Subscribe during the outage: %v, want a RequestError naming Subscribe and %s", err, srv.URL+"/v1/subscribe")
	}
	// Wait for the poller's own probe to fail: a failure must not close c.
	deadline := time.After(waitLimit)
	for probed := false; !probed; {
		select {
		case e := <-failed:
			probed = e.Op == "Changed"
		case <-deadline:
			t.Fatal("the poller reported no failed probe during the outage")
		}
	}
	if closed(c) {
		t.Fatal("Changed closed while the server was unreachable")
	}

	o.down.Store(false)
	waitClosed(t, c, "the server answered again")
	if closed(serverChanged) || len(sim.Calls()) != 0 {
		t.Fatalf("the outage changed the server: calls %+v", sim.Calls())
	}
	if _, err := r.Subscribe(ctx, reconcile.SubscribeRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "cam"}); code(err) != reconcile.SubscribeVariantUnavailable {
		t.Fatalf("Subscribe after the outage: %v, want the server's own answer", err)
	}
	sim.Disconnect("src")
	if _, ok := r.Source("src"); ok {
		t.Fatal("Source answered the old advertisement from a reachable server")
	}
}

// TestRequestErrorNamesOperationAndURL: every operation against a server
// that is gone, or a URL that is not the API, fails with a RequestError
// naming the operation, the URL and the status, which is not a refusal.
func TestRequestErrorNamesOperationAndURL(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	notAPI := serve(t, mediasim.New().Handler())
	ops := []struct {
		op, path string
		do       func(*mediasim.Remote) error
	}{
		{"Subscribe", "/v1/subscribe", func(r *mediasim.Remote) error { _, err := r.Subscribe(ctx, reconcile.SubscribeRequest{}); return err }},
		{"Unsubscribe", "/v1/unsubscribe", func(r *mediasim.Remote) error { return r.Unsubscribe(ctx, "sub-1") }},
		{"StartPublication", "/v1/publication/start", func(r *mediasim.Remote) error {
			_, err := r.StartPublication(ctx, reconcile.PublicationRequest{})
			return err
		}},
		{"StopPublication", "/v1/publication/stop", func(r *mediasim.Remote) error { return r.StopPublication(ctx, "pub-1") }},
		{"Join", "/v1/join", func(r *mediasim.Remote) error { return r.Join(ctx, "g") }},
	}
	servers := []struct {
		name, base string
		status     int
	}{
		{"server gone", gone.URL, 0},
		{"not the API", notAPI.URL + "/elsewhere", http.StatusNotFound},
	}
	for _, s := range servers {
		for _, op := range ops {
			t.Run(s.name+"/"+op.op, func(t *testing.T) {
				t.Parallel()
				r := dial(t, s.base, "w1", fast)
				err := op.do(r)
				var re *mediasim.RequestError
				if !errors.As(err, &re) || re.Op != op.op || re.URL != s.base+op.path || re.Status != s.status {
					t.Fatalf("%v, want a RequestError for %s %s with status %d", err, op.op, s.base+op.path, s.status)
				}
				if !strings.Contains(err.Error(), op.op) || !strings.Contains(err.Error(), s.base+op.path) {
					t.Fatalf("message %q names neither the operation nor the URL", err)
				}
				var ce *reconcile.CommandError
				if errors.As(err, &ce) {
					t.Fatalf("a request failure passed for a refusal: %v", err)
				}
			})
		}
	}
}

// TestHandlerRejectsBadRequests: a request without a principal, with a
// malformed body or a bad parameter gets 400 naming what is wrong, and
// changes nothing.
func TestHandlerRejectsBadRequests(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	sim.Connect("src", spec())
	srv := serve(t, sim.Handler())
	changed := sim.Changed()
	const ok = `{"SourceSessionID":"session-src-1","MediaKind":"video","VariantID":"out","OutputProfile":"out","RecordingMode":"inherit"}`
	tests := []struct {
		name, method, target, principal, body string
		status                                int
		want                                  string
	}{
		{"no principal", "POST", "/v1/publication/start", "", ok, 400, mediasim.PrincipalHeader},
		{"unknown field", "POST", "/v1/publication/start", "w1", `{"Owner":"w2"}`, 400, "Owner"},
		{"two values", "POST", "/v1/publication/start", "w1", ok + ok, 400, "more than one"},
		{"not JSON", "POST", "/v1/subscribe", "w1", "subscribe please", 400, "body"},
		{"body too large", "POST", "/v1/join", "w1", `{"group":"` + strings.Repeat("g", 70<<10) + `"}`, 400, "too large"},
		{"source without id", "GET", "/v1/source", "", "", 400, "id"},
		{"after not a counter", "GET", "/v1/changed?epoch=e&after=-1", "", "", 400, "after"},
		{"after without epoch", "GET", "/v1/changed?after=0", "", "", 400, "epoch"},
		{"wait over the bound", "GET", "/v1/changed?epoch=e&after=0&wait=25001", "", "", 400, "wait"},
		{"after ahead of the counter", "GET", "/v1/changed?epoch=" + epoch(t, srv.URL) + "&after=99&wait=1", "", "", 400, "ahead"},
		{"wrong method", "GET", "/v1/subscribe", "w1", "", 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.target, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.principal != "" {
				req.Header.Set(mediasim.PrincipalHeader, tc.principal)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct{ Error string }
			if err := jsonDecode(resp, &env); err != nil && tc.want != "" {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(env.Error, tc.want) {
				t.Fatalf("HTTP %d %q, want %d naming %q", resp.StatusCode, env.Error, tc.status, tc.want)
			}
		})
	}
	t.Cleanup(func() {
		if len(sim.Calls()) != 0 || len(sim.Bindings()) != 0 || closed(changed) {
			t.Errorf("a refused request changed the server: calls %+v bindings %+v", sim.Calls(), sim.Bindings())
		}
	})
}

// epoch reads the server's epoch with a plain GET /v1/changed.
func epoch(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/v1/changed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct{ Result struct{ Epoch string } }
	if err := jsonDecode(resp, &env); err != nil || env.Result.Epoch == "" {
		t.Fatalf("no epoch: %v", err)
	}
	return env.Result.Epoch
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// TestDialRejectsBadArguments: each bad argument is a DialError naming it.
func TestDialRejectsBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, base, principal string
		opts                  mediasim.RemoteOptions
		field                 string
	}{
		{"not a URL", "http://[::1", "w", mediasim.RemoteOptions{}, "base_url"},
		{"no scheme", "127.0.0.1:80", "w", mediasim.RemoteOptions{}, "base_url"},
		{"ftp", "ftp://127.0.0.1", "w", mediasim.RemoteOptions{}, "base_url"},
		{"no host", "http:///v1", "w", mediasim.RemoteOptions{}, "base_url"},
		{"a query", "http://127.0.0.1/?x=1", "w", mediasim.RemoteOptions{}, "base_url"},
		{"no principal", "http://127.0.0.1", "", mediasim.RemoteOptions{}, "principal"},
		{"a newline in the principal", "http://127.0.0.1", "w\nX-Admin: yes", mediasim.RemoteOptions{}, "principal"},
		{"negative poll wait", "http://127.0.0.1", "w", mediasim.RemoteOptions{PollWait: -1}, "poll_wait"},
		{"poll wait under a millisecond", "http://127.0.0.1", "w", mediasim.RemoteOptions{PollWait: time.Microsecond}, "poll_wait"},
		{"poll wait over the bound", "http://127.0.0.1", "w", mediasim.RemoteOptions{PollWait: mediasim.MaxPollWait + time.Second}, "poll_wait"},
		{"negative request timeout", "http://127.0.0.1", "w", mediasim.RemoteOptions{RequestTimeout: -time.Second}, "request_timeout"},
		{"negative retry", "http://127.0.0.1", "w", mediasim.RemoteOptions{RetryMin: -1}, "retry"},
		{"retry min over max", "http://127.0.0.1", "w", mediasim.RemoteOptions{RetryMin: time.Second, RetryMax: time.Millisecond}, "retry"},
		{"client timeout under the poll wait", "http://127.0.0.1", "w",
			mediasim.RemoteOptions{HTTPClient: &http.Client{Timeout: time.Second}, PollWait: 2 * time.Second}, "http_client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := mediasim.Dial(tc.base, tc.principal, tc.opts)
			var de *mediasim.DialError
			if !errors.As(err, &de) || de.Field != tc.field {
				if r != nil {
					r.Close()
				}
				t.Fatalf("Dial: %v, want a DialError on %s", err, tc.field)
			}
		})
	}
}

// TestCloseEndsThePoller: Close ends the long poll in flight and waits
// for the poller (TestMain's leak check fails otherwise); afterwards
// Changed never closes and commands fail with ErrClosed.
func TestCloseEndsThePoller(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	g := newGate(sim.Handler())
	r := dial(t, serve(t, g).URL, "w1", fast)
	waitClosed(t, r.Changed(), "the first answer")
	g.held(t) // the long poll is in flight, and is never released
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not end the long poll in flight")
	}
	sim.Connect("src", spec())
	if closed(r.Changed()) {
		t.Fatal("Changed after Close reported a change")
	}
	if err := r.Unsubscribe(ctx, "sub-1"); !errors.Is(err, mediasim.ErrClosed) {
		t.Fatalf("Unsubscribe after Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
