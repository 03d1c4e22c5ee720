package cv_test

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

const (
	cvNS       = "service/cv-a"
	frontDoor  = "front-door"
	people     = "person-detector"
	cameraMain = "camera-main"
	intentKey  = "intents/front-door-people"
	intentName = "front-door-people"
	leaseTTL   = 10 * time.Second
	every      = 5 // the sim model sees a person on every fifth frame
)

var coordinator = statestore.Principal{ID: "coordinator", Admin: true}

func openStore(t *testing.T) *storetest.Store { return storetest.Open(t, cv.RegisterSchemas) }

// frontDoorSpec is the front door camera: video with one variant (not
// ready until MarkReady), analysable with the person detector.
func frontDoorSpec() mediasim.SourceSpec {
	return mediasim.SourceSpec{
		Streams:  []intent.MediaKind{intent.Video, intent.Audio},
		Variants: []reconcile.Variant{{ID: cameraMain, MediaKind: intent.Video, Codec: "h264"}},
		Models:   []cv.ModelProfile{{ID: people, MediaKind: intent.Video}},
	}
}

// connect brings the front door up with its variant ready and returns
// the session.
func connect(t *testing.T, sim *mediasim.Server) string {
	t.Helper()
	session := sim.Connect(frontDoor, frontDoorSpec())
	if err := sim.MarkReady(frontDoor, cameraMain); err != nil {
		t.Fatal(err)
	}
	return session
}

func peopleTarget() cv.Target {
	return cv.Target{SourceID: frontDoor, MediaKind: intent.Video, Model: people}
}

// putIntent writes the computer-vision intent for target as the
// coordinator and returns the entry.
func putIntent(t *testing.T, st *storetest.Store, target cv.Target) statestore.Entry {
	t.Helper()
	doc, err := intent.Encode(st.Reg, target.Intent())
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: cvNS, Key: intentKey, Schema: intent.Schema, Document: doc})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newModel(t *testing.T) *cv.SimModel {
	t.Helper()
	m, err := cv.NewSimModel(every, "person", 0.9)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testWorker is a cv.Worker running on its own goroutine, its reports
// handed to the test through a channel.
type testWorker struct {
	t       *testing.T
	name    string
	conn    *stateclient.Local
	reports chan cv.Report
	backlog []cv.Report
	cancel  context.CancelFunc
	done    chan error
}

// startWorker runs a worker as principal p (holder p.ID) on st and sim,
// running model for the person detector.
func startWorker(t *testing.T, st *storetest.Store, sim *mediasim.Server, p statestore.Principal, model cv.Model, mods ...func(*cv.Config)) *testWorker {
	t.Helper()
	w := &testWorker{t: t, name: p.ID, reports: make(chan cv.Report, 4096), done: make(chan error, 1)}
	cfg := cv.Config{
		Namespace: cvNS, Holder: p.ID, Schemas: st.Reg, Clock: st.Clock,
		Capabilities: sim, Media: sim.Client(p.ID),
		Models:  map[string]cv.Model{people: model},
		Lease:   lease.Config{TTL: leaseTTL, Jitter: -1},
		Observe: func(r cv.Report) { w.reports <- r },
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	wk, err := cv.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stateclient.Dial(st.Store, p, wk)
	if err != nil {
		t.Fatal(err)
	}
	w.conn = conn
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() { w.done <- wk.Run(runCtx, conn) }()
	t.Cleanup(w.stop)
	w.waitFor(cv.ReportResynced, "")
	return w
}

// stop ends the worker as a crash would: no release, no Unsubscribe.
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

// waitUntil returns the first report matching that no earlier wait
// returned, reading the worker's reports until one arrives. Reports it
// passes over are kept for later waits. The deadline only turns a hang
// into a failure; nothing here waits for time to pass.
func (w *testWorker) waitUntil(what string, match func(cv.Report) bool) cv.Report {
	w.t.Helper()
	for i, r := range w.backlog {
		if match(r) {
			w.backlog = append(w.backlog[:i], w.backlog[i+1:]...)
			return r
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-w.reports:
			if match(r) {
				return r
			}
			w.backlog = append(w.backlog, r)
		case <-deadline:
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			w.t.Fatalf("%s: no report %s; saw %v", w.name, what, w.backlog)
		}
	}
}

// waitFor waits for a report of kind for key ("": any).
func (w *testWorker) waitFor(kind cv.ReportKind, key string) cv.Report {
	w.t.Helper()
	return w.waitUntil(string(kind)+" "+key, func(r cv.Report) bool { return r.Kind == kind && (key == "" || r.Intent == key) })
}

// waitAnalyzed waits until the worker reports having analysed frames
// frames of the intent, and returns the intent's health as of then.
func (w *testWorker) waitAnalyzed(frames uint64) cv.Health {
	w.t.Helper()
	return w.waitUntil("analyzed up to frame total", func(r cv.Report) bool {
		return r.Kind == cv.ReportAnalyzed && r.Health.Frames == frames
	}).Health
}

// waitHealth waits until the worker has written a health entry for which
// match holds.
func (w *testWorker) waitHealth(what string, match func(cv.Health) bool) cv.Health {
	w.t.Helper()
	return w.waitUntil("health "+what, func(r cv.Report) bool { return r.Kind == cv.ReportHealth && match(r.Health) }).Health
}

// noneSeen fails if the worker reported a report of kind, among those
// reported so far and not yet waited for.
func (w *testWorker) noneSeen(kind cv.ReportKind) {
	w.t.Helper()
	for {
		select {
		case r := <-w.reports:
			w.backlog = append(w.backlog, r)
			continue
		default:
		}
		break
	}
	for _, r := range w.backlog {
		if r.Kind == kind {
			w.t.Fatalf("%s: unexpected %s", w.name, r)
		}
	}
}

// emit has the front door produce n frames and checks how many
// subscriptions they reached.
func emit(t *testing.T, sim *mediasim.Server, n, subscribers int) {
	t.Helper()
	got, err := sim.EmitFrames(frontDoor, n)
	if err != nil || got != n*subscribers {
		t.Fatalf("EmitFrames(%d) delivered %d (%v), want %d", n, got, err, n*subscribers)
	}
}

// events returns the catalog's events, each parsed (and so validated).
func events(t *testing.T, sim *mediasim.Server) []cv.Event {
	t.Helper()
	var out []cv.Event
	for _, ce := range sim.Events() {
		if ce.Schema != cv.EventSchema {
			t.Fatalf("catalog event of schema %q", ce.Schema)
		}
		ev, err := cv.ParseEvent(ce.Document)
		if err != nil {
			t.Fatalf("the catalog holds an invalid event %s: %v", ce.Document, err)
		}
		if ev.Worker != ce.Principal {
			t.Fatalf("event %+v published by %s", ev, ce.Principal)
		}
		out = append(out, ev)
	}
	return out
}

// health reads the health entry worker wrote for the intent.
func health(t *testing.T, st *storetest.Store, worker string) (cv.Health, statestore.Entry) {
	t.Helper()
	e, err := st.Get(ctx, statestore.System(), cvNS, "status/"+worker+"/"+intentName)
	if err != nil {
		t.Fatalf("health by %s: %v", worker, err)
	}
	h, err := cv.ParseHealth(st.Reg, e.Document)
	if err != nil {
		t.Fatal(err)
	}
	return h, e
}

// subsOf returns the live subscriptions of principal.
func subsOf(sim *mediasim.Server, principal string) []mediasim.Binding {
	var out []mediasim.Binding
	for _, b := range sim.Bindings() {
		if b.Principal == principal && !b.Publish {
			out = append(out, b)
		}
	}
	return out
}

// commandsOf returns the commands principal sent, in order.
func commandsOf(sim *mediasim.Server, principal string) []string {
	var out []string
	for _, c := range sim.Calls() {
		if c.Principal == principal {
			out = append(out, c.Command)
		}
	}
	return out
}

// activeWorker is a store with the people intent, the front door up, and
// worker cv-1 subscribed and analysing.
func activeWorker(t *testing.T, model cv.Model, mods ...func(*cv.Config)) (*storetest.Store, *mediasim.Server, *testWorker, string) {
	t.Helper()
	st := openStore(t)
	sim := mediasim.New()
	session := connect(t, sim)
	putIntent(t, st, peopleTarget())
	w := startWorker(t, st, sim, statestore.Principal{ID: "cv-1", Admin: true}, model, mods...)
	w.waitFor(cv.ReportClaimed, intentKey)
	w.waitFor(cv.ReportSubscribed, intentKey)
	return st, sim, w, session
}
