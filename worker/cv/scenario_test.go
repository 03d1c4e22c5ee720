package cv_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
)

// TestScenarioSourceSessionReplacedResubscribes: the worker resolves the
// intent's stable source against current capabilities, subscribes only
// once a variant is ready and the model profile advertised, and publishes
// the model's events; when the source reconnects under a new session,
// the old subscription ends with it and the worker subscribes again on the
// new one, without touching the intent. Health is its own entry, its
// counters rewritten at most every HealthEvery.
func TestScenarioSourceSessionReplacedResubscribes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	written := putIntent(t, st, peopleTarget())
	w := startWorker(t, st, sim, statestore.Principal{ID: "cv-1", Admin: true}, newModel(t))
	w.waitFor(cv.ReportClaimed, intentKey)
	if r := w.waitFor(cv.ReportWaiting, intentKey); !strings.Contains(r.Detail, "no session") {
		t.Fatalf("waiting: %s", r)
	}
	// Up, but advertising no model profile: still nothing to do.
	spec := frontDoorSpec()
	spec.Models = nil
	sim.Connect(frontDoor, spec)
	if err := sim.MarkReady(frontDoor, cameraMain); err != nil {
		t.Fatal(err)
	}
	if r := w.waitFor(cv.ReportWaiting, intentKey); !strings.Contains(r.Detail, `model profile "person-detector" is not advertised`) {
		t.Fatalf("waiting: %s", r)
	}
	if c := commandsOf(sim, "cv-1"); len(c) != 0 {
		t.Fatalf("commands before the capabilities allowed any: %v", c)
	}

	first := connect(t, sim)
	w.waitFor(cv.ReportSubscribed, intentKey)
	subs := subsOf(sim, "cv-1")
	if len(subs) != 1 || subs[0].Session != first || subs[0].VariantID != cameraMain {
		t.Fatalf("subscriptions %+v, want one to %s on %s", subs, cameraMain, first)
	}
	active := w.waitHealth("active", func(h cv.Health) bool { return h.State == cv.Active })
	emit(t, sim, 10, 1)
	w.waitAnalyzed(10)
	ev := events(t, sim)
	if len(ev) != 2 || ev[0].Frame != 5 || ev[1].Frame != 10 {
		t.Fatalf("events %+v, want frames 5 and 10", ev)
	}
	want := cv.Event{SourceID: frontDoor, MediaKind: "video", VariantID: cameraMain, Model: people, Label: "person", Confidence: 0.9,
		Box: ev[0].Box, Frame: 5, ObservedAtMs: st.Clock.Now().UnixMilli(), Worker: "cv-1"}
	if !reflect.DeepEqual(ev[0], want) || ev[0].Box == nil {
		t.Fatalf("event %+v, want %+v", ev[0], want)
	}
	// Counters alone wait for HealthEvery: the entry still says what it
	// said when the analysis started.
	if h, _ := health(t, st, "cv-1"); h != active || h.Frames != 0 {
		t.Fatalf("health rewritten for counters before HealthEvery: %+v", h)
	}

	// The source reconnects: a new session, the old subscription gone.
	second := connect(t, sim)
	if r := w.waitFor(cv.ReportStopped, intentKey); !strings.Contains(r.Detail, "ended with source session "+first) {
		t.Fatalf("stopped: %s", r)
	}
	w.waitFor(cv.ReportSubscribed, intentKey)
	subs = subsOf(sim, "cv-1")
	if len(subs) != 1 || subs[0].Session != second || second == first {
		t.Fatalf("subscriptions %+v, want one on the new session %s", subs, second)
	}
	// The server ended the first subscription itself: nothing to unsubscribe.
	if c := commandsOf(sim, "cv-1"); !reflect.DeepEqual(c, []string{"Subscribe", "Subscribe"}) {
		t.Fatalf("cv-1 sent %v, want two Subscribes", c)
	}
	emit(t, sim, 5, 1)
	w.waitAnalyzed(15)
	if ev := events(t, sim); len(ev) != 3 || ev[2].Frame != 5 {
		t.Fatalf("events after resubscribing %+v, want a third at the new subscription's frame 5", ev)
	}

	st.Clock.Advance(cv.DefaultHealthEvery)
	h := w.waitHealth("with the counters", func(h cv.Health) bool { return h.Frames == 15 })
	stored, entry := health(t, st, "cv-1")
	wantHealth := cv.Health{IntentKey: intentKey, IntentRevision: written.Revision, Worker: "cv-1", Model: people, State: cv.Active,
		SubscriptionID: subs[0].ID, VariantID: cameraMain, Counters: cv.Counters{Frames: 15, EventsPublished: 3}}
	if h != wantHealth || stored != wantHealth || entry.Owner != "cv-1" {
		t.Fatalf("health %+v, stored %+v (owner %s), want %+v", h, stored, entry.Owner, wantHealth)
	}
	// The intent is the coordinator's, untouched.
	if e, _ := st.Get(ctx, coordinator, cvNS, intentKey); e.Revision != written.Revision || e.Owner != "coordinator" {
		t.Fatalf("intent changed: %+v", e)
	}
	w.noneSeen(cv.ReportEventRejected)
}

// TestScenarioLeaseLostStops: another holder takes the lease from under
// the worker; in the same pass it halts the analysis and unsubscribes, so
// frames reach nobody and no further event is published, and it stands by,
// saying so in its health.
func TestScenarioLeaseLostStops(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := activeWorker(t, newModel(t))
	emit(t, sim, 5, 1)
	w.waitAnalyzed(5)
	if n := len(events(t, sim)); n != 1 {
		t.Fatalf("%d events before the lease was lost", n)
	}

	leaseKey := cv.LeaseKey("leases/", peopleTarget())
	if _, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: cvNS, Key: leaseKey,
		Schema: lease.Schema, Document: []byte(`{"holder":"cv-9"}`)}); err != nil {
		t.Fatal(err)
	}
	w.waitFor(cv.ReportLeaseLost, intentKey)
	if r := w.waitFor(cv.ReportStopped, intentKey); !strings.Contains(r.Detail, "lease lost") {
		t.Fatalf("stopped: %s", r)
	}
	w.waitFor(cv.ReportStandby, intentKey)
	if s := subsOf(sim, "cv-1"); len(s) != 0 {
		t.Fatalf("still subscribed after losing the lease: %+v", s)
	}
	if c := commandsOf(sim, "cv-1"); !reflect.DeepEqual(c, []string{"Subscribe", "Unsubscribe"}) {
		t.Fatalf("cv-1 sent %v", c)
	}
	emit(t, sim, 20, 0)
	if n := len(events(t, sim)); n != 1 {
		t.Fatalf("%d events after the lease was lost, want the 1 from before", n)
	}
	// A change of state is written at once, without waiting for HealthEvery.
	h := w.waitHealth("standby", func(h cv.Health) bool { return h.State == cv.Standby })
	if !strings.Contains(h.Reason, leaseKey) || h.SubscriptionID != "" || h.EventsPublished != 1 || h.Frames != 5 {
		t.Fatalf("standby health %+v", h)
	}
	w.noneSeen(cv.ReportClaimed)
}

// TestScenarioStandbyTakesOver: two workers, one lease. The standby never
// subscribes; when the holder dies (no release, its media session gone),
// its lease expires and the standby claims it and analyses, so the
// catalog receives each stream's events from one worker at a time.
func TestScenarioStandbyTakesOver(t *testing.T) {
	t.Parallel()
	st, sim, w1, _ := activeWorker(t, newModel(t))
	w2 := startWorker(t, st, sim, statestore.Principal{ID: "cv-2", Admin: true}, newModel(t))
	if r := w2.waitFor(cv.ReportStandby, intentKey); !strings.Contains(r.Detail, "held by cv-1") {
		t.Fatalf("standby: %s", r)
	}
	emit(t, sim, 5, 1) // only cv-1 is subscribed
	w1.waitAnalyzed(5)

	w1.stop()
	sim.EndPrincipal("cv-1")
	st.Clock.Advance(leaseTTL)
	w2.waitFor(cv.ReportClaimed, intentKey)
	w2.waitFor(cv.ReportSubscribed, intentKey)
	emit(t, sim, 5, 1)
	w2.waitAnalyzed(5)
	ev := events(t, sim)
	if len(ev) != 2 || ev[0].Worker != "cv-1" || ev[1].Worker != "cv-2" {
		t.Fatalf("events %+v, want one by cv-1 then one by cv-2", ev)
	}
}

// TestScenarioInvalidEventNeverPublished: the model produces a bad
// detection; the event built from it fails keeppeek.cv-event.v1 or the
// content guard, is never published, and is counted (with why) in the
// worker's health, while the valid events around it go out.
func TestScenarioInvalidEventNeverPublished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(*cv.Detection)
		why     string
	}{
		{"confidence above 1", func(d *cv.Detection) { d.Confidence = 1.5 }, "$.confidence: must be <= 1"},
		{"a label carrying a JPEG", func(d *cv.Detection) { d.Label = "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQAAAQ" }, "$.label: value"},
		{"a label the schema does not allow", func(d *cv.Detection) { d.Label = "Person Detected!" }, "$.label: does not match"},
		{"a box outside the frame", func(d *cv.Detection) { d.Box.W = 2 }, "$.box.w: must be <= 1"},
		{"a confidence JSON cannot hold", func(d *cv.Detection) { d.Confidence = math.NaN() }, "unsupported value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model := newModel(t)
			st, sim, w, _ := activeWorker(t, model)
			model.Corrupt(tc.corrupt) // the detection on frame 5; frame 10's is sound
			emit(t, sim, 10, 1)
			if r := w.waitFor(cv.ReportEventRejected, intentKey); !strings.Contains(r.Detail, tc.why) {
				t.Fatalf("rejected %q, want %q", r.Detail, tc.why)
			}
			got := w.waitAnalyzed(10)
			if got.EventsRejected != 1 || got.EventsPublished != 1 {
				t.Fatalf("counters %+v, want 1 rejected and 1 published", got.Counters)
			}
			ev := events(t, sim) // each parsed: the catalog holds only valid events
			if len(ev) != 1 || ev[0].Frame != 10 {
				t.Fatalf("catalog %+v, want frame 10's event only", ev)
			}
			st.Clock.Advance(cv.DefaultHealthEvery)
			h := w.waitHealth("counting the rejection", func(h cv.Health) bool { return h.EventsRejected == 1 })
			stored, _ := health(t, st, "cv-1")
			if stored != h || !strings.Contains(h.LastRejection, tc.why) || h.EventsPublished != 1 || h.State != cv.Active {
				t.Fatalf("health %+v (stored %+v), want one rejection saying %q", h, stored, tc.why)
			}
		})
	}
}

// TestEventsAreNeverStateEntries: the worker writes only its lease and its
// health, and a store holding the worker's schemas refuses an event
// document, whose schema no store registry holds.
func TestEventsAreNeverStateEntries(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := activeWorker(t, newModel(t))
	emit(t, sim, 10, 1)
	w.waitAnalyzed(10)
	st.Clock.Advance(cv.DefaultHealthEvery)
	w.waitHealth("with the counters", func(h cv.Health) bool { return h.EventsPublished == 2 })

	want := map[string]string{
		intentKey:                              schema.MediaIntentV1,
		cv.LeaseKey("leases/", peopleTarget()): lease.Schema,
		"status/cv-1/" + intentName:            cv.HealthSchema,
	}
	if n := st.Namespace(cvNS).Entries; n != len(want) {
		t.Fatalf("the namespace holds %d entries, want %d: the intent, the lease and the health", n, len(want))
	}
	for key, sch := range want {
		if e, err := st.Get(ctx, coordinator, cvNS, key); err != nil || e.Schema != sch {
			t.Fatalf("%s: %+v %v, want a %s entry", key, e, err, sch)
		}
	}
	doc := sim.Events()[0].Document
	_, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: cvNS, Key: "events/1", Schema: cv.EventSchema, Document: doc})
	if !errors.Is(err, statestore.ErrSchemaInvalid) || !errors.Is(err, schema.ErrUnknownSchema) {
		t.Fatalf("a store took an event: %v", err)
	}
}
