package stateclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

// recordLink records what reaches it, in order.
type recordLink struct {
	mu   sync.Mutex
	log  []string
	seen chan struct{} // one value per message delivered
}

func (l *recordLink) add(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func (l *recordLink) Deliver(m watch.Message) error {
	defer func() { l.seen <- struct{}{} }()
	switch m := m.(type) {
	case *watch.Snapshot:
		l.add("snapshot " + m.WatchID)
	case *watch.Update:
		l.add("update " + m.WatchID + " " + m.Key)
	case *watch.Closed:
		l.add("closed " + m.WatchID)
	}
	return nil
}

func (l *recordLink) Disconnected() { l.add("disconnected") }
func (l *recordLink) Reconnected()  { l.add("reconnected") }

func (l *recordLink) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log...)
}

func TestLocalDropAndReconnect(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	alice := statestore.Principal{ID: "alice"}
	link := &recordLink{seen: make(chan struct{}, 16)}
	c, err := stateclient.Dial(st.Store, alice, link)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"cam","media_kind":"video"}`)
	put := func(key string) statestore.Entry {
		e, err := c.Put(ctx, statestore.PutRequest{Namespace: "user/alice", Key: key, Schema: "keeppeek.media-intent.v1", Document: doc})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if _, _, err := c.Watch("w1", "user/alice", "k/"); err != nil {
		t.Fatal(err)
	}
	<-link.seen // the snapshot reached the link; a drop may lose what is still queued
	if e := put("k/a"); e.Owner != "alice" {
		t.Fatalf("owner %q, want the connection's principal", e.Owner)
	}
	c.Drop()
	// Drop waits for the session's delivery to stop (a disconnect may lose
	// what was queued), so Disconnected is the last thing the link hears
	// of that session.
	before := link.snapshot()
	if before[0] != "snapshot w1" || before[len(before)-1] != "disconnected" {
		t.Fatalf("link saw %v, want the snapshot first and disconnected last", before)
	}
	put("k/b") // reads and writes work without a control channel
	if got := link.snapshot(); len(got) != len(before) {
		t.Fatalf("the dropped session delivered after Disconnected: %v", got)
	}
	for name, err := range map[string]error{
		"watch": func() error { _, _, err := c.Watch("w2", "user/alice", "k/"); return err }(),
		"ack":   c.Ack("w1", 1),
	} {
		if !errors.Is(err, stateclient.ErrDisconnected) {
			t.Fatalf("%s while disconnected: %v", name, err)
		}
	}
	if err := c.Reconnect(st.Store); err != nil {
		t.Fatal(err)
	}
	if _, entries, err := c.Watch("w1", "user/alice", "k/"); err != nil || len(entries) != 2 {
		t.Fatalf("watch after reconnect: %d entries %v", len(entries), err)
	}
	if got := link.snapshot(); got[len(before)] != "reconnected" {
		t.Fatalf("link saw %v, want reconnected after disconnected", got)
	}
	if _, err := stateclient.As(st.Store, alice).Get(ctx, "user/bob", "k/a"); !errors.Is(err, statestore.ErrPermissionDenied) {
		t.Fatalf("alice read bob's namespace: %v", err)
	}
}
