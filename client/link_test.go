package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// A Linked is what the worker kit takes as its connection.
var _ reconcile.Conn = (*client.Linked)(nil)

// TestLinkedDeliversInOrderAndHearsTheConnection: a Linked's raw watch
// calls answer as stateclient.Local's do, its Link sees every message in
// arrival order, then Disconnected after the last message of a lost
// connection, then Reconnected once a new one is up; a Link made while
// disconnected hears Reconnected too.
func TestLinkedDeliversInOrderAndHearsTheConnection(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	s := startServer(t, serverOptions{refuse: &refuse})
	c := dial(t, nil, s.url)
	link := newRecordLink()
	k := c.Link(link)
	const ns = "service/linked"
	mustPut(t, c, putReq(ns, "k/0", 0))
	mustPut(t, c, putReq(ns, "other", 0))
	rev, entries, err := k.Watch("w1", ns, "k/")
	if err != nil {
		t.Fatal(err)
	}
	if rev != 2 || len(entries) != 1 || entries[0].Key != "k/0" || entries[0].Namespace != ns {
		t.Fatalf("snapshot at %d: %v", rev, entries)
	}
	if _, _, err := k.Watch("w1", ns, ""); statestore.CodeOf(err) != statestore.InvalidArgument {
		t.Fatalf("a second watch w1: %v, want INVALID_ARGUMENT", err)
	}
	mustPut(t, c, putReq(ns, "k/a", 1))
	mustPut(t, c, putReq(ns, "other", 1))
	mustPut(t, c, putReq(ns, "k/b", 2))
	if _, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: ns, Key: "k/a"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"snapshot w1 1 entries", "update w1 1 PUT k/a", "update w1 2 PUT k/b"}
	if got := link.waitFor(t, "update w1 3 DELETE k/a"); !slices.Equal(got, want) {
		t.Fatalf("the link saw %v, then the delete; want %v", got, want)
	}
	if err := k.Ack("w1", 3); err != nil {
		t.Fatal(err)
	}
	if err := k.Ack("w1", 9); statestore.CodeOf(err) != statestore.InvalidArgument {
		t.Fatalf("an ack of a sequence never sent: %v, want INVALID_ARGUMENT", err)
	}

	// The connection drops and cannot come back until the server accepts
	// the token again.
	refuse.Store(true)
	s.dropSessions(t)
	if got := link.waitFor(t, "disconnected"); len(got) != 0 {
		t.Fatalf("the link saw %v before disconnected", got)
	}
	for name, err := range map[string]error{
		"watch":   func() error { _, _, err := k.Watch("w2", ns, ""); return err }(),
		"ack":     k.Ack("w1", 3),
		"unwatch": k.Unwatch("w1"),
	} {
		if se := wantCode(t, err, statestore.Unavailable, "connection"); se == nil {
			t.Fatalf("%s while disconnected", name)
		}
	}
	late := newRecordLink()
	c.Link(late)
	refuse.Store(false)
	if got := link.waitFor(t, "reconnected"); len(got) != 0 {
		t.Fatalf("the link saw %v between disconnected and reconnected", got)
	}
	if got := late.waitFor(t, "reconnected"); len(got) != 0 {
		t.Fatalf("a Link made while disconnected saw %v first", got)
	}
	// The watch died with the session: a new one under the same id.
	if _, entries, err := k.Watch("w1", ns, "k/"); err != nil || len(entries) != 2 {
		t.Fatalf("watch after the reconnection: %d entries, %v", len(entries), err)
	}
	if err := k.Unwatch("w1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Unwatch("w1"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("a second unwatch: %v, want NOT_FOUND", err)
	}
}

// TestLinkedDeliverMayCallBack: Deliver runs on the Linked's own goroutine,
// so a Link acknowledging from inside Deliver (as a store session's Sink
// may) does not wait for itself, and keeps its watch past the server's
// bound of unacknowledged updates.
func TestLinkedDeliverMayCallBack(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	link := newRecordLink()
	var k *client.Linked
	link.setRefuse(func(m watch.Message) error {
		if u, ok := m.(*watch.Update); ok {
			return k.Ack(u.WatchID, u.Sequence)
		}
		return nil
	})
	k = c.Link(link)
	if _, _, err := k.Watch("w", "service/ack", ""); err != nil {
		t.Fatal(err)
	}
	const n = 80 // past the default bound of 32
	for i := range n {
		mustPut(t, c, putReq("service/ack", fmt.Sprintf("k%d", i%5), i))
	}
	got := link.waitFor(t, fmt.Sprintf("update w %d PUT k%d", n, (n-1)%5))
	for _, s := range got {
		if s[:6] == "closed" {
			t.Fatalf("the watch closed: %v", got)
		}
	}
}

// TestLinkedRefusedDeliveryClosesTheWatch: a Deliver error ends the watch
// as the store's registry would end it for its Sink: unwatched on the
// server, its *watch.Closed offered to the Link, nothing more of it after.
func TestLinkedRefusedDeliveryClosesTheWatch(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	link := newRecordLink()
	link.setRefuse(func(m watch.Message) error {
		if u, ok := m.(*watch.Update); ok && u.WatchID == "w" {
			return errors.New("the worker's queue is full")
		}
		return nil
	})
	k := c.Link(link)
	if _, _, err := k.Watch("w", "service/refuse", ""); err != nil {
		t.Fatal(err)
	}
	mustPut(t, c, putReq("service/refuse", "a", 1))
	if got := link.waitFor(t, "closed w BUFFER_OVERFLOW"); !slices.Equal(got, []string{"snapshot w 0 entries", "update w 1 PUT a"}) {
		t.Fatalf("before the closure the link saw %v", got)
	}
	eventually(t, "the server removes the watch", func() bool { return s.store.Stats().Watches.Open == 0 })
	mustPut(t, c, putReq("service/refuse", "b", 2))
	if _, _, err := k.Watch("w2", "service/refuse", ""); err != nil {
		t.Fatal(err)
	}
	if got := link.waitFor(t, "snapshot w2 2 entries"); len(got) != 0 {
		t.Fatalf("the closed watch went on delivering: %v", got)
	}
	// A new watch under the refused one's id is delivered in full.
	link.setRefuse(nil)
	if _, _, err := k.Watch("w", "service/refuse", ""); err != nil {
		t.Fatal(err)
	}
	mustPut(t, c, putReq("service/refuse", "c", 3))
	if got := link.waitFor(t, "update w 1 PUT c"); !slices.Contains(got, "snapshot w 2 entries") {
		t.Fatalf("the new watch w delivered %v before its update, want its snapshot", got)
	}
	// A refused snapshot closes its watch with SNAPSHOT_DELIVERY_FAILED.
	refusing := newRecordLink()
	refusing.setRefuse(func(m watch.Message) error {
		if _, ok := m.(*watch.Snapshot); ok {
			return errors.New("no room for a snapshot")
		}
		return nil
	})
	if _, _, err := c.Link(refusing).Watch("w3", "service/refuse", ""); err != nil {
		t.Fatal(err)
	}
	refusing.waitFor(t, "closed w3 SNAPSHOT_DELIVERY_FAILED")
}

// TestReconcilerOverTheWireSurvivesDroppedSessions runs worker/reconcile
// over client.Link against a server on loopback TCP, with mediasim as its
// media server. The server drops every session and refuses the token for
// a while; an intent is added meanwhile. The reconciler re-snapshots once
// reconnected and acts on the new intent, and the publication it held is
// neither stopped nor started twice.
func TestReconcilerOverTheWireSurvivesDroppedSessions(t *testing.T) {
	t.Parallel()
	reg := schema.NewRegistry()
	if err := reconcile.RegisterSchemas(reg); err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Bool
	s := startServer(t, serverOptions{schemas: reg, refuse: &refuse})
	const ns, holder = "service/transcoder-a", "transcoder-1"
	sim := mediasim.New()
	sim.Connect("front-door", mediasim.SourceSpec{Streams: []intent.MediaKind{intent.Video, intent.Audio}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: "browser-h264-720p", Codec: "h264"}, {ID: "browser-av1-1080p", Codec: "av1"}}})
	c := dial(t, nil, s.url)
	publish := func(key, output string) {
		doc, err := intent.Encode(reg, intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video,
			VariantID: output, OutputProfile: output, Priority: 100, RecordingMode: intent.RecordingDisabled})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: intent.Schema, Document: doc}); err != nil {
			t.Fatal(err)
		}
	}
	publish("intents/front-door-720p", "browser-h264-720p")

	events := make(chan reconcile.Event, 4096)
	r, err := reconcile.New(reconcile.Config{Namespace: ns, Holder: holder, Schemas: reg, Capabilities: sim,
		Media: sim.Client(holder), Observe: func(e reconcile.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Link(r)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx, k) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	waitEvent := func(kind reconcile.EventKind, key, detail string) {
		t.Helper()
		deadline := time.After(hangGuard)
		for {
			select {
			case e := <-events:
				if e.Kind == kind && (key == "" || e.Intent == key) && (detail == "" || containing(detail)(e.Detail)) {
					return
				}
				if e.Kind == reconcile.EventUnbound {
					t.Fatalf("the reconciler unbound: %s", e)
				}
			case <-deadline:
				t.Fatalf("no %s event for %q", kind, key)
			}
		}
	}
	waitEvent(reconcile.EventBound, "intents/front-door-720p", "")

	refuse.Store(true)
	s.dropSessions(t)
	publish("intents/front-door-1080p", "browser-av1-1080p")
	refuse.Store(false)
	waitEvent(reconcile.EventResynced, "", "after reconnect")
	waitEvent(reconcile.EventBound, "intents/front-door-1080p", "")

	var starts []string
	for _, call := range sim.Calls() {
		if call.Command != "StartPublication" {
			t.Errorf("unexpected %s", call.Command)
			continue
		}
		starts = append(starts, call.Pub.VariantID)
	}
	if want := []string{"browser-h264-720p", "browser-av1-1080p"}; !slices.Equal(starts, want) {
		t.Fatalf("StartPublication for %v, want once each for %v", starts, want)
	}
	if b := sim.Bindings(); len(b) != 2 {
		t.Fatalf("bindings %+v, want both publications", b)
	}
	// The status of each is written over the wire, by the worker's principal.
	for _, name := range []string{"front-door-720p", "front-door-1080p"} {
		e, err := s.store.Get(ctx, admin, ns, "status/"+holder+"/"+name)
		if err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
		if st, err := reconcile.ParseStatus(reg, e.Document); err != nil || st.State != reconcile.Active || e.Owner != admin.ID {
			t.Fatalf("status of %s: %+v (owner %s), %v", name, st, e.Owner, err)
		}
	}
}
