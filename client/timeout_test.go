package client_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestRequestTimeoutBoundsACall: a request whose context has no deadline
// still ends after Config.RequestTimeout when the server never answers,
// UNAVAILABLE naming the endpoint and saying a write's outcome is unknown;
// the connection stays, and the late answer reaches nobody: the next call
// gets its own.
func TestRequestTimeoutBoundsACall(t *testing.T) {
	t.Parallel()
	s := startScripted(t)
	const timeout = 100 * time.Millisecond
	c := dial(t, func(c *client.Config) { c.RequestTimeout = timeout }, s.url)
	sc := s.accept(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Put(context.Background(), putReq("service/a", "k", 1))
		done <- err
	}()
	put := sc.recv().GetPutState()
	if put == nil {
		t.Fatal("the server did not receive the PutState")
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		t.Fatalf("a Put the server never answered did not end within RequestTimeout (%v)", timeout)
	}
	se := wantCode(t, err, statestore.Unavailable, "context")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(se.Message, s.url) || !strings.Contains(se.Message, "outcome") {
		t.Fatalf("the timed-out Put: %v; want the deadline as its cause, the endpoint and the unknown outcome named", err)
	}

	// The answer comes too late: it is dropped, and the connection serves
	// the next call.
	sc.send(&pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: put.GetRequestId(),
		Result: &pb.StateStoreResult_Entry{Entry: &pb.StateEntry{Namespace: "service/a", Key: "k", Revision: 1}}}}})
	go func() {
		_, err := c.Get(context.Background(), "service/a", "k")
		done <- err
	}()
	get := sc.recv().GetGetState()
	if get == nil || get.GetRequestId() == put.GetRequestId() {
		t.Fatalf("the next request %v, want a GetState with a new request_id", get)
	}
	sc.send(&pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: get.GetRequestId(),
		Result: &pb.StateStoreResult_Error{Error: &pb.StateStoreError{Code: pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND, Field: "key"}}}}})
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		t.Fatal("the Get after the timeout was never answered")
	}
	wantCode(t, err, statestore.NotFound, "key")
}

// TestDialTimeoutBoundsAHandshake: an endpoint that accepts the TCP
// connection but never answers the upgrade fails after Config.DialTimeout
// as a *DialError naming it, and Dial goes on to the next endpoint.
func TestDialTimeoutBoundsAHandshake(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			held <- cn // kept open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		close(held)
		for cn := range held {
			cn.Close()
		}
	})
	silent := "ws://" + ln.Addr().String()
	const timeout = 100 * time.Millisecond

	type result struct {
		c   *client.Client
		err error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := client.Dial(context.Background(), client.Config{Endpoints: []string{silent}, Token: adminToken, DialTimeout: timeout})
		dialed <- result{c, err}
	}()
	var r result
	select {
	case r = <-dialed:
	case <-time.After(hangGuard):
		t.Fatalf("Dial of an endpoint that never answers did not end within DialTimeout (%v)", timeout)
	}
	var de *client.DialError
	if r.c != nil || !errors.As(r.err, &de) || de.Endpoint != silent || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v, %v; want a *DialError naming %s with the deadline as its cause", r.c, r.err, silent)
	}

	// With a server after it, Dial passes over the silent endpoint.
	s := startServer(t, serverOptions{})
	c := dial(t, func(c *client.Config) { c.DialTimeout = timeout }, silent, s.url)
	if c.Endpoint() != s.url {
		t.Fatalf("Dial connected to %s, want %s", c.Endpoint(), s.url)
	}
}

// TestForbiddenHandshakeIsNotRetried: a 403 (an origin or a principal the
// server refuses outright) is a *HandshakeError carrying the server's
// reason, and, like a 401, Dial tries no other endpoint with it: another
// endpoint of the same deployment would refuse the same way. A 503 (a
// server shutting down) is not such a refusal: Dial goes on.
func TestForbiddenHandshakeIsNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		reason   string
		wantNext bool
	}{
		{http.StatusForbidden, "origin not allowed", false},
		{http.StatusServiceUnavailable, "the server is shutting down", true},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			refuser := startRefuser(t, tc.status, tc.reason)
			next := startServer(t, serverOptions{})
			c, err := client.Dial(ctx, client.Config{Endpoints: []string{refuser, next.url}, Token: adminToken})
			if tc.wantNext {
				if err != nil || c.Endpoint() != next.url {
					t.Fatalf("Dial past a %d: %v, %v; want a client connected to %s", tc.status, c, err, next.url)
				}
				c.Close()
				return
			}
			var he *client.HandshakeError
			if c != nil {
				c.Close()
			}
			if c != nil || !errors.As(err, &he) || he.Status != tc.status || he.Endpoint != refuser || he.Reason != tc.reason {
				t.Fatalf("Dial = %v, %v; want a *HandshakeError %d from %s saying %q", c, err, tc.status, refuser, tc.reason)
			}
			if n := next.handled.Load(); n != 0 {
				t.Errorf("Dial went on to the next endpoint after a %d (%d requests)", tc.status, n)
			}
		})
	}
}

// startRefuser serves every request with status and reason as its body,
// as a server refusing the upgrade does, and returns its ws:// endpoint.
func startRefuser(t *testing.T, status int, reason string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, reason, status)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return "ws://" + ln.Addr().String()
}

// TestRequestTimeoutBoundsAStuckWrite: a request whose write cannot
// finish (the server stopped reading and the socket's buffers are full)
// does not hold its caller past Config.RequestTimeout: the write's
// deadline closes the connection, and the call fails UNAVAILABLE.
func TestRequestTimeoutBoundsAStuckWrite(t *testing.T) {
	t.Parallel()
	deaf := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		<-deaf // never reads
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		close(deaf)
		srv.Close()
		<-served
	})
	const timeout = 300 * time.Millisecond
	// No ping: only the write's own deadline may end it.
	c := dial(t, func(c *client.Config) { c.RequestTimeout, c.PingInterval = timeout, time.Hour }, "ws://"+ln.Addr().String())
	big := statestore.PutRequest{Namespace: "service/a", Key: "k", Schema: "keeppeek.media-intent.v1", Document: make([]byte, 256<<10)}
	stuck := make(chan error, 1)
	go func() {
		// Each Put's write goes into the socket's buffers until they are
		// full; its wait for the answer that never comes is cut short.
		for range 1000 {
			short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			t0 := time.Now()
			_, err := c.Put(short, big)
			cancel()
			if time.Since(t0) >= timeout/2 {
				stuck <- err
				return
			}
		}
		stuck <- errors.New("1000 writes of 256 KiB never filled the buffers")
	}()
	select {
	case err := <-stuck:
		wantCode(t, err, statestore.Unavailable, "")
	case <-time.After(hangGuard):
		t.Fatalf("a Put whose write could not finish still held its caller after %v (RequestTimeout %v)", hangGuard, timeout)
	}
}
