package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/stateclient"
	"github.com/keeppeek/statestore/worker/watchcache"
)

func registry(t *testing.T) *schema.Registry {
	t.Helper()
	r := schema.NewRegistry()
	if err := RegisterSchemas(r); err != nil {
		t.Fatal(err)
	}
	return r
}

type nopCaps struct{}

func (nopCaps) Source(string) (Source, bool) { return Source{}, false }
func (nopCaps) Changed() <-chan struct{}     { return nil }

type nopMedia struct{}

func (nopMedia) Subscribe(context.Context, SubscribeRequest) (Binding, error) { return Binding{}, nil }
func (nopMedia) Unsubscribe(context.Context, string) error                    { return nil }
func (nopMedia) StartPublication(context.Context, PublicationRequest) (Binding, error) {
	return Binding{}, nil
}
func (nopMedia) StopPublication(context.Context, string) error { return nil }

// fakeCaps serves one source whose session a test changes by hand.
type fakeCaps struct{ src Source }

func (c *fakeCaps) Source(id string) (Source, bool) { return c.src, id == c.src.ID }
func (c *fakeCaps) Changed() <-chan struct{}        { return nil }

// countingMedia accepts every command and counts them.
type countingMedia struct {
	nopMedia
	subscribes, unsubscribes int
}

func (m *countingMedia) Subscribe(_ context.Context, req SubscribeRequest) (Binding, error) {
	m.subscribes++
	return Binding{ID: fmt.Sprintf("sub-%d", m.subscribes), VariantID: req.VariantID}, nil
}

func (m *countingMedia) Unsubscribe(context.Context, string) error {
	m.unsubscribes++
	return nil
}

// TestNoCommandOnAStaleCache drives passes by hand: once the control
// channel dropped, the intent cache follows no watch, and a pass neither
// starts nor stops anything, even when the capabilities say the binding's
// source session ended; after the reconnect's fresh snapshot it acts again.
func TestNoCommandOnAStaleCache(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, RegisterSchemas)
	const ns, key = "user/alice", "subscriptions/front-door"
	alice := statestore.Principal{ID: "alice"}
	doc, err := intent.Encode(st.Reg, intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: "front-door", MediaKind: intent.Video, VariantID: "cam"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), alice, statestore.PutRequest{Namespace: ns, Key: key, Schema: intent.Schema, Document: doc}); err != nil {
		t.Fatal(err)
	}
	caps := &fakeCaps{src: Source{ID: "front-door", SessionID: "s-1", Streams: []intent.MediaKind{intent.Video},
		Variants: []Variant{{ID: "cam", MediaKind: intent.Video, Codec: "h264", Ready: true}}}}
	media := &countingMedia{}
	r, err := New(Config{Namespace: ns, IntentPrefix: "subscriptions/", Holder: "alice-browser", Schemas: st.Reg,
		Capabilities: caps, Media: media, Clock: st.Clock})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stateclient.Dial(st.Store, alice, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	r.conn, r.ctx = conn, context.Background()
	r.intents = watchcache.New(conn, ns, "subscriptions/")
	if err := r.intents.Start(); err != nil {
		t.Fatal(err)
	}
	r.pass()
	if media.subscribes != 1 {
		t.Fatalf("%d subscribes on a live cache, want 1", media.subscribes)
	}

	conn.Drop()
	r.drain()
	if r.intents.Synced() {
		t.Fatal("test setup: the cache still follows a watch after the drop")
	}
	caps.src.SessionID = "s-2" // the source reconnected meanwhile
	r.pass()
	if media.subscribes != 1 || media.unsubscribes != 0 {
		t.Fatalf("a pass on a stale cache sent %d subscribes and %d unsubscribes, want none", media.subscribes-1, media.unsubscribes)
	}

	if err := conn.Reconnect(st.Store); err != nil {
		t.Fatal(err)
	}
	r.drain()
	r.pass()
	if media.subscribes != 2 {
		t.Fatalf("%d subscribes after the reconnect, want the binding on the new session", media.subscribes)
	}
}

// publishingMedia accepts every publication and records which are live.
type publishingMedia struct {
	nopMedia
	started int
	live    map[string]bool
}

func (m *publishingMedia) StartPublication(_ context.Context, req PublicationRequest) (Binding, error) {
	m.started++
	id := fmt.Sprintf("pub-%d", m.started)
	if m.live == nil {
		m.live = map[string]bool{}
	}
	m.live[id] = true
	return Binding{ID: id, VariantID: req.VariantID}, nil
}

func (m *publishingMedia) StopPublication(_ context.Context, id string) error {
	if !m.live[id] {
		return &CommandError{Code: PublicationNotFound, Message: id}
	}
	delete(m.live, id)
	return nil
}

// TestLeaseLostAtRenewalStopsThePublication drives passes by hand: the
// lease is taken from under its holder while the lease watch has not told
// it yet (the update waits in its inbox), so the renewal is what finds the
// loss. That pass stops the publication the lease guarded, then and there,
// and the holder stands by: it starts nothing again, before the watch
// catches up or after.
func TestLeaseLostAtRenewalStopsThePublication(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, RegisterSchemas)
	const ns, key = "service/transcoder-a", "intents/front-door-video-720p"
	coord := statestore.Principal{ID: "coordinator", Admin: true}
	in := intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video,
		VariantID: "out-720p", OutputProfile: "out-720p", RecordingMode: intent.RecordingDisabled}
	doc, err := intent.Encode(st.Reg, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), coord, statestore.PutRequest{Namespace: ns, Key: key, Schema: intent.Schema, Document: doc}); err != nil {
		t.Fatal(err)
	}
	caps := &fakeCaps{src: Source{ID: "front-door", SessionID: "s-1", Streams: []intent.MediaKind{intent.Video}, Publishable: true,
		Profiles: []Profile{{ID: "out-720p", Codec: "h264"}}}}
	media := &publishingMedia{}
	const ttl, renew = 10 * time.Second, 3 * time.Second
	r, err := New(Config{Namespace: ns, LeasePrefix: "leases/", Holder: "transcoder-1", Schemas: st.Reg, Capabilities: caps, Media: media,
		Clock: st.Clock, Lease: lease.Config{TTL: ttl, RenewEvery: renew, Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stateclient.Dial(st.Store, statestore.Principal{ID: "transcoder-1", Admin: true}, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	r.conn, r.ctx = conn, context.Background()
	r.intents = watchcache.New(conn, ns, "intents/", watchcache.WithWatchID("intents"))
	r.leases = watchcache.New(conn, ns, "leases/", watchcache.WithWatchID("leases"))
	for _, c := range r.caches() {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	r.pass() // claims the lease and publishes
	r.drain()
	r.pass()
	tr := r.tracked[key]
	if len(media.live) != 1 || tr == nil || tr.lease == nil || !tr.lease.Held() {
		t.Fatalf("after the first passes: publications %v, tracked %+v; want the holder publishing", media.live, tr)
	}
	r.events = nil

	// Another writer takes the lease key; the holder's watch has not
	// delivered it (no drain), and its renewal falls due.
	if _, err := st.Put(context.Background(), coord, statestore.PutRequest{Namespace: ns, Key: tr.lease.Key(), Schema: lease.Schema,
		Document: []byte(`{"holder":"transcoder-9"}`)}); err != nil {
		t.Fatal(err)
	}
	st.Clock.Advance(renew)
	r.pass()
	var lost bool
	for _, e := range r.events {
		lost = lost || e.Kind == EventLeaseLost && e.Intent == key
	}
	if !lost || len(media.live) != 0 {
		t.Fatalf("after the renewal found the lease taken: events %v, publications %v; want lease-lost and none", r.events, media.live)
	}
	r.drain()
	r.pass()
	if len(media.live) != 0 || media.started != 1 {
		t.Fatalf("after the watch caught up: %d publications started, live %v; want the first only, stopped", media.started, media.live)
	}
}
