package replica

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

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
