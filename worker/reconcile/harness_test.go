package reconcile_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

const (
	serviceNS = "service/transcoder-a"
	frontDoor = "front-door"
	out720    = "browser-h264-720p"
	leaseTTL  = 10 * time.Second
)

var coordinator = statestore.Principal{ID: "coordinator", Admin: true}

// testWorker is a reconciler running on its own goroutine, its events
// handed to the test through a channel.
type testWorker struct {
	t       *testing.T
	name    string
	r       *reconcile.Reconciler
	conn    *stateclient.Local
	events  chan reconcile.Event
	backlog []reconcile.Event
	cancel  context.CancelFunc
	done    chan error
}

// startWorker runs a reconciler as principal p (holder p.ID) on st,
// reaching sim in process unless a mod (applied in order; nil ones
// skipped) says otherwise.
func startWorker(t *testing.T, st *storetest.Store, sim *mediasim.Server, p statestore.Principal, mods ...func(*reconcile.Config)) *testWorker {
	t.Helper()
	w := &testWorker{t: t, name: p.ID, events: make(chan reconcile.Event, 4096), done: make(chan error, 1)}
	cfg := reconcile.Config{
		Namespace: serviceNS, Holder: p.ID, Schemas: st.Reg, Clock: st.Clock,
		Capabilities: sim, Media: sim.Client(p.ID),
		Lease:   lease.Config{TTL: leaseTTL, Jitter: -1},
		Observe: func(e reconcile.Event) { w.events <- e },
	}
	for _, mod := range mods {
		if mod != nil {
			mod(&cfg)
		}
	}
	r, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stateclient.Dial(st.Store, p, r)
	if err != nil {
		t.Fatal(err)
	}
	w.r, w.conn = r, conn
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() { w.done <- r.Run(runCtx, conn) }()
	t.Cleanup(w.stop)
	w.waitFor(reconcile.EventResynced, "") // the first snapshot is installed
	return w
}

func withLeases(c *reconcile.Config) { c.LeasePrefix = "leases/" }

// mediaLink is how a scenario's workers reach the simulator.
type mediaLink struct {
	name string
	// media returns the mod that points principal's worker at sim.
	media func(t *testing.T, sim *mediasim.Server, principal string) func(*reconcile.Config)
}

// mediaLinks: in process (the Server and its Client), and over the
// simulator's HTTP API on loopback (a mediasim.Remote per worker, as a
// worker process has), for scenarios that must come out the same.
var mediaLinks = []mediaLink{
	{"in-process", func(*testing.T, *mediasim.Server, string) func(*reconcile.Config) { return nil }},
	{"http", func(t *testing.T, sim *mediasim.Server, principal string) func(*reconcile.Config) {
		return viaHTTP(t, httptest.NewServer(sim.Handler()), principal)
	}},
}

// viaHTTP dials principal's Remote on srv, closed (and srv after it) when
// the test ends: the worker, whose cleanup comes later, stops first.
func viaHTTP(t *testing.T, srv *httptest.Server, principal string) func(*reconcile.Config) {
	t.Helper()
	t.Cleanup(srv.Close)
	r, err := mediasim.Dial(srv.URL, principal, mediasim.RemoteOptions{RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return func(c *reconcile.Config) { c.Capabilities, c.Media = r, r }
}

// stop ends the worker as a crash would: no release, no StopPublication.
func (w *testWorker) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	if err := <-w.done; err != nil {
		w.t.Errorf("%s: run: %v", w.name, err)
	}
	w.conn.Close()
}

// stopGracefully ends the worker as a supervisor's stop would: Run
// returns, then Stop ends its bindings and releases its leases.
func (w *testWorker) stopGracefully() {
	w.cancel()
	w.cancel = nil
	if err := <-w.done; err != nil {
		w.t.Errorf("%s: run: %v", w.name, err)
	}
	w.r.Stop(ctx)
	w.conn.Close()
}

// waitFor returns the first event of kind for intentKey ("": any) that no
// earlier waitFor returned, reading the worker's events until one arrives.
// Events it passes over are kept for later waits, so the order in which a
// pass reports intents does not matter. The deadline only turns a hang into
// a failure; nothing here waits for time to pass.
func (w *testWorker) waitFor(kind reconcile.EventKind, intentKey string) reconcile.Event {
	w.t.Helper()
	match := func(e reconcile.Event) bool { return e.Kind == kind && (intentKey == "" || e.Intent == intentKey) }
	for i, e := range w.backlog {
		if match(e) {
			w.backlog = append(w.backlog[:i], w.backlog[i+1:]...)
			return e
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-w.events:
			if match(e) {
				return e
			}
			w.backlog = append(w.backlog, e)
		case <-deadline:
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			w.t.Fatalf("%s: no %s event for %q; saw %v", w.name, kind, intentKey, w.backlog)
		}
	}
}

// noneSeen fails if the worker reported an event of kind, among those
// reported so far and not yet waited for.
func (w *testWorker) noneSeen(kind reconcile.EventKind) {
	w.t.Helper()
	for {
		select {
		case e := <-w.events:
			w.backlog = append(w.backlog, e)
			continue
		default:
		}
		break
	}
	for _, e := range w.backlog {
		if e.Kind == kind {
			w.t.Fatalf("%s: unexpected %s", w.name, e)
		}
	}
}

func mustEncode(t *testing.T, st *storetest.Store, in intent.Intent) []byte {
	t.Helper()
	doc, err := intent.Encode(st.Reg, in)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// putIntent writes an intent as principal p (blind: the coordinator owns
// the key) and returns the entry.
func putIntent(t *testing.T, st *storetest.Store, p statestore.Principal, ns, key string, in intent.Intent, ttl time.Duration) statestore.Entry {
	t.Helper()
	e, err := st.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: intent.Schema, Document: mustEncode(t, st, in), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func publishIntent() intent.Intent {
	return intent.Intent{Role: intent.Publish, Desired: true, SourceID: frontDoor, MediaKind: intent.Video,
		VariantID: out720, OutputProfile: out720, Priority: 100, RecordingMode: intent.RecordingDisabled}
}

func subscribeIntent(variant string) intent.Intent {
	return intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: frontDoor, MediaKind: intent.Video, VariantID: variant}
}

func frontDoorSpec(variants ...reconcile.Variant) mediasim.SourceSpec {
	return mediasim.SourceSpec{
		Streams: []intent.MediaKind{intent.Video, intent.Audio}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: out720, Codec: "h264"}, {ID: "browser-av1-1080p", Codec: "av1"}},
		Variants: variants,
	}
}

// status reads the observed status a worker wrote for an intent.
func status(t *testing.T, st *storetest.Store, ns, worker, name string) (reconcile.Status, statestore.Entry) {
	t.Helper()
	e, err := st.Get(ctx, statestore.System(), ns, "status/"+worker+"/"+name)
	if err != nil {
		t.Fatalf("status of %s by %s: %v", name, worker, err)
	}
	s, err := reconcile.ParseStatus(st.Reg, e.Document)
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// callsBy returns the commands principal sent, as "Command variant".
func callsBy(sim *mediasim.Server, principal string) []string {
	var out []string
	for _, c := range sim.Calls() {
		if c.Principal != principal {
			continue
		}
		v := c.Pub.VariantID
		if c.Command == "Subscribe" {
			v = c.Sub.VariantID
		}
		s := fmt.Sprintf("%s %s", c.Command, v)
		if c.Err != nil {
			s += " error"
		}
		out = append(out, s)
	}
	return out
}

func openStore(t *testing.T) *storetest.Store { return storetest.Open(t, reconcile.RegisterSchemas) }
