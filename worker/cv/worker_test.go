package cv_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

func TestNewRejectsConfig(t *testing.T) {
	t.Parallel()
	reg := schema.NewRegistry()
	if err := cv.RegisterSchemas(reg); err != nil {
		t.Fatal(err)
	}
	sim := mediasim.New()
	model, err := cv.NewSimModel(1, "person", 1)
	if err != nil {
		t.Fatal(err)
	}
	valid := func() cv.Config {
		return cv.Config{Namespace: cvNS, Holder: "cv-1", Schemas: reg, Capabilities: sim, Media: sim.Client("cv-1"),
			Models: map[string]cv.Model{people: model}}
	}
	tests := []struct {
		name, field string
		mod         func(*cv.Config)
	}{
		{"no namespace", "namespace", func(c *cv.Config) { c.Namespace = "" }},
		{"an MQTT namespace, which takes no lease", "namespace", func(c *cv.Config) { c.Namespace = statestore.MQTTNamespace("garage") }},
		{"no holder", "holder", func(c *cv.Config) { c.Holder = "" }},
		{"a holder that is no identifier", "holder", func(c *cv.Config) { c.Holder = "cv 1" }},
		{"no schemas", "schemas", func(c *cv.Config) { c.Schemas = nil }},
		{"schemas without health", "schemas", func(c *cv.Config) { c.Schemas = schema.NewRegistry() }},
		{"no capabilities", "capabilities", func(c *cv.Config) { c.Capabilities = nil }},
		{"no media", "media", func(c *cv.Config) { c.Media = nil }},
		{"no models", "models", func(c *cv.Config) { c.Models = nil }},
		{"a nil model", "models", func(c *cv.Config) { c.Models = map[string]cv.Model{people: nil} }},
		{"a model profile that is no identifier", "models", func(c *cv.Config) { c.Models = map[string]cv.Model{"a/b": model} }},
		{"negative health interval", "health_every", func(c *cv.Config) { c.HealthEvery = -1 }},
		{"status inside intents", "status_prefix", func(c *cv.Config) { c.StatusPrefix = "intents/status/" }},
		{"leases over intents", "lease_prefix", func(c *cv.Config) { c.LeasePrefix = "intents/" }},
		{"leases inside status", "lease_prefix", func(c *cv.Config) { c.LeasePrefix = "status/leases/" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.mod(&c)
			_, err := cv.New(c)
			var ce *cv.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("New: %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
	if _, err := cv.New(valid()); err != nil {
		t.Fatalf("the valid config: %v", err)
	}
}

// TestTargetOf: what a computer-vision intent may say, and the field each
// refusal names.
func TestTargetOf(t *testing.T) {
	t.Parallel()
	base := func(params map[string]string) intent.Intent {
		in := intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: frontDoor, MediaKind: intent.Video, VariantID: cameraMain,
			Parameters: map[string]json.RawMessage{}}
		for k, v := range params {
			in.Parameters[k] = json.RawMessage(v)
		}
		return in
	}
	tests := []struct {
		name   string
		in     intent.Intent
		want   cv.Target
		field  string // "" when accepted
		reason string
	}{
		{"model only", base(map[string]string{"cv.model": `"person-detector"`}),
			cv.Target{SourceID: frontDoor, MediaKind: intent.Video, VariantID: cameraMain, Model: people}, "", ""},
		{"with a minimum confidence, beside another service's parameter",
			base(map[string]string{"cv.model": `"person-detector"`, "cv.min_confidence": `0.6`, "transcoder.scale": `"720p"`}),
			cv.Target{SourceID: frontDoor, MediaKind: intent.Video, VariantID: cameraMain, Model: people, MinConfidence: 0.6}, "", ""},
		{"no model", base(nil), cv.Target{}, "parameters.cv.model", "required"},
		{"a model that is an object", base(map[string]string{"cv.model": `{"profile":"x"}`}), cv.Target{}, "parameters.cv.model", "must name a model profile"},
		{"a model that is no identifier", base(map[string]string{"cv.model": `"person detector"`}), cv.Target{}, "parameters.cv.model", "must name a model profile"},
		{"a confidence above 1", base(map[string]string{"cv.model": `"p"`, "cv.min_confidence": `1.5`}), cv.Target{}, "parameters.cv.min_confidence", "from 0 to 1"},
		{"a confidence that is a string", base(map[string]string{"cv.model": `"p"`, "cv.min_confidence": `"high"`}), cv.Target{}, "parameters.cv.min_confidence", "from 0 to 1"},
		{"an unknown cv parameter", base(map[string]string{"cv.model": `"p"`, "cv.zones": `[]`}), cv.Target{}, "parameters.cv.zones", "unknown computer-vision parameter"},
		{"a publish intent", func() intent.Intent {
			in := base(map[string]string{"cv.model": `"p"`})
			in.Role, in.RecordingMode = intent.Publish, intent.RecordingDisabled
			return in
		}(), cv.Target{}, "role", "want subscribe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := cv.TargetOf(tc.in)
			if tc.field == "" {
				if err != nil || got != tc.want {
					t.Fatalf("TargetOf = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var ve *intent.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Reason, tc.reason) {
				t.Fatalf("TargetOf: %v, want %s: %s", err, tc.field, tc.reason)
			}
		})
	}
	// Target.Intent writes what TargetOf reads, through the registry.
	reg := schema.NewRegistry()
	want := cv.Target{SourceID: frontDoor, MediaKind: intent.Video, Model: people, MinConfidence: 0.25}
	doc, err := intent.Encode(reg, want.Intent())
	if err != nil {
		t.Fatal(err)
	}
	in, err := intent.Parse(reg, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cv.TargetOf(in); err != nil || got != want {
		t.Fatalf("round trip %+v %v, want %+v", got, err, want)
	}
}

// TestSimModelIsDeterministic: the same frames give the same detections,
// and Corrupt affects exactly the next one.
func TestSimModelIsDeterministic(t *testing.T) {
	t.Parallel()
	if _, err := cv.NewSimModel(0, "person", 1); err == nil {
		t.Fatal("a model detecting on every 0th frame")
	}
	run := func(m *cv.SimModel) []cv.Detection {
		var out []cv.Detection
		for seq := uint64(1); seq <= 12; seq++ {
			out = append(out, m.Analyze(cv.Frame{Seq: seq})...)
		}
		return out
	}
	m := newModel(t)
	first, second := run(m), run(m)
	if len(first) != 2 || !reflect.DeepEqual(first, second) {
		t.Fatalf("runs %+v and %+v, want the same two detections", first, second)
	}
	if d := first[0]; d.Label != "person" || d.Confidence != 0.9 || d.Box == nil {
		t.Fatalf("detection %+v", d)
	}
	m.Corrupt(func(d *cv.Detection) { d.Confidence = 7 })
	third := run(m)
	if third[0].Confidence != 7 || third[1].Confidence != 0.9 {
		t.Fatalf("after Corrupt: %+v, want only the next detection changed", third)
	}
}

// TestEventSchema: what keeppeek.cv-event.v1 and the guard let out of a
// worker, field by field.
func TestEventSchema(t *testing.T) {
	t.Parallel()
	valid := cv.Event{SourceID: frontDoor, MediaKind: intent.Video, VariantID: cameraMain, Model: people, Label: "person",
		Confidence: 0.9, Box: &cv.Box{X: 0.1, Y: 0.2, W: 0.3, H: 0.4}, Frame: 5, ObservedAtMs: 1_750_000_000_000, Worker: "cv-1"}
	doc, err := cv.EncodeEvent(valid)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := cv.ParseEvent(doc); err != nil || !reflect.DeepEqual(back, valid) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	tests := []struct {
		name  string
		mod   func(*cv.Event)
		field string
	}{
		{"no source", func(e *cv.Event) { e.SourceID = "" }, "source_id"},
		{"a source session for a source", func(e *cv.Event) { e.SourceID = "session/7" }, "source_id"},
		{"an unknown media kind", func(e *cv.Event) { e.MediaKind = "depth" }, "media_kind"},
		{"no model", func(e *cv.Event) { e.Model = "" }, "model"},
		{"an upper-case label", func(e *cv.Event) { e.Label = "Person" }, "label"},
		{"a label of 65 characters", func(e *cv.Event) { e.Label = strings.Repeat("p", 65) }, "label"},
		{"a negative confidence", func(e *cv.Event) { e.Confidence = -0.1 }, "confidence"},
		{"a box past the frame", func(e *cv.Event) { e.Box.H = 1.2 }, "box.h"},
		{"frame 0", func(e *cv.Event) { e.Frame = 0 }, "frame"},
		{"a negative time", func(e *cv.Event) { e.ObservedAtMs = -1 }, "observed_at_ms"},
		{"no worker", func(e *cv.Event) { e.Worker = "" }, "worker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := valid
			b := *valid.Box
			ev.Box = &b
			tc.mod(&ev)
			_, err := cv.EncodeEvent(ev)
			if err == nil || !strings.Contains(err.Error(), cv.EventSchema+": "+tc.field+":") {
				t.Fatalf("EncodeEvent: %v, want a refusal of %s", err, tc.field)
			}
		})
	}
	if _, err := cv.ParseEvent([]byte(`{"source_id":"x","password":"p"}`)); err == nil || !strings.Contains(err.Error(), "credential") {
		t.Fatalf("ParseEvent of a document with a credential: %v", err)
	}
}

// TestRegisterSchemas: the health schema and the lease, composing with
// reconcile's registration, and never the event schema.
func TestRegisterSchemas(t *testing.T) {
	t.Parallel()
	reg := schema.NewRegistry()
	if err := reconcile.RegisterSchemas(reg); err != nil {
		t.Fatal(err)
	}
	if err := cv.RegisterSchemas(reg); err != nil {
		t.Fatalf("after reconcile.RegisterSchemas: %v", err)
	}
	if !reg.Has(cv.HealthSchema) || !reg.Has(lease.Schema) || reg.Has(cv.EventSchema) {
		t.Fatalf("registered %v", reg.Names())
	}
	if err := cv.RegisterSchemas(reg); err == nil {
		t.Fatal("a second registration of the health schema was accepted")
	}
}

// TestIntentLifecycle: an intent that stops being desired stops the
// analysis, unsubscribes and releases the lease; desired again, it is
// analysed again; a minimum confidence above the model's drops its
// detections without counting them as rejected; a model profile this
// worker does not run is Invalid and claims no lease; a deleted intent is
// torn down, its health deleted.
func TestIntentLifecycle(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := activeWorker(t, newModel(t))
	leaseKey := cv.LeaseKey("leases/", peopleTarget())
	put := func(in intent.Intent) {
		t.Helper()
		doc, err := intent.Encode(st.Reg, in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: cvNS, Key: intentKey, Schema: intent.Schema, Document: doc}); err != nil {
			t.Fatal(err)
		}
	}

	in := peopleTarget().Intent()
	in.Desired = false
	put(in)
	w.waitFor(cv.ReportStopped, intentKey)
	w.waitFor(cv.ReportReleased, intentKey)
	w.waitHealth("stopped", func(h cv.Health) bool { return h.State == cv.Stopped })
	if s := subsOf(sim, "cv-1"); len(s) != 0 {
		t.Fatalf("subscribed to an intent not desired: %+v", s)
	}
	if _, err := st.Get(ctx, coordinator, cvNS, leaseKey); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("lease of an intent not desired: %v", err)
	}

	picky := peopleTarget()
	picky.MinConfidence = 0.95 // above the model's 0.9
	put(picky.Intent())
	w.waitFor(cv.ReportSubscribed, intentKey)
	emit(t, sim, 10, 1)
	if h := w.waitAnalyzed(10); h.EventsPublished != 0 || h.EventsRejected != 0 {
		t.Fatalf("counters %+v, want both detections dropped below the minimum", h.Counters)
	}
	if n := len(sim.Events()); n != 0 {
		t.Fatalf("%d events below the minimum confidence published", n)
	}

	other := peopleTarget()
	other.Model = "face-detector"
	put(other.Intent())
	if r := w.waitFor(cv.ReportStopped, intentKey); !strings.Contains(r.Detail, "model not run here") {
		t.Fatalf("stopped: %s", r)
	}
	if r := w.waitFor(cv.ReportRejected, intentKey); !strings.Contains(r.Detail, `"face-detector" is not one this worker runs`) {
		t.Fatalf("rejected: %s", r)
	}
	w.waitHealth("invalid", func(h cv.Health) bool { return h.State == cv.Invalid && h.Model == "face-detector" })
	if s := subsOf(sim, "cv-1"); len(s) != 0 {
		t.Fatalf("subscribed for a model it does not run: %+v", s)
	}
	if n := st.Namespace(cvNS).Entries; n != 2 { // the intent and the health: no lease
		t.Fatalf("%d entries, want the intent and the health", n)
	}

	put(peopleTarget().Intent())
	w.waitFor(cv.ReportSubscribed, intentKey)
	if _, err := st.Delete(ctx, coordinator, statestore.DeleteRequest{Namespace: cvNS, Key: intentKey}); err != nil {
		t.Fatal(err)
	}
	if r := w.waitFor(cv.ReportStopped, intentKey); !strings.Contains(r.Detail, "intent gone") {
		t.Fatalf("stopped: %s", r)
	}
	if n := st.Namespace(cvNS).Entries; n != 0 {
		t.Fatalf("%d entries left after the intent was deleted, want none", n)
	}
	if s := subsOf(sim, "cv-1"); len(s) != 0 {
		t.Fatalf("still subscribed: %+v", s)
	}
}

// TestHealthNeverOverwritesAnotherWriter: an entry at the worker's health
// key that another worker wrote stays as it is; the worker says why and
// still analyses.
func TestHealthNeverOverwritesAnotherWriter(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	connect(t, sim)
	putIntent(t, st, peopleTarget())
	squatter, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: cvNS, Key: "status/cv-1/" + intentName, Schema: cv.HealthSchema,
		Document: []byte(`{"intent_key":"intents/front-door-people","intent_revision":1,"worker":"cv-7","state":"stopped","frames":0,"events_published":0,"events_rejected":0,"publish_failures":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, st, sim, statestore.Principal{ID: "cv-1", Admin: true}, newModel(t))
	r := w.waitFor(cv.ReportStatusFailed, intentKey)
	var se *reconcile.StatusError
	if !errors.As(r.Err, &se) || se.Owner != "coordinator" {
		t.Fatalf("status failure %v, want a StatusError naming the coordinator", r.Err)
	}
	w.waitFor(cv.ReportSubscribed, intentKey)
	if e, _ := st.Get(ctx, coordinator, cvNS, "status/cv-1/"+intentName); e.Revision != squatter.Revision {
		t.Fatalf("the other writer's health was replaced: %+v", e)
	}
}

// TestReconnectTakesFreshSnapshot: while the control channel is down the
// worker changes nothing (the analysis it runs goes on); an intent
// deleted meanwhile is torn down once a fresh snapshot is installed.
func TestReconnectTakesFreshSnapshot(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := activeWorker(t, newModel(t))
	w.conn.Drop()
	if _, err := st.Delete(ctx, coordinator, statestore.DeleteRequest{Namespace: cvNS, Key: intentKey}); err != nil {
		t.Fatal(err)
	}
	emit(t, sim, 5, 1) // still subscribed: nothing is torn down on a stale copy
	w.waitAnalyzed(5)
	w.noneSeen(cv.ReportStopped)
	if err := w.conn.Reconnect(st.Store); err != nil {
		t.Fatal(err)
	}
	if r := w.waitFor(cv.ReportResynced, ""); !strings.Contains(r.Detail, "after reconnect") {
		t.Fatalf("resynced: %s", r)
	}
	if r := w.waitFor(cv.ReportStopped, intentKey); !strings.Contains(r.Detail, "intent gone") {
		t.Fatalf("stopped: %s", r)
	}
	if s := subsOf(sim, "cv-1"); len(s) != 0 {
		t.Fatalf("still subscribed after the deleted intent's snapshot: %+v", s)
	}
}
