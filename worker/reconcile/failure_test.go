package reconcile_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// The specification's "Failure and recovery" list, one test each (the
// compare-and-set loser's reread and retry is intent's
// TestFailureCASLoserRereadsAndRetries).

const userNS = "user/alice"

var alice = statestore.Principal{ID: "alice"}

func startViewer(t *testing.T, st *storetest.Store, sim *mediasim.Server, mods ...func(*reconcile.Config)) *testWorker {
	viewer := func(c *reconcile.Config) {
		c.Namespace, c.IntentPrefix, c.Holder = userNS, "subscriptions/", "alice-browser"
	}
	return startWorker(t, st, sim, alice, append([]func(*reconcile.Config){viewer}, mods...)...)
}

// readySource brings front-door up with the 720p variant ready.
func readySource(t *testing.T, sim *mediasim.Server) string {
	t.Helper()
	session := sim.Connect(frontDoor, frontDoorSpec(reconcile.Variant{ID: out720, MediaKind: "video", Codec: "h264"}))
	if err := sim.MarkReady(frontDoor, out720); err != nil {
		t.Fatal(err)
	}
	return session
}

func bindingsOf(sim *mediasim.Server, principal string) []mediasim.Binding {
	var out []mediasim.Binding
	for _, b := range sim.Bindings() {
		if b.Principal == principal {
			out = append(out, b)
		}
	}
	return out
}

// TestFailureTTLExpiryStopsConsumers: an intent written with a TTL whose
// owner stops refreshing it EXPIREs; the worker unsubscribes and removes
// its status. A newer entry under the key is acted on again.
func TestFailureTTLExpiryStopsConsumers(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	readySource(t, sim)
	const key = "subscriptions/front-door"
	putIntent(t, st, alice, userNS, key, subscribeIntent(out720), 5*time.Second)
	viewer := startViewer(t, st, sim)
	viewer.waitFor(reconcile.EventBound, key)
	status(t, st, userNS, "alice-browser", "front-door")

	st.Clock.Advance(5 * time.Second) // the owner never refreshed it
	if ev := viewer.waitFor(reconcile.EventUnbound, key); !strings.Contains(ev.Detail, "intent gone") {
		t.Fatalf("unbound: %s", ev)
	}
	if b := bindingsOf(sim, "alice"); len(b) != 0 {
		t.Fatalf("still subscribed after the intent expired: %+v", b)
	}
	if _, err := st.Get(ctx, alice, userNS, "status/alice-browser/front-door"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("status of an expired intent: %v", err)
	}
	// A newer entry replaces it: acted on again.
	putIntent(t, st, alice, userNS, key, subscribeIntent(out720), 5*time.Second)
	viewer.waitFor(reconcile.EventBound, key)
	if b := bindingsOf(sim, "alice"); len(b) != 1 {
		t.Fatalf("bindings after the newer intent: %+v", b)
	}
}

// TestFailureWatcherReconnectsWithFreshSnapshot: the control channel drops;
// intents change meanwhile; on reconnect the worker takes a fresh snapshot
// (a new watch, no resume) and reconciles against it.
func TestFailureWatcherReconnectsWithFreshSnapshot(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	readySource(t, sim)
	kept, dropped, added := "subscriptions/kept", "subscriptions/dropped", "subscriptions/added"
	putIntent(t, st, alice, userNS, kept, subscribeIntent(out720), 0)
	putIntent(t, st, alice, userNS, dropped, subscribeIntent(out720), 0)
	viewer := startViewer(t, st, sim)
	viewer.waitFor(reconcile.EventBound, kept)
	viewer.waitFor(reconcile.EventBound, dropped)

	viewer.conn.Drop()
	if _, err := st.Delete(ctx, alice, statestore.DeleteRequest{Namespace: userNS, Key: dropped}); err != nil {
		t.Fatal(err)
	}
	putIntent(t, st, alice, userNS, added, subscribeIntent(""), 0)
	if err := viewer.conn.Reconnect(st.Store); err != nil {
		t.Fatal(err)
	}
	if ev := viewer.waitFor(reconcile.EventResynced, ""); !strings.Contains(ev.Detail, "after reconnect") {
		t.Fatalf("resynced: %s", ev)
	}
	viewer.waitFor(reconcile.EventUnbound, dropped)
	viewer.waitFor(reconcile.EventBound, added)
	if b := bindingsOf(sim, "alice"); len(b) != 2 {
		t.Fatalf("bindings after reconnect %+v, want kept and added", b)
	}
	viewer.noneSeen(reconcile.EventStoreError)
}

// publishKey is the publish intent of the leased-publisher tests.
const publishKey = "intents/front-door-video-720p"

// leasedPublisher is a store holding a publish intent for the front door's
// 720p output, a simulator whose front door source is connected, and
// transcoder-1 working it under a lease, bound.
func leasedPublisher(t *testing.T) (*storetest.Store, *mediasim.Server, *testWorker, statestore.Entry) {
	t.Helper()
	st := openStore(t)
	sim := mediasim.New()
	sim.Connect(frontDoor, frontDoorSpec())
	written := putIntent(t, st, coordinator, serviceNS, publishKey, publishIntent(), 0)
	w := startWorker(t, st, sim, statestore.Principal{ID: "transcoder-1", Admin: true}, withLeases)
	w.waitFor(reconcile.EventBound, publishKey)
	return st, sim, w, written
}

// TestFailureLeaseExpiresStandbyTakesOver: the publishing worker dies
// without releasing; its desired intent stays, its lease EXPIREs, and the
// standby claims it create-only and publishes.
func TestFailureLeaseExpiresStandbyTakesOver(t *testing.T) {
	t.Parallel()
	st, sim, w1, written := leasedPublisher(t)
	const key = publishKey
	w2 := startWorker(t, st, sim, statestore.Principal{ID: "transcoder-2", Admin: true}, withLeases)
	w2.waitFor(reconcile.EventStandby, key)

	// transcoder-1 fails: it stops renewing, and its media session ends.
	w1.stop()
	sim.EndPrincipal("transcoder-1")
	st.Clock.Advance(leaseTTL - time.Millisecond)
	w2.noneSeen(reconcile.EventClaimed)
	st.Clock.Advance(time.Millisecond)
	w2.waitFor(reconcile.EventClaimed, key)
	w2.waitFor(reconcile.EventBound, key)
	b := sim.Bindings()
	if len(b) != 1 || b[0].Principal != "transcoder-2" || b[0].VariantID != out720 {
		t.Fatalf("after takeover: %+v", b)
	}
	if e, _ := st.Get(ctx, coordinator, serviceNS, key); e.Revision != written.Revision {
		t.Fatalf("desired intent changed: %+v", e)
	}
	if s, _ := status(t, st, serviceNS, "transcoder-2", "front-door-video-720p"); s.State != reconcile.Active {
		t.Fatalf("standby's status %+v", s)
	}
	lease, err := st.Get(ctx, coordinator, serviceNS, "leases/front-door-video-"+out720)
	if err != nil || lease.Owner != "transcoder-2" {
		t.Fatalf("lease %+v %v", lease, err)
	}
}

// TestFailureSourceSessionChangeKeepsIntent: the source goes away and comes
// back under a new session ID; the intent (stable source_id) is never
// touched and the worker re-resolves it to the new session.
func TestFailureSourceSessionChangeKeepsIntent(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	first := readySource(t, sim)
	const key = "subscriptions/front-door"
	written := putIntent(t, st, alice, userNS, key, subscribeIntent(out720), 0)
	viewer := startViewer(t, st, sim)
	viewer.waitFor(reconcile.EventBound, key)

	sim.Disconnect(frontDoor)
	viewer.waitFor(reconcile.EventUnbound, key)
	if s, _ := status(t, st, userNS, "alice-browser", "front-door"); s.State != reconcile.Waiting {
		t.Fatalf("status while the source is away: %+v", s)
	}
	second := readySource(t, sim)
	viewer.waitFor(reconcile.EventBound, key)
	b := bindingsOf(sim, "alice")
	if len(b) != 1 || b[0].Session != second || second == first {
		t.Fatalf("bindings %+v, want one on the new session %s (old %s)", b, second, first)
	}
	if e, _ := st.Get(ctx, alice, userNS, key); e.Revision != written.Revision {
		t.Fatalf("the intent was rewritten: %+v", e)
	}
}

// TestFailureStoreRestartReestablishesWatches: the store restarts; an
// intent whose TTL lapsed while it was down is purged on open, a durable
// one comes back with its owner and policy, and the worker re-watches from
// a fresh snapshot and reconciles to exactly that.
func TestFailureStoreRestartReestablishesWatches(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	readySource(t, sim)
	durable, leased := "subscriptions/durable", "subscriptions/leased"
	written := putIntent(t, st, alice, userNS, durable, subscribeIntent(out720), 0)
	putIntent(t, st, alice, userNS, leased, subscribeIntent(""), 30*time.Second)
	viewer := startViewer(t, st, sim)
	viewer.waitFor(reconcile.EventBound, durable)
	viewer.waitFor(reconcile.EventBound, leased)

	// Close (every watch gets STORE_CLOSED), let the lease lapse while the
	// store is down, and reopen: it is purged before anything is served.
	st.Restart(func() { st.Clock.Advance(time.Minute) })
	if n := st.OpenReport().Expired; n != 1 {
		t.Fatalf("open purged %d leases, want 1", n)
	}
	if err := viewer.conn.Reconnect(st.Store); err != nil {
		t.Fatal(err)
	}
	viewer.waitFor(reconcile.EventUnbound, leased)
	if b := bindingsOf(sim, "alice"); len(b) != 1 || b[0].VariantID != out720 {
		t.Fatalf("bindings after restart %+v, want the durable intent's only", b)
	}
	e, err := st.Get(ctx, alice, userNS, durable)
	if err != nil || e.Revision != written.Revision || e.Owner != "alice" {
		t.Fatalf("durable intent after restart %+v %v", e, err)
	}
	if _, err := st.Get(ctx, statestore.Principal{ID: "bob"}, userNS, durable); !errors.Is(err, statestore.ErrPermissionDenied) {
		t.Fatalf("policy after restart: bob read alice's intent: %v", err)
	}
	// The worker follows the new store: a change after the restart reaches it.
	putIntent(t, st, alice, userNS, leased, subscribeIntent(""), 30*time.Second)
	viewer.waitFor(reconcile.EventBound, leased)
}

// TestStatusNeverOverwritesAnotherWriter: an entry at the worker's status
// key written by someone else (as a different worker document) is left
// exactly as it is; the worker reports why and still acts on the intent.
func TestStatusNeverOverwritesAnotherWriter(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	readySource(t, sim)
	const key = "subscriptions/front-door"
	putIntent(t, st, alice, userNS, key, subscribeIntent(out720), 0)
	squatter, err := st.Put(ctx, alice, statestore.PutRequest{Namespace: userNS, Key: "status/alice-browser/front-door", Schema: reconcile.StatusSchema,
		Document: []byte(`{"intent_key":"subscriptions/front-door","intent_revision":1,"worker":"alice-phone","state":"stopped"}`)})
	if err != nil {
		t.Fatal(err)
	}
	viewer := startViewer(t, st, sim)
	ev := viewer.waitFor(reconcile.EventStatusFailed, key)
	var se *reconcile.StatusError
	if !errors.As(ev.Err, &se) {
		t.Fatalf("status failure %v, want a StatusError", ev.Err)
	}
	viewer.waitFor(reconcile.EventBound, key)
	if e, _ := st.Get(ctx, alice, userNS, "status/alice-browser/front-door"); e.Revision != squatter.Revision {
		t.Fatalf("the other writer's status was replaced: %+v", e)
	}
}

// TestLosingTheLeaseStopsThePublication: another writer takes the lease
// key from under the holder; the holder stops its publication in the same
// pass and stands by, since the lease now says someone else acts.
func TestLosingTheLeaseStopsThePublication(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := leasedPublisher(t)
	const key = publishKey
	w.waitFor(reconcile.EventClaimed, key)
	if b := bindingsOf(sim, "transcoder-1"); len(b) != 1 {
		t.Fatalf("bindings %+v, want the holder's publication", b)
	}

	if _, err := st.Put(ctx, coordinator, statestore.PutRequest{Namespace: serviceNS, Key: "leases/front-door-video-" + out720,
		Schema: lease.Schema, Document: []byte(`{"holder":"transcoder-9"}`)}); err != nil {
		t.Fatal(err)
	}
	w.waitFor(reconcile.EventLeaseLost, key)
	// Standby is reported by the pass that stopped the publication, after it.
	w.waitFor(reconcile.EventStandby, key)
	if b := bindingsOf(sim, "transcoder-1"); len(b) != 0 {
		t.Fatalf("still publishing after losing the lease: %+v", b)
	}
	w.noneSeen(reconcile.EventClaimed)
}

// TestDeletedPublishIntentIsTornDown: deleting a leased publish intent
// stops its publication, releases its lease and deletes its status, so
// nothing the worker held outlives what it was for.
func TestDeletedPublishIntentIsTornDown(t *testing.T) {
	t.Parallel()
	st, sim, w, _ := leasedPublisher(t)
	const key = publishKey
	status(t, st, serviceNS, "transcoder-1", "front-door-video-720p")

	if _, err := st.Delete(ctx, coordinator, statestore.DeleteRequest{Namespace: serviceNS, Key: key}); err != nil {
		t.Fatal(err)
	}
	// Events are reported after the whole pass: the teardown is complete.
	if ev := w.waitFor(reconcile.EventUnbound, key); !strings.Contains(ev.Detail, "intent gone") {
		t.Fatalf("unbound: %s", ev)
	}
	if b := sim.Bindings(); len(b) != 0 {
		t.Fatalf("bindings after the intent was deleted: %+v", b)
	}
	if _, err := st.Get(ctx, coordinator, serviceNS, "leases/front-door-video-"+out720); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("lease after the intent was deleted: %v", err)
	}
	if _, err := st.Get(ctx, coordinator, serviceNS, "status/transcoder-1/front-door-video-720p"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("status after the intent was deleted: %v", err)
	}
}

// TestPublishIntentChangeStopsThePublication: a leased publication ends
// with a StopPublication whenever its intent no longer asks for it: made
// undesired, the worker stops it, releases the lease and reports Stopped;
// moved to another output, it stops the old publication before starting
// the new one, so the worker never publishes both.
func TestPublishIntentChangeStopsThePublication(t *testing.T) {
	t.Parallel()
	av1 := "browser-av1-1080p"
	tests := []struct {
		name   string
		change func(*intent.Intent)
		why    string   // in the Unbound event
		then   []string // the bindings after, by variant
	}{
		{"undesired", func(in *intent.Intent) { in.Desired = false }, "intent not desired", nil},
		{"another output", func(in *intent.Intent) { in.VariantID, in.OutputProfile = av1, av1 }, "intent changed", []string{av1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, sim, w, _ := leasedPublisher(t)
			first := bindingsOf(sim, "transcoder-1")
			if len(first) != 1 {
				t.Fatalf("bindings %+v, want the holder's publication", first)
			}
			in := publishIntent()
			tc.change(&in)
			putIntent(t, st, coordinator, serviceNS, publishKey, in, 0)
			if ev := w.waitFor(reconcile.EventUnbound, publishKey); !strings.Contains(ev.Detail, first[0].ID) || !strings.Contains(ev.Detail, tc.why) {
				t.Fatalf("unbound: %s, want %s stopped (%s)", ev, first[0].ID, tc.why)
			}
			var stops int
			for _, c := range sim.Calls() {
				if c.Principal == "transcoder-1" && c.Command == "StopPublication" {
					stops++
				}
			}
			if stops != 1 {
				t.Fatalf("%d StopPublication calls, want 1: %v", stops, callsBy(sim, "transcoder-1"))
			}
			if len(tc.then) > 0 {
				w.waitFor(reconcile.EventBound, publishKey)
			} else {
				w.waitFor(reconcile.EventReleased, publishKey)
			}
			var got []string
			for _, b := range bindingsOf(sim, "transcoder-1") {
				got = append(got, b.VariantID)
			}
			if !slices.Equal(got, tc.then) {
				t.Fatalf("publications after the change %v, want %v", got, tc.then)
			}
		})
	}
}

// TestStopReleasesTheLeaseAfterThePublication: a worker stopped on purpose
// stops its publication and then releases its lease, so the standby
// claims and publishes although the clock never moves (no TTL to wait
// for), its StartPublication finds the output free, and the stopped
// worker's status says Stopped.
func TestStopReleasesTheLeaseAfterThePublication(t *testing.T) {
	t.Parallel()
	st, sim, w1, _ := leasedPublisher(t)
	const key = publishKey
	w2 := startWorker(t, st, sim, statestore.Principal{ID: "transcoder-2", Admin: true}, withLeases)
	w2.waitFor(reconcile.EventStandby, key)

	w1.stopGracefully()
	if ev := w1.waitFor(reconcile.EventUnbound, key); !strings.Contains(ev.Detail, "worker stopping") {
		t.Fatalf("unbound: %s", ev)
	}
	w1.waitFor(reconcile.EventReleased, key)
	w2.waitFor(reconcile.EventClaimed, key)
	w2.waitFor(reconcile.EventBound, key)
	var order []string
	for _, c := range sim.Calls() {
		s := c.Principal + " " + c.Command
		if c.Err != nil {
			s += " error"
		}
		order = append(order, s)
	}
	want := []string{"transcoder-1 StartPublication", "transcoder-1 StopPublication", "transcoder-2 StartPublication"}
	if !slices.Equal(order, want) {
		t.Fatalf("commands %v, want %v", order, want)
	}
	if b := sim.Bindings(); len(b) != 1 || b[0].Principal != "transcoder-2" {
		t.Fatalf("bindings after the handover: %+v", b)
	}
	if s, _ := status(t, st, serviceNS, "transcoder-1", "front-door-video-720p"); s.State != reconcile.Stopped || !strings.Contains(s.Reason, "stopped") {
		t.Fatalf("the stopped worker's status: %+v", s)
	}
	lease, err := st.Get(ctx, coordinator, serviceNS, "leases/front-door-video-"+out720)
	if err != nil || lease.Owner != "transcoder-2" {
		t.Fatalf("lease %+v %v", lease, err)
	}
}
