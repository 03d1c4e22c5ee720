package wstransport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

var (
	ctx   = context.Background()
	admin = statestore.Principal{ID: "coordinator", Admin: true}
	start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

// hangGuard bounds every wait: far longer than any answer takes, so only a
// real hang trips it.
const hangGuard = 20 * time.Second

const token = "test-token"

// env is a store served over WebSocket by an httptest server.
type env struct {
	t     *testing.T
	store *statestore.Store
	clk   *clock.Fake
	h     *wstransport.Handler
	srv   *httptest.Server
	url   string
	ended chan error // one per session that ended
}

type envOptions struct {
	limits    quota.Limits
	dispatch  dispatch.Options
	transport wstransport.Options
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, clk: clock.NewFake(start), ended: make(chan error, 64)}
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), Clock: e.clk, Limits: o.limits, CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.store = s
	if o.transport.Authenticator == nil {
		o.transport.Authenticator = wstransport.TokenAuthenticator{Token: token, Principal: admin}
	}
	o.transport.Ended = func(_ statestore.Principal, err error) { e.ended <- err }
	h, err := wstransport.NewHandler(dispatch.New(s, o.dispatch), o.transport)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	e.url = "ws" + strings.TrimPrefix(e.srv.URL, "http")
	t.Cleanup(func() {
		e.srv.Close()
		h.Close()
		s.Close()
	})
	return e
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func (e *env) dial() *wstransport.ClientConn {
	e.t.Helper()
	c, err := wstransport.Dial(ctx, e.url, wstransport.DialOptions{Header: bearer(token)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Abort() })
	return c
}

// waitEnded returns the error of the next session to end.
func (e *env) waitEnded() error {
	e.t.Helper()
	select {
	case err := <-e.ended:
		return err
	case <-time.After(hangGuard):
		e.t.Fatal("no session ended")
		return nil
	}
}

func (e *env) openWatches() int { return e.store.Stats().Watches.Open }

func (e *env) put(ns, key string, seed int) statestore.Entry {
	e.t.Helper()
	en, err := e.store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, seed)})
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

// recv returns the next server message, failing the test on a hang or
// an error.
func recv(t *testing.T, c *wstransport.ClientConn) *pb.ServerMessage {
	t.Helper()
	m, err := recvOrEnd(t, c)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return m
}

// recvOrEnd returns the next server message or the error that ended the
// connection, failing the test on a hang.
func recvOrEnd(t *testing.T, c *wstransport.ClientConn) (*pb.ServerMessage, error) {
	t.Helper()
	type res struct {
		m   *pb.ServerMessage
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := c.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(hangGuard):
		t.Fatal("recv: no message")
		return nil, nil
	}
}

func send(t *testing.T, c *wstransport.ClientConn, m *pb.ClientMessage) {
	t.Helper()
	if err := c.Send(m); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func watchMsg(id uint64, watchID, ns string) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{RequestId: id, WatchId: watchID, Namespace: ns}}}
}

// watch registers a watch and returns its snapshot.
func watch(t *testing.T, c *wstransport.ClientConn, id uint64, watchID, ns string) *pb.StateStoreWatchSnapshot {
	t.Helper()
	send(t, c, watchMsg(id, watchID, ns))
	m := recv(t, c)
	if m.GetResult().GetRequestId() != id || m.GetResult().GetWatch() == nil {
		t.Fatalf("WatchState %d answered %v", id, m)
	}
	return m.GetResult().GetWatch()
}
