package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestInFlightCallsFailWhenTheConnectionDrops: a request sent but not
// answered when the connection ends fails UNAVAILABLE naming the
// connection and saying a write's outcome is unknown; the client then
// reconnects and the next call is answered.
func TestInFlightCallsFailWhenTheConnectionDrops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		drop func(*websocket.Conn)
	}{
		{"network drop", func(ws *websocket.Conn) { ws.CloseNow() }},
		{"server going away", func(ws *websocket.Conn) { ws.Close(websocket.StatusGoingAway, "the server is shutting down") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startScripted(t)
			c := dial(t, nil, s.url)
			first := s.accept(t)
			done := make(chan error, 1)
			go func() {
				_, err := c.Put(ctx, putReq("service/a", "k", 1))
				done <- err
			}()
			if m := first.recv(); m.GetPutState() == nil {
				t.Fatalf("the server received %v, want the PutState", m)
			}
			tc.drop(first.ws)
			var err error
			select {
			case err = <-done:
			case <-time.After(hangGuard):
				t.Fatal("the in-flight Put never returned")
			}
			se := wantCode(t, err, statestore.Unavailable, "connection")
			if !strings.Contains(se.Message, "outcome") || !strings.Contains(se.Message, s.url) {
				t.Errorf("the failure does not say the outcome is unknown or name the endpoint: %v", se)
			}
			// The client reconnects; the next request goes on the new
			// connection.
			second := s.accept(t)
			go func() {
				_, err := c.Get(ctx, "service/a", "k")
				done <- err
			}()
			m := second.recv().GetGetState()
			second.send(&pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: m.GetRequestId(),
				Result: &pb.StateStoreResult_Error{Error: &pb.StateStoreError{Code: pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND, Field: "key"}}}}})
			if err := <-done; statestore.CodeOf(err) != statestore.NotFound {
				t.Fatalf("the call after the reconnection: %v", err)
			}
		})
	}
}

// TestCallsWaitForTheReconnection: while the server is away a call waits
// for the reconnection up to its deadline, then fails UNAVAILABLE; one
// with a longer deadline is answered once the server is back. A Link's
// watch call fails at once instead, as stateclient.Local's does.
func TestCallsWaitForTheReconnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	link := newRecordLink()
	k := c.Link(link)
	written := mustPut(t, c, putReq("service/a", "k", 1))

	s.stop()
	link.waitFor(t, "disconnected")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := c.Get(short, "service/a", "k")
	if se := wantCode(t, err, statestore.Unavailable, "connection"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(se.Message, s.url) {
		t.Fatalf("a call past its deadline while disconnected: %v", err)
	}
	if _, _, err := k.Watch("w", "service/a", ""); statestore.CodeOf(err) != statestore.Unavailable {
		t.Fatalf("a Link's watch while disconnected: %v, want UNAVAILABLE at once", err)
	}
	type result struct {
		e   statestore.Entry
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		e, err := c.Get(ctx, "service/a", "k")
		waiting <- result{e, err}
	}()
	s.restart(t)
	select {
	case r := <-waiting:
		if r.err != nil || r.e.Revision != written.Revision {
			t.Fatalf("the waiting call: %+v, %v", r.e, r.err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the waiting call never returned")
	}
	link.waitFor(t, "reconnected")
}

// TestReconnectAfterTheServerWentAway: the server stops and comes back on
// the same address with its store reopened. The Watch delivers an
// EventResnapshot (cause "disconnected") holding everything written, then
// every update written after it exactly once, in order.
func TestReconnectAfterTheServerWentAway(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	const ns = "service/restart"
	for i := range 3 {
		mustPut(t, c, putReq(ns, fmt.Sprintf("before/%d", i), i))
	}
	w, err := c.Watch(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ev := next(t, w); ev.Kind != client.EventSnapshot || len(ev.Entries) != 3 {
		t.Fatalf("snapshot %+v", ev)
	}
	mustPut(t, c, putReq(ns, "before/3", 3))
	if ev := next(t, w); ev.Kind != client.EventUpdate || ev.Sequence != 1 || ev.Key != "before/3" {
		t.Fatalf("update %+v", ev)
	}

	s.stop()
	s.restart(t)
	// Written while the client may still be reconnecting: in the new
	// snapshot or after it, never lost.
	during := s.put(t, ns, "during", 9)
	ev := next(t, w)
	if ev.Kind != client.EventResnapshot || ev.Cause != "disconnected" {
		t.Fatalf("after the restart: %+v, want an EventResnapshot for the disconnect", ev)
	}
	keys := map[string]bool{}
	for _, e := range ev.Entries {
		keys[e.Key] = true
	}
	if len(keys) != 5 || !keys["during"] || ev.Revision != during.Revision {
		t.Fatalf("the new snapshot at %d holds %v, want all 5 entries at %d", ev.Revision, keys, during.Revision)
	}
	const after = 40 // past the server's bound of unacknowledged updates, so acks must flow
	for i := range after {
		want := mustPut(t, c, putReq(ns, fmt.Sprintf("after/%d", i%7), 100+i))
		u := next(t, w)
		if u.Kind != client.EventUpdate || u.Sequence != uint64(i+1) || u.Revision != want.Revision || u.Update != watch.Put ||
			u.Key != want.Key || u.Entry == nil || u.Entry.Revision != want.Revision {
			t.Fatalf("update %d after the restart: %+v, want sequence %d at revision %d", i+1, u, i+1, want.Revision)
		}
	}
	// Nothing else is pending: no double.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if ev, err := w.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an extra event after the last write: %+v, %v", ev, err)
	}
}

// TestReconnectTriesTheNextEndpoint: Dial passes over an endpoint that
// does not answer; a lost connection is replaced by one to the next
// endpoint round-robin.
func TestReconnectTriesTheNextEndpoint(t *testing.T) {
	t.Parallel()
	a, b := startServer(t, serverOptions{}), startServer(t, serverOptions{})
	dead := "ws://" + freeAddr(t)
	link := newRecordLink()
	c := dial(t, nil, dead, a.url, b.url)
	if c.Endpoint() != a.url {
		t.Fatalf("Dial connected to %s, want %s (the first that answers)", c.Endpoint(), a.url)
	}
	c.Link(link)
	a.stop()
	link.waitFor(t, "reconnected")
	if c.Endpoint() != b.url {
		t.Fatalf("reconnected to %s, want %s (after the one that failed)", c.Endpoint(), b.url)
	}
	if _, err := c.Put(ctx, putReq("service/a", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if b.store.Namespace("service/a").Entries != 1 {
		t.Fatal("the write did not reach the endpoint the client reconnected to")
	}
	// All endpoints down: Dial returns the last one's error, naming it.
	_, err := client.Dial(ctx, client.Config{Endpoints: []string{dead, "ws://" + freeAddr(t)}})
	var de *client.DialError
	if !errors.As(err, &de) || de.Endpoint == dead || !strings.Contains(err.Error(), de.Endpoint) {
		t.Fatalf("Dial with no endpoint up: %v, want a *DialError naming the last", err)
	}
}

// TestRefusedReconnectIsRetried: a 401 while reconnecting (the operator
// rotating tokens) is logged and retried at MaxBackoff until accepted.
func TestRefusedReconnectIsRetried(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	s := startServer(t, serverOptions{refuse: &refuse})
	logs := newLogRecorder()
	c := dial(t, func(c *client.Config) { c.Logger = slogOf(logs); c.MaxBackoff = 20 * time.Millisecond }, s.url)
	link := newRecordLink()
	c.Link(link)
	refuse.Store(true)
	s.dropSessions(t)
	link.waitFor(t, "disconnected")
	rec, after := logs.waitFor(t, 0, "the refusal", containing("refused the credentials"))
	for _, want := range []string{"status=401", "tokens are being rotated", "retry_in=20ms", s.url} {
		if !strings.Contains(rec, want) {
			t.Errorf("the refusal's log %q lacks %q", rec, want)
		}
	}
	logs.waitFor(t, after, "a second refusal", containing("refused the credentials")) // retried, refused again
	refuse.Store(false)
	link.waitFor(t, "reconnected")
	if _, err := c.Put(ctx, putReq("service/a", "k", 1)); err != nil {
		t.Fatal(err)
	}
}

// TestSilentNetworkDropIsDetected: a connection that stays open but
// carries nothing more (no FIN, no RST) is noticed by the pings and
// replaced, and a Watch on it re-snapshots.
func TestSilentNetworkDropIsDetected(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	p := startProxy(t, s.addr)
	logs := newLogRecorder()
	c := dial(t, func(c *client.Config) {
		c.PingInterval, c.RequestTimeout, c.Logger = 20*time.Millisecond, 300*time.Millisecond, slogOf(logs)
	}, p.url)
	link := newRecordLink()
	c.Link(link)
	w, err := c.Watch(ctx, "service/silent", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next(t, w)
	p.freeze()
	link.waitFor(t, "disconnected")
	if rec, _ := logs.waitFor(t, 0, "the lost connection", containing("connection lost")); !strings.Contains(rec, "no pong") {
		t.Fatalf("the loss was logged as %q, want the unanswered ping as its cause", rec)
	}
	link.waitFor(t, "reconnected")
	s.put(t, "service/silent", "k", 1)
	if ev := next(t, w); ev.Kind != client.EventResnapshot || ev.Cause != "disconnected" || len(ev.Entries) != 1 {
		t.Fatalf("after the silent drop: %+v", ev)
	}
}

// TestUnavailableClosureMovesToAnotherEndpoint: a node that lost its
// cluster's leader closes its watches UNAVAILABLE (Store.CloseWatches).
// With several endpoints the client leaves it: a Watch re-snapshots on the
// next endpoint, its cause naming UNAVAILABLE, and a Link hears the
// closure, then the reconnection, and watches on the new node. With one
// endpoint the connection stays and the watch re-snapshots on it.
func TestUnavailableClosureMovesToAnotherEndpoint(t *testing.T) {
	t.Parallel()
	t.Run("two endpoints", func(t *testing.T) {
		t.Parallel()
		a, b := startServer(t, serverOptions{}), startServer(t, serverOptions{})
		a.put(t, "service/a", "k", 1)
		b.put(t, "service/a", "k", 2)
		b.put(t, "service/a", "only-b", 3) // tells b's snapshot from a's
		c := dial(t, nil, a.url, b.url)
		w, err := c.Watch(ctx, "service/a", "")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if ev := next(t, w); ev.Kind != client.EventSnapshot || len(ev.Entries) != 1 {
			t.Fatalf("first event %+v, want a's snapshot of 1 entry", ev)
		}
		link := newRecordLink()
		k := c.Link(link)
		if _, _, err := k.Watch("l", "service/a", ""); err != nil {
			t.Fatal(err)
		}
		if n, err := a.store.CloseWatches(watch.Unavailable); err != nil || n != 2 {
			t.Fatalf("CloseWatches = %d, %v; want the Watch's and the Link's closed", n, err)
		}
		ev := next(t, w)
		if ev.Kind != client.EventResnapshot || !strings.HasPrefix(ev.Cause, "closed UNAVAILABLE: ") {
			t.Fatalf("after the closure %+v, want an EventResnapshot caused by UNAVAILABLE", ev)
		}
		if len(ev.Entries) != 2 || c.Endpoint() != b.url {
			t.Fatalf("re-snapshot of %d entries on %s, want b's 2 on %s", len(ev.Entries), c.Endpoint(), b.url)
		}
		// Which of the two closures the client reads first is the
		// registry's choice; the first one ends the connection, and the
		// client tells every other watch on it the same closure, so the
		// Link hears its UNAVAILABLE closure either way, then the
		// disconnection.
		got := link.waitFor(t, "reconnected")
		if !slices.Equal(got, []string{"snapshot l 1 entries", "closed l UNAVAILABLE", "disconnected"}) {
			t.Fatalf("the link saw %v, want its snapshot, the UNAVAILABLE closure, then the disconnection", got)
		}
		if _, entries, err := k.Watch("l2", "service/a", ""); err != nil || len(entries) != 2 {
			t.Fatalf("the link's watch after moving: %d entries, %v; want b's 2", len(entries), err)
		}
		// The Watch follows b from here.
		b.put(t, "service/a", "k", 4)
		if ev := next(t, w); ev.Kind != client.EventUpdate || ev.Key != "k" || ev.Sequence != 1 {
			t.Fatalf("after the move %+v, want b's update of k", ev)
		}
	})
	t.Run("one endpoint", func(t *testing.T) {
		t.Parallel()
		a := startServer(t, serverOptions{})
		a.put(t, "service/a", "k", 1)
		c := dial(t, nil, a.url)
		w, err := c.Watch(ctx, "service/a", "")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		next(t, w)
		link := newRecordLink()
		k := c.Link(link)
		if n, err := a.store.CloseWatches(watch.Unavailable); err != nil || n != 1 {
			t.Fatalf("CloseWatches = %d, %v; want the Watch's closed", n, err)
		}
		ev := next(t, w)
		if ev.Kind != client.EventResnapshot || !strings.HasPrefix(ev.Cause, "closed UNAVAILABLE: ") || len(ev.Entries) != 1 {
			t.Fatalf("after the closure %+v, want a re-snapshot of a's entry caused by UNAVAILABLE", ev)
		}
		// The connection stayed: the Link, added before the closure, heard
		// no disconnection before its own watch's snapshot.
		if _, _, err := k.Watch("l", "service/a", ""); err != nil {
			t.Fatal(err)
		}
		if got := link.waitFor(t, "snapshot l 1 entries"); len(got) != 0 {
			t.Fatalf("before its watch's snapshot the link saw %v, want nothing", got)
		}
	})
}

// TestUnavailableAnswerMovesToAnotherEndpoint: a request answered
// UNAVAILABLE (a cluster node without a leader, or one behind that is not
// catching up) returns that error and, with several endpoints, moves the
// client: the next request is served by the next endpoint. With one
// endpoint the client stays.
func TestUnavailableAnswerMovesToAnotherEndpoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		two   bool
		after error // what the second Get answers: nil (b's entry) or UNAVAILABLE
	}{
		{name: "two endpoints", two: true},
		{name: "one endpoint", after: statestore.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := startServer(t, serverOptions{unavailable: errors.New("no leader")})
			urls := []string{a.url}
			if tc.two {
				b := startServer(t, serverOptions{})
				b.put(t, "service/a", "k", 2)
				urls = append(urls, b.url)
			}
			c := dial(t, nil, urls...)
			if _, err := c.Get(ctx, "service/a", "k"); !errors.Is(err, statestore.ErrUnavailable) {
				t.Fatalf("Get on the node without a store: %v, want UNAVAILABLE", err)
			}
			e, err := c.Get(ctx, "service/a", "k")
			switch {
			case tc.after != nil && !errors.Is(err, tc.after):
				t.Fatalf("second Get with one endpoint: %v, want UNAVAILABLE again", err)
			case tc.after != nil && c.Endpoint() != a.url:
				t.Fatalf("with one endpoint the client moved to %s", c.Endpoint())
			case tc.after == nil && (err != nil || e.Revision == 0 || c.Endpoint() != urls[1]):
				t.Fatalf("second Get: %+v, %v on %s; want b's entry from %s", e, err, c.Endpoint(), urls[1])
			}
		})
	}
	// The calls in flight on the connection the client leaves get their
	// answers (the node's UNAVAILABLE), not a lost connection's: a write
	// forwarded from a node still serving may commit.
	t.Run("calls in flight are answered", func(t *testing.T) {
		t.Parallel()
		a := startServer(t, serverOptions{unavailable: errors.New("no leader")})
		b := startServer(t, serverOptions{})
		b.put(t, "service/a", "k", 2)
		c := dial(t, nil, a.url, b.url)
		const calls = 32
		errs := make(chan error, calls)
		for range calls {
			go func() {
				_, err := c.Get(ctx, "service/a", "k")
				errs <- err
			}()
		}
		for range calls {
			// Answered by a (UNAVAILABLE) or, once the client moved, by b.
			err := <-errs
			var se *statestore.Error
			if err != nil && (!errors.As(err, &se) || se.Code != statestore.Unavailable || se.Field == "connection") {
				t.Errorf("a call in flight: %v; want a's answer or b's entry", err)
			}
		}
	})
}
