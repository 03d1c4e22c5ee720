package reconcile

import (
	"context"
	"fmt"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/intent"
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
