package reconcile_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// TestScenario4TranscoderOwnsOutputVariant: a transcoder reacts to a
// publication intent only after resolving current capabilities and owns
// the actual output variant; a second worker loses the lease and stays
// standby; when topology changes under the holder, StartPublication's
// conflict is reported and retried, never overridden by the lease. It runs
// with the workers reaching the simulator in process and over HTTP.
func TestScenario4TranscoderOwnsOutputVariant(t *testing.T) {
	t.Parallel()
	for _, link := range mediaLinks {
		t.Run(link.name, func(t *testing.T) {
			t.Parallel()
			scenario4(t, link)
		})
	}
}

func scenario4(t *testing.T, link mediaLink) {
	st := openStore(t)
	sim := mediasim.New()
	const key, name = "intents/front-door-video-720p", "front-door-video-720p"
	leaseKey := "leases/front-door-video-" + out720
	written := putIntent(t, st, coordinator, serviceNS, key, publishIntent(), 0)

	w1 := startWorker(t, st, sim, statestore.Principal{ID: "transcoder-1", Admin: true}, withLeases, link.media(t, sim, "transcoder-1"))
	if ev := w1.waitFor(reconcile.EventClaimed, key); !strings.Contains(ev.Detail, leaseKey) {
		t.Fatalf("claimed %q, want the lease %s", ev.Detail, leaseKey)
	}
	w1.waitFor(reconcile.EventWaiting, key) // no source session yet
	w2 := startWorker(t, st, sim, statestore.Principal{ID: "transcoder-2", Admin: true}, withLeases, link.media(t, sim, "transcoder-2"))
	if ev := w2.waitFor(reconcile.EventStandby, key); !strings.Contains(ev.Detail, "held by transcoder-1") {
		t.Fatalf("standby %q", ev.Detail)
	}
	if calls := sim.Calls(); len(calls) != 0 {
		t.Fatalf("commands sent before the source had a session: %+v", calls)
	}
	if s, _ := status(t, st, serviceNS, "transcoder-1", name); s.State != reconcile.Waiting || !strings.Contains(s.Reason, "no session") {
		t.Fatalf("status while the source is down: %+v", s)
	}

	// The source comes up: the holder resolves its session and publishes.
	session := sim.Connect(frontDoor, frontDoorSpec())
	w1.waitFor(reconcile.EventBound, key)
	pubs := sim.Bindings()
	if len(pubs) != 1 || !pubs[0].Publish || pubs[0].Principal != "transcoder-1" || pubs[0].VariantID != out720 || pubs[0].Session != session {
		t.Fatalf("bindings %+v, want transcoder-1 publishing %s on %s", pubs, out720, session)
	}
	src, _ := sim.Source(frontDoor)
	if v, ok := src.Variant(out720); !ok || v.Owner != "transcoder-1" {
		t.Fatalf("output variant %+v, want owned by transcoder-1", v)
	}
	if got := sim.Calls()[0].Pub.RecordingMode; got != "disabled" {
		t.Fatalf("StartPublication recording_mode %q, want the intent's", got)
	}
	s, se := status(t, st, serviceNS, "transcoder-1", name)
	if s.State != reconcile.Active || s.VariantID != out720 || s.IntentRevision != written.Revision || se.Owner != "transcoder-1" {
		t.Fatalf("status %+v owner %s", s, se.Owner)
	}

	// Renewals keep the lease; the standby never acts.
	for i := 0; i < 3; i++ {
		st.Clock.Advance(leaseTTL / 3)
		w1.waitFor(reconcile.EventRenewed, key)
	}
	if c := callsBy(sim, "transcoder-2"); len(c) != 0 {
		t.Fatalf("the standby sent %v", c)
	}

	// Topology changes under the holder: the source reconnects, and the
	// output variant is already produced by a publisher this service does
	// not coordinate with. The lease says transcoder-1 should act;
	// StartPublication says the variant is taken.
	sim.Connect(frontDoor, frontDoorSpec(reconcile.Variant{ID: out720, MediaKind: "video", Codec: "h264", Owner: "transcoder-elsewhere"}))
	ev := w1.waitFor(reconcile.EventCommandError, key)
	if !errors.Is(ev.Err, &reconcile.CommandError{Code: reconcile.PublicationConflict}) {
		t.Fatalf("want PUBLICATION_ERROR_CODE_CONFLICT, got %v", ev.Err)
	}
	if s, _ := status(t, st, serviceNS, "transcoder-1", name); s.State != reconcile.Failed || !strings.Contains(s.Reason, "CONFLICT") {
		t.Fatalf("status after the conflict: %+v", s)
	}
	// The other publisher goes away: the holder's retry now owns it.
	if err := sim.RemoveVariant(frontDoor, out720); err != nil {
		t.Fatal(err)
	}
	w1.waitFor(reconcile.EventBound, key)
	src, _ = sim.Source(frontDoor)
	if v, ok := src.Variant(out720); !ok || v.Owner != "transcoder-1" || src.SessionID == session {
		t.Fatalf("after retry: variant %+v on session %s", v, src.SessionID)
	}
	// A success, the refusal (retried at most once more, when the
	// capability change that woke the pass raced its reading of the
	// capabilities), and the success after the variant was freed.
	ok, refused := "StartPublication "+out720, "StartPublication "+out720+" error"
	got := callsBy(sim, "transcoder-1")
	if n := len(got); n < 3 || n > 4 || got[0] != ok || got[n-1] != ok || slices.ContainsFunc(got[1:n-1], func(c string) bool { return c != refused }) {
		t.Fatalf("transcoder-1 sent %v, want %s, one or two refusals, %s", got, ok, ok)
	}
	if c := callsBy(sim, "transcoder-2"); len(c) != 0 {
		t.Fatalf("the standby sent %v", c)
	}
	// The desired intent is the coordinator's, untouched.
	if e, _ := st.Get(ctx, coordinator, serviceNS, key); e.Revision != written.Revision || e.Owner != "coordinator" {
		t.Fatalf("intent changed: %+v", e)
	}
	w2.noneSeen(reconcile.EventClaimed)
}

// TestScenario5ViewerWaitsForReadyVariant: a viewer's subscription intent
// picks a variant and subscribes only once it is ready; one that never
// becomes ready never produces a Subscribe; one without a variant leaves
// the choice to automatic selection. It runs with the viewer reaching the
// simulator in process and over HTTP.
func TestScenario5ViewerWaitsForReadyVariant(t *testing.T) {
	t.Parallel()
	for _, link := range mediaLinks {
		t.Run(link.name, func(t *testing.T) {
			t.Parallel()
			scenario5(t, link)
		})
	}
}

func scenario5(t *testing.T, link mediaLink) {
	st := openStore(t)
	sim := mediasim.New()
	const ns = "user/alice"
	alice := statestore.Principal{ID: "alice"}
	exact, never, auto := "subscriptions/exact", "subscriptions/never", "subscriptions/auto"
	putIntent(t, st, alice, ns, exact, subscribeIntent(out720), 0)
	putIntent(t, st, alice, ns, never, subscribeIntent("browser-av1-1080p"), 0)
	putIntent(t, st, alice, ns, auto, subscribeIntent(""), 0)
	viewer := startWorker(t, st, sim, alice, func(c *reconcile.Config) {
		c.Namespace, c.IntentPrefix, c.Holder = ns, "subscriptions/", "alice-browser"
	}, link.media(t, sim, alice.ID))
	for _, k := range []string{exact, never, auto} {
		viewer.waitFor(reconcile.EventWaiting, k)
	}
	// Variants appear, not yet ready: still nothing to subscribe to.
	sim.Connect(frontDoor, frontDoorSpec(
		reconcile.Variant{ID: out720, MediaKind: "video", Codec: "h264"},
		reconcile.Variant{ID: "browser-av1-1080p", MediaKind: "video", Codec: "av1"},
		reconcile.Variant{ID: "camera-main", MediaKind: "video", Codec: "h264"}))
	if ev := viewer.waitFor(reconcile.EventWaiting, exact); !strings.Contains(ev.Detail, "not ready") {
		t.Fatalf("exact intent: %s", ev)
	}
	if c := callsBy(sim, "alice"); len(c) != 0 {
		t.Fatalf("subscribed before any variant was ready: %v", c)
	}
	// The desired variant becomes ready: the exact intent subscribes to it,
	// and automatic selection (which picks the smallest ready ID) too.
	if err := sim.MarkReady(frontDoor, out720); err != nil {
		t.Fatal(err)
	}
	viewer.waitFor(reconcile.EventBound, exact)
	viewer.waitFor(reconcile.EventBound, auto)
	// The pass that bound them reconsidered the never-ready intent too
	// (events are reported after the whole pass): it still waits.
	s, _ := status(t, st, ns, "alice-browser", "never")
	if s.State != reconcile.Waiting || !strings.Contains(s.Reason, `"browser-av1-1080p" is not ready`) {
		t.Fatalf("never-ready status %+v", s)
	}
	got := callsBy(sim, "alice")
	slices.Sort(got)
	if want := []string{"Subscribe ", "Subscribe " + out720}; !reflect.DeepEqual(got, want) {
		t.Fatalf("alice sent %v, want %v (automatic selection, then the exact variant)", got, want)
	}
	var variants []string
	for _, b := range sim.Bindings() {
		variants = append(variants, b.VariantID)
	}
	if want := []string{out720, out720}; !reflect.DeepEqual(variants, want) {
		t.Fatalf("subscribed to %v, want %v", variants, want)
	}
	if s, _ := status(t, st, ns, "alice-browser", "auto"); s.State != reconcile.Active || s.VariantID != out720 {
		t.Fatalf("auto status %+v: want the variant the server selected", s)
	}
}
