package replica

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/testtls"

	"github.com/hashicorp/raft"
)

func TestRPCOverTCP(t *testing.T) {
	t.Parallel()
	srv, err := ServeRPC("127.0.0.1:0", nil, func(_ context.Context, req []byte) ([]byte, error) {
		if string(req) == "fail" {
			return nil, errors.New("refused here")
		}
		return append([]byte("echo:"), req...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var c TCPCaller
	for _, tc := range []struct {
		req, want, err string
	}{
		{req: "hello", want: "echo:hello"},
		{req: "", want: "echo:"},
		{req: "fail", err: "refused here"},
	} {
		got, err := c.Call(context.Background(), srv.Addr(), []byte(tc.req))
		if tc.err != "" {
			var re *RemoteError
			if !errors.As(err, &re) || !strings.Contains(re.Msg, tc.err) {
				t.Fatalf("Call(%q) = %v, want a RemoteError with %q", tc.req, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Fatalf("Call(%q) = %q, %v; want %q", tc.req, got, err, tc.want)
		}
	}
	// A port nobody listens on fails before sending: safe to retry.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	_, err = c.Call(context.Background(), dead, []byte("x"))
	var ns *NotSentError
	if !errors.As(err, &ns) || ns.Addr != dead {
		t.Fatalf("a dead address answered %v, want a NotSentError naming it", err)
	}
	// A canceled context ends a call the server holds.
	hold := make(chan struct{})
	slow, err := ServeRPC("127.0.0.1:0", nil, func(ctx context.Context, _ []byte) ([]byte, error) {
		<-hold
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Call(ctx, slow.Addr(), []byte("x")); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call answered %v", err)
	}
	close(hold)
	slow.Close()
}

func TestRPCBounds(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := writeMsg(&b, make([]byte, MaxMessage+1)); err == nil {
		t.Fatal("an oversized message was written")
	}
	b.Reset()
	b.Write([]byte{0xff, 0xff, 0xff, 0xff})
	if _, err := readMsg(&b); err == nil || !strings.Contains(err.Error(), "over the bound") {
		t.Fatalf("an oversized length read as %v", err)
	}
	b.Reset()
	if err := writeMsg(&b, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if got, err := readMsg(&b); err != nil || string(got) != "abc" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	lb := NewLoopback()
	lb.Register("a", func(_ context.Context, req []byte) ([]byte, error) { return append(req, '!'), nil })
	if got, err := lb.Call(context.Background(), "a", []byte("hi")); err != nil || string(got) != "hi!" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	lb.Register("a", nil)
	if _, err := lb.Call(context.Background(), "a", nil); !errors.Is(err, ErrNoPeer) {
		t.Fatalf("unregistered address answered %v", err)
	}
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	ok := Config{NodeID: "a", Addr: "ra", Peers: []Peer{{ID: "a", Addr: "ra"}, {ID: "b", Addr: "rb"}}}
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"no id", func(c *Config) { c.NodeID = "" }, "NodeID"},
		{"no addr", func(c *Config) { c.Addr = "" }, "Addr"},
		{"no peers", func(c *Config) { c.Peers = nil }, "Peers"},
		{"not listed", func(c *Config) { c.NodeID = "z" }, "Peers"},
		{"twice", func(c *Config) { c.Peers = append(c.Peers, Peer{ID: "b", Addr: "rc"}) }, "Peers[2]"},
		{"address disagrees", func(c *Config) { c.Addr = "elsewhere" }, "Peers[0]"},
		{"empty peer", func(c *Config) { c.Peers = append(c.Peers, Peer{}) }, "Peers[2]"},
		{"negative", func(c *Config) { c.ElectionTimeout = -time.Second }, "ElectionTimeout"},
		{"lease over heartbeat", func(c *Config) { c.LeaderLeaseTimeout = time.Second }, "LeaderLeaseTimeout"},
	} {
		c := ok
		c.Peers = append([]Peer(nil), ok.Peers...)
		tc.mod(&c)
		_, err := c.withDefaults()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want a ConfigError on %s", tc.name, err, tc.field)
		}
	}
	c, err := ok.withDefaults()
	if err != nil || c.ElectionTimeout != DefaultElectionTimeout || c.CommitTimeout != DefaultCommitTimeout || c.MaxAppendEntries != DefaultMaxAppendEntries {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
}

// plainStream is a raft.StreamLayer over plain TCP.
type plainStream struct{ ln net.Listener }

func (s *plainStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *plainStream) Close() error              { return s.ln.Close() }
func (s *plainStream) Addr() net.Addr            { return s.ln.Addr() }
func (s *plainStream) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(a), timeout)
}

// countingListener counts the connections an RPCServer accepts: the dials
// its callers made.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// serveCounting serves h on addr, counting connections.
func serveCounting(t *testing.T, addr string, h Handler) (*RPCServer, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	return serveOn(cl, h), cl
}

func echo(_ context.Context, req []byte) ([]byte, error) { return append([]byte("echo:"), req...), nil }

// waitDead waits until every connection c keeps to addr has seen its
// peer's close: the reader's own signal, not a sleep.
func waitDead(t *testing.T, c *TCPCaller, addr string) {
	t.Helper()
	c.mu.Lock()
	kept := append([]*rpcConn(nil), c.idle[addr]...)
	c.mu.Unlock()
	if len(kept) == 0 {
		t.Fatal("no connection kept")
	}
	for _, rc := range kept {
		select {
		case <-rc.dead:
		case <-time.After(10 * time.Second):
			t.Fatal("a kept connection did not see its peer close")
		}
	}
}

func TestRPCKeepsConnections(t *testing.T) {
	t.Parallel()
	srv, cl := serveCounting(t, "127.0.0.1:0", echo)
	addr := srv.Addr()
	c := &TCPCaller{MaxIdle: 4}
	call := func() {
		t.Helper()
		got, err := c.Call(context.Background(), addr, []byte("x"))
		if err != nil || string(got) != "echo:x" {
			t.Fatalf("Call = %q, %v", got, err)
		}
	}
	for range 200 {
		call()
	}
	if n := cl.accepted.Load(); n != 1 {
		t.Fatalf("200 calls in a row dialed %d times, want 1", n)
	}
	// Concurrent calls each need a connection of their own, and no more.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if _, err := c.Call(context.Background(), addr, []byte("y")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := cl.accepted.Load(); n > 4 {
		t.Fatalf("4 callers dialed %d times, want at most 4", n)
	}

	// The peer restarts on the same address: the kept connections are
	// dead, and the next call dials the new server instead of failing.
	srv.Close()
	waitDead(t, c, addr)
	srv2, cl2 := serveCounting(t, addr, echo)
	defer srv2.Close()
	for range 10 {
		call()
	}
	if n := cl2.accepted.Load(); n != 1 {
		t.Fatalf("10 calls after the restart dialed %d times, want 1", n)
	}

	// A call that fails mid-way leaves no connection behind for the next.
	hold, held := make(chan struct{}), make(chan struct{})
	slow, scl := serveCounting(t, "127.0.0.1:0", func(_ context.Context, req []byte) ([]byte, error) {
		if string(req) == "hold" {
			close(held)
			<-hold
		}
		return req, nil
	})
	defer slow.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Call(ctx, slow.Addr(), []byte("hold")); errc <- err }()
	<-held
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call answered %v", err)
	}
	close(hold)
	if got, err := c.Call(context.Background(), slow.Addr(), []byte("z")); err != nil || string(got) != "z" {
		t.Fatalf("call after a canceled one = %q, %v", got, err)
	}
	if n := scl.accepted.Load(); n != 2 {
		t.Fatalf("a canceled call and the next dialed %d times, want 2", n)
	}

	// Close ends the kept connections: the server sees them go.
	c.mu.Lock()
	var kept []*rpcConn
	for _, l := range c.idle {
		kept = append(kept, l...)
	}
	c.mu.Unlock()
	if len(kept) == 0 {
		t.Fatal("nothing kept before Close")
	}
	c.Close()
	for _, rc := range kept {
		<-rc.dead
	}
	// A call after Close works and keeps nothing.
	call()
	c.mu.Lock()
	n := len(c.idle)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("a closed caller kept connections to %d addresses", n)
	}
}

func TestRPCKeepsTLSConnections(t *testing.T) {
	t.Parallel()
	ca := testtls.New(t, "replica rpc")
	mutual := &tls.Config{Certificates: ca.Server.Certificates, RootCAs: ca.Pool, ClientCAs: ca.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", mutual)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := serveOn(cl, func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	defer srv.Close()
	c := &TCPCaller{TLS: mutual}
	defer c.Close()
	for i := range 50 {
		want := fmt.Sprint(i)
		if got, err := c.Call(context.Background(), srv.Addr(), []byte(want)); err != nil || string(got) != want {
			t.Fatalf("Call %d = %q, %v", i, got, err)
		}
	}
	if n := cl.accepted.Load(); n != 1 {
		t.Fatalf("50 calls over TLS dialed %d times, want 1", n)
	}
}

// BenchmarkTCPCallerTLS is one peer call over mutual TLS on loopback:
// kept, on the connection the caller keeps; dialed, on a caller of its
// own per call, which dials (a TLS handshake) each time, as every call did
// before TCPCaller kept connections.
func BenchmarkTCPCallerTLS(b *testing.B) {
	ca := testtls.New(b, "replica rpc bench")
	mutual := &tls.Config{Certificates: ca.Server.Certificates, RootCAs: ca.Pool, ClientCAs: ca.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv, err := ServeRPC("127.0.0.1:0", mutual, func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	req := []byte(`{"verb":"progress"}`)
	b.Run("kept", func(b *testing.B) {
		c := &TCPCaller{TLS: mutual}
		defer c.Close()
		for b.Loop() {
			if _, err := c.Call(context.Background(), srv.Addr(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dialed", func(b *testing.B) {
		for b.Loop() {
			c := &TCPCaller{TLS: mutual}
			if _, err := c.Call(context.Background(), srv.Addr(), req); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}
