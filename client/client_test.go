package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// TestEveryVerb runs each call against a real server, over plain
// WebSocket and over TLS with a test CA.
func TestEveryVerb(t *testing.T) {
	t.Parallel()
	serverTLS, pool := testCA(t)
	for _, tc := range []struct {
		name   string
		server serverOptions
		client func(*client.Config)
	}{
		{"ws", serverOptions{}, nil},
		{"wss", serverOptions{tls: serverTLS}, func(c *client.Config) { c.TLS = &tls.Config{RootCAs: pool} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, tc.server)
			c := dial(t, tc.client, s.url)
			if c.Endpoint() != s.url {
				t.Fatalf("Endpoint() = %q, want %q", c.Endpoint(), s.url)
			}
			const ns = "service/verbs"

			// Put: create-only, then compare-and-set, then blind.
			created := mustPut(t, c, withExpect(putReq(ns, "k", 1), statestore.CreateOnly))
			if created.Revision != 1 || created.Owner != admin.ID || created.Namespace != ns || created.Key != "k" ||
				created.Schema != schema.MediaIntentV1 || string(created.Document) != string(testdoc.MediaIntent(300, 1)) ||
				created.CreatedMs == 0 || created.UpdatedMs != created.CreatedMs || created.ExpiresMs != 0 {
				t.Fatalf("created %+v", created)
			}
			replaced := mustPut(t, c, withExpect(putReq(ns, "k", 2), statestore.IfRevision(created.Revision)))
			if replaced.Revision != 2 || replaced.CreatedMs != created.CreatedMs {
				t.Fatalf("compare-and-set gave %+v", replaced)
			}
			blind := mustPut(t, c, putReq(ns, "k", 3))
			if blind.Revision != 3 {
				t.Fatalf("blind write gave revision %d, want 3", blind.Revision)
			}

			// Get returns what the store holds.
			got, err := c.Get(ctx, ns, "k")
			if err != nil {
				t.Fatal(err)
			}
			if inStore, _ := s.store.Get(ctx, admin, ns, "k"); !entriesEqual(got, inStore) {
				t.Fatalf("Get = %+v, the store holds %+v", got, inStore)
			}

			// A lease: the TTL travels, the entry carries its deadline.
			leased := mustPut(t, c, withTTL(putReq(ns, "lease", 4), 1500*time.Millisecond))
			if leased.ExpiresMs-leased.UpdatedMs != 1500 {
				t.Fatalf("lease of %d ms, want 1500", leased.ExpiresMs-leased.UpdatedMs)
			}

			// Watch: the snapshot, then an update.
			w, err := c.Watch(ctx, ns, "")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			snap := next(t, w)
			if snap.Kind != client.EventSnapshot || snap.Revision != leased.Revision || len(snap.Entries) != 2 ||
				snap.Entries[0].Key != "k" || snap.Entries[1].Key != "lease" {
				t.Fatalf("snapshot %+v", snap)
			}

			// Delete with and without an expected revision.
			if _, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: ns, Key: "k", Expect: statestore.IfRevision(blind.Revision)}); err != nil {
				t.Fatal(err)
			}
			rev, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: ns, Key: "lease"})
			if err != nil || rev != leased.Revision+2 {
				t.Fatalf("delete gave revision %d (%v), want %d", rev, err, leased.Revision+2)
			}
			for i, key := range []string{"k", "lease"} {
				u := next(t, w)
				if u.Kind != client.EventUpdate || u.Update != watch.Delete || u.Key != key || u.Sequence != uint64(i+1) || u.Revision != leased.Revision+uint64(i+1) {
					t.Fatalf("update %d: %+v", i+1, u)
				}
			}
			if _, err := c.Get(ctx, ns, "k"); !errors.Is(err, statestore.ErrNotFound) {
				t.Fatalf("get after delete: %v", err)
			}

			// Info, from the same endpoint with the same token.
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Available || info.Principal != admin.ID || !slices.Contains(info.Capabilities, statestore.Capability) ||
				len(info.Namespaces) != 1 || info.Namespaces[0].Name != ns || info.Namespaces[0].Revision != rev {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

func withExpect(r statestore.PutRequest, x statestore.Expect) statestore.PutRequest {
	r.Expect = x
	return r
}

func withTTL(r statestore.PutRequest, ttl time.Duration) statestore.PutRequest {
	r.TTL = ttl
	return r
}

func entriesEqual(a, b statestore.Entry) bool {
	return a.Namespace == b.Namespace && a.Key == b.Key && a.Schema == b.Schema && a.Owner == b.Owner && a.Revision == b.Revision &&
		a.CreatedMs == b.CreatedMs && a.UpdatedMs == b.UpdatedMs && a.ExpiresMs == b.ExpiresMs && string(a.Document) == string(b.Document)
}

// TestConcurrentRequestsArePipelined: many goroutines share one client;
// every call gets its own answer.
func TestConcurrentRequestsArePipelined(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("g%d/k%d", g, i)
				e, err := c.Put(ctx, putReq("user/alice", key, g*each+i))
				if err == nil && e.Key != key {
					err = fmt.Errorf("put %s answered with %s", key, e.Key)
				}
				if err == nil {
					var got statestore.Entry
					got, err = c.Get(ctx, "user/alice", key)
					if err == nil && (got.Key != key || got.Revision != e.Revision) {
						err = fmt.Errorf("get %s answered with %s at %d, want revision %d", key, got.Key, got.Revision, e.Revision)
					}
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.store.Namespace("user/alice").Entries; n != writers*each {
		t.Fatalf("%d entries, want %d", n, writers*each)
	}
}

// TestConcurrentCallsKeepTheirOwnAnswers runs conditional Puts from many
// goroutines at once through one client, whose waiting calls, request
// timers and answers' buffers are reused from call to call: every Put
// gets its own entry back (its key, its document byte for byte, the
// revision its condition allowed), and neither the caller's document nor
// an entry already returned is overwritten by a later call.
func TestConcurrentCallsKeepTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c := dial(t, nil, s.url)
	const writers, each = 8, 12
	type got struct {
		key  string
		sent []byte // the caller's document, as given to Put
		want []byte // a copy of it
		e    statestore.Entry
	}
	results := make([][]got, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("g%d", g)
			var rev uint64
			for i := range each {
				req := statestore.PutRequest{Namespace: "user/alice", Key: key, Schema: schema.MediaIntentV1,
					Document: testdoc.MediaIntent(200+97*g+13*i, g*each+i), Expect: statestore.CreateOnly}
				if i > 0 {
					req.Expect = statestore.IfRevision(rev)
				}
				e, err := c.Put(ctx, req)
				if err != nil {
					t.Errorf("put %s #%d: %v", key, i, err)
					return
				}
				rev = e.Revision
				results[g] = append(results[g], got{key: key, sent: req.Document, want: slices.Clone(req.Document), e: e})
			}
		})
	}
	wg.Wait()
	for g, rs := range results {
		if len(rs) != each {
			t.Fatalf("writer %d made %d puts, want %d", g, len(rs), each)
		}
		for i, r := range rs {
			if r.e.Key != r.key || !bytes.Equal(r.e.Document, r.want) {
				t.Errorf("writer %d put #%d: answered with %s and a document of %d bytes, want %s and its own %d bytes",
					g, i, r.e.Key, len(r.e.Document), r.key, len(r.want))
			}
			if !bytes.Equal(r.sent, r.want) {
				t.Errorf("writer %d put #%d: the caller's document changed after the Put", g, i)
			}
			if i > 0 && r.e.Revision <= rs[i-1].e.Revision {
				t.Errorf("writer %d put #%d: revision %d after %d", g, i, r.e.Revision, rs[i-1].e.Revision)
			}
		}
	}
}

// TestEveryErrorCode produces each code through a real server and checks
// the client reports it as the store does in process.
func TestEveryErrorCode(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	s := startServer(t, serverOptions{faults: faults, limits: quota.Limits{MaxDocumentBytes: 1024,
		MaxEntriesPerNamespace: 3, MaxSnapshotEntries: 2, MaxWatchesPerSession: 2}})
	c := dial(t, nil, s.url)
	as := dial(t, func(c *client.Config) { c.Token = aliceToken }, s.url)
	for i := range 3 {
		s.put(t, "group/full", fmt.Sprintf("k%d", i), i)
	}
	current := s.put(t, "service/a", "k", 0)
	down := startServer(t, serverOptions{unavailable: errors.New("journal damaged at segment 7")})
	unavailable := dial(t, nil, down.url)
	watchErr := func(c *client.Client, ns string) error {
		w, err := c.Watch(ctx, ns, "")
		if err == nil {
			t.Cleanup(func() { w.Close() })
		}
		return err
	}
	cases := []struct {
		name  string
		code  statestore.Code
		field string
		call  func() error
		check func(*statestore.Error) string // "" when fine
	}{
		{"missing key", statestore.NotFound, "key", func() error { _, err := c.Get(ctx, "service/a", "nope"); return err }, nil},
		{"stale revision", statestore.Conflict, "expected_revision", func() error {
			_, err := c.Put(ctx, withExpect(putReq("service/a", "k", 1), statestore.IfRevision(current.Revision+5)))
			return err
		}, func(se *statestore.Error) string {
			if se.CurrentRevision != current.Revision {
				return fmt.Sprintf("current revision %d, want %d", se.CurrentRevision, current.Revision)
			}
			return ""
		}},
		{"create over an existing key", statestore.Conflict, "", func() error {
			_, err := c.Put(ctx, withExpect(putReq("service/a", "k", 1), statestore.CreateOnly))
			return err
		}, nil},
		{"short lease", statestore.TTLInvalid, "ttl", func() error {
			_, err := c.Put(ctx, withTTL(putReq("service/a", "t", 1), 500*time.Millisecond))
			return err
		}, nil},
		{"negative lease, refused before sending", statestore.TTLInvalid, "ttl", func() error { _, err := c.Put(ctx, withTTL(putReq("service/a", "t", 1), -time.Second)); return err }, nil},
		{"service namespace for a user", statestore.PermissionDenied, "namespace", func() error { _, err := as.Put(ctx, putReq("service/x", "k", 1)); return err }, nil},
		{"bad namespace", statestore.InvalidArgument, "namespace", func() error { _, err := c.Get(ctx, "nowhere", "k"); return err }, nil},
		{"unknown schema", statestore.SchemaInvalid, "", func() error {
			r := putReq("service/a", "s", 1)
			r.Schema = "keeppeek.no-such-schema.v9"
			_, err := c.Put(ctx, r)
			return err
		}, nil},
		{"document over the bound", statestore.ValueTooLarge, "document", func() error {
			r := putReq("service/a", "big", 1)
			r.Document = testdoc.MediaIntent(2000, 1)
			_, err := c.Put(ctx, r)
			return err
		}, nil},
		{"namespace full", statestore.QuotaExceeded, "", func() error { _, err := c.Put(ctx, putReq("group/full", "k9", 9)); return err }, nil},
		{"snapshot over the bound", statestore.WatchTooBroad, "", func() error { return watchErr(c, "group/full") }, nil},
		{"third watch of a session", statestore.WatchLimit, "", func() error {
			for i := range 2 {
				if err := watchErr(as, "user/alice"); err != nil {
					return fmt.Errorf("watch %d of the bound: %w", i+1, err)
				}
			}
			return watchErr(as, "user/alice")
		}, nil},
		{"no store", statestore.Unavailable, "store", func() error { _, err := unavailable.Get(ctx, "service/a", "k"); return err },
			func(se *statestore.Error) string {
				if !strings.Contains(se.Message, "journal damaged at segment 7") {
					return "the cause is not named: " + se.Message
				}
				return ""
			}},
		{"failed fsync", statestore.Storage, "", func() error {
			defer faults.SetSync(func(string) error { return syscall.EIO })()
			_, err := c.Put(ctx, putReq("service/a", "lost", 1))
			return err
		}, nil},
	}
	// The cases run in order: the session's watch count and the store's
	// fault hook are shared.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			se := wantCode(t, err, tc.code, tc.field)
			if !errors.Is(err, &statestore.Error{Code: tc.code}) {
				t.Errorf("errors.Is(%v, the %v sentinel) is false", err, tc.code)
			}
			if tc.check != nil {
				if msg := tc.check(se); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// TestPrincipalIsTheServersDecision: the token's principal is the one the
// server authorizes and records as owner.
func TestPrincipalIsTheServersDecision(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	s.put(t, "service/x", "k", 1)
	c := dial(t, func(c *client.Config) { c.Token = aliceToken }, s.url)
	_, err := c.Put(ctx, putReq("service/x", "k", 2))
	if se := wantCode(t, err, statestore.PermissionDenied, "namespace"); !strings.Contains(se.Message, `"alice"`) {
		t.Errorf("the refusal does not name the principal: %v", se)
	}
	if _, err := c.Get(ctx, "service/x", "k"); statestore.CodeOf(err) != statestore.PermissionDenied {
		t.Errorf("alice read service/x: %v", err)
	}
	if _, err := c.Watch(ctx, "service/x", ""); statestore.CodeOf(err) != statestore.PermissionDenied {
		t.Errorf("alice watched service/x: %v", err)
	}
	e := mustPut(t, c, putReq("user/alice", "prefs/a", 1))
	if e.Owner != alice.ID {
		t.Errorf("owner %q, want %q", e.Owner, alice.ID)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Principal != alice.ID || len(info.Namespaces) != 1 || info.Namespaces[0].Name != "user/alice" {
		t.Errorf("alice's info lists %+v, want only user/alice", info)
	}
}

// TestBadConfigNamesTheField: each bad Config is a *ConfigError naming its
// field, and nothing is dialled.
func TestBadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	good := s.url
	cases := []struct {
		name  string
		cfg   client.Config
		field string
		in    string // the reason contains it
	}{
		{"no endpoint", client.Config{}, "Endpoints", "at least one"},
		{"bad scheme", client.Config{Endpoints: []string{"ftp://127.0.0.1:1"}}, "Endpoints[0]", `"ftp"`},
		{"no scheme", client.Config{Endpoints: []string{"127.0.0.1:8765"}}, "Endpoints[0]", "127.0.0.1:8765"},
		{"path", client.Config{Endpoints: []string{good, good + "/ws"}}, "Endpoints[1]", `path "/ws"`},
		{"query", client.Config{Endpoints: []string{good + "/?access_token=x"}}, "Endpoints[0]", "query"},
		{"fragment", client.Config{Endpoints: []string{good + "#x"}}, "Endpoints[0]", "fragment"},
		{"no host", client.Config{Endpoints: []string{"ws:///ws"}}, "Endpoints[0]", "no host"},
		{"user info", client.Config{Endpoints: []string{"ws://me:pw@127.0.0.1:1"}}, "Endpoints[0]", "Config.Token"},
		{"token with a newline", client.Config{Endpoints: []string{good}, Token: "a\r\nX-Evil: 1"}, "Token", "control character"},
		{"negative dial timeout", client.Config{Endpoints: []string{good}, DialTimeout: -time.Second}, "DialTimeout", "negative"},
		{"negative request timeout", client.Config{Endpoints: []string{good}, RequestTimeout: -1}, "RequestTimeout", "negative"},
		{"negative backoff", client.Config{Endpoints: []string{good}, MinBackoff: -1}, "MinBackoff", "negative"},
		{"negative max backoff", client.Config{Endpoints: []string{good}, MaxBackoff: -1}, "MaxBackoff", "negative"},
		{"inverted backoff", client.Config{Endpoints: []string{good}, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MinBackoff", "exceeds MaxBackoff"},
		{"negative ping interval", client.Config{Endpoints: []string{good}, PingInterval: -1}, "PingInterval", "negative"},
		{"negative watch buffer", client.Config{Endpoints: []string{good}, WatchBuffer: -1}, "WatchBuffer", "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := client.Dial(ctx, tc.cfg)
			var ce *client.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.in) || c != nil {
				t.Fatalf("Dial = %v, %v; want a *ConfigError naming %s with %q", c, err, tc.field, tc.in)
			}
			if !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Fatalf("%q does not name Config.%s", err, tc.field)
			}
		})
	}
	if n := s.handled.Load(); n != 0 {
		t.Fatalf("a bad Config reached the server (%d requests)", n)
	}
	// A MaxBackoff below the default minimum brings the minimum down.
	c := dial(t, func(c *client.Config) { c.MinBackoff, c.MaxBackoff = 0, time.Millisecond }, good)
	if _, err := c.Get(ctx, "service/a", "k"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatal(err)
	}
}

// TestWrongTokenIsAHandshakeError: the server's 401 and its reason reach
// the caller, and Dial tries no other endpoint with refused credentials.
func TestWrongTokenIsAHandshakeError(t *testing.T) {
	t.Parallel()
	s, other := startServer(t, serverOptions{}), startServer(t, serverOptions{})
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.url, other.url}, Token: "stolen"})
	var he *client.HandshakeError
	if !errors.As(err, &he) || c != nil {
		t.Fatalf("Dial = %v, %v; want a *HandshakeError", c, err)
	}
	if he.Status != 401 || he.Endpoint != s.url || !strings.Contains(he.Reason, errUnknownToken.Error()) {
		t.Fatalf("handshake error %+v", he)
	}
	for _, want := range []string{s.url, "401", errUnknownToken.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
	if n := other.handled.Load(); n != 0 {
		t.Errorf("Dial went on to the next endpoint with refused credentials (%d requests)", n)
	}
}

// TestTLS: with the CA in Config.TLS every call works over wss:// (see
// TestEveryVerb); without it, the handshake fails naming the endpoint.
func TestTLS(t *testing.T) {
	t.Parallel()
	serverTLS, pool := testCA(t)
	s := startServer(t, serverOptions{tls: serverTLS})
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.url}, Token: adminToken})
	var de *client.DialError
	if !errors.As(err, &de) || c != nil || de.Endpoint != s.url || !strings.Contains(err.Error(), s.url) ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Dial without the CA = %v, %v; want a *DialError naming %s and the certificate", c, err, s.url)
	}
	// https:// is a synonym of wss://.
	https := "https://" + strings.TrimPrefix(s.url, "wss://")
	tc := dial(t, func(c *client.Config) { c.TLS = &tls.Config{RootCAs: pool} }, https)
	mustPut(t, tc, putReq("service/tls", "k", 1))
	if info, err := tc.Info(ctx); err != nil || len(info.Namespaces) != 1 {
		t.Fatalf("info over https: %+v, %v", info, err)
	}
	if tc.Endpoint() != https {
		t.Fatalf("Endpoint() = %q, want it as configured (%q)", tc.Endpoint(), https)
	}
}

// TestCloseEndsTheSession: Close ends the server's session (its watches
// go), and every later call returns ErrClosed.
func TestCloseEndsTheSession(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOptions{})
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.url}, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	// Watch.Close removes its watch from the server before returning.
	gone, err := c.Watch(ctx, "service/a", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.store.Stats().Watches.Open; n != 0 {
		t.Fatalf("%d watches open after Watch.Close", n)
	}
	if _, err := gone.Next(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Watch.Close: %v", err)
	}
	w, err := c.Watch(ctx, "service/a", "")
	if err != nil {
		t.Fatal(err)
	}
	link := c.Link(newRecordLink())
	if _, _, err := link.Watch("raw", "service/b", ""); err != nil {
		t.Fatal(err)
	}
	if n := s.store.Stats().Watches.Open; n != 2 {
		t.Fatalf("%d watches open, want 2", n)
	}
	blocked := make(chan error, 1)
	next(t, w) // the snapshot
	go func() {
		_, err := w.Next(ctx)
		blocked <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.waitEnded(t); err != nil {
		t.Fatalf("the session ended with %v, want a clean close", err)
	}
	if n := s.store.Stats().Watches.Open; n != 0 {
		t.Fatalf("%d watches open after Close", n)
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, client.ErrClosed) {
			t.Fatalf("a Next waiting during Close returned %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("a Next waiting during Close never returned")
	}
	calls := map[string]func() error{
		"get": func() error { _, err := c.Get(ctx, "service/a", "k"); return err },
		"put": func() error { _, err := c.Put(ctx, putReq("service/a", "k", 1)); return err },
		"delete": func() error {
			_, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: "service/a", Key: "k"})
			return err
		},
		"watch": func() error { _, err := c.Watch(ctx, "service/a", ""); return err },
		"next":  func() error { _, err := w.Next(ctx); return err },
		"info":  func() error { _, err := c.Info(ctx); return err },
		"link watch": func() error {
			_, _, err := c.Link(newRecordLink()).Watch("x", "service/a", "")
			return err
		},
		"link ack": func() error { return link.Ack("raw", 1) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, client.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Watch.Close after Client.Close: %v", err)
	}
}

// TestCloseLeavesNoGoroutine: a client that connected, watched,
// reconnected and linked leaves nothing running once closed.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	// Serial: goleak.VerifyNone checks the goroutines of the whole process.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startServer(t, serverOptions{})
	func() {
		c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.url}, Token: adminToken, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		link := newRecordLink()
		k := c.Link(link)
		w, err := c.Watch(ctx, "service/a", "")
		if err != nil {
			t.Fatal(err)
		}
		next(t, w)
		if _, _, err := k.Watch("raw", "service/a", ""); err != nil {
			t.Fatal(err)
		}
		s.dropSessions(t)
		link.waitFor(t, "reconnected")
		if ev := next(t, w); ev.Kind != client.EventResnapshot {
			t.Fatalf("after the drop: %+v", ev)
		}
		if _, err := c.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	s.stop()
}

// TestInfoRefusal: Info reports a server's refusal with its status.
func TestInfoRefusal(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	s := startServer(t, serverOptions{refuse: &refuse})
	c := dial(t, nil, s.url)
	refuse.Store(true)
	_, err := c.Info(ctx)
	var ie *client.InfoError
	if !errors.As(err, &ie) || ie.Status != 401 || !strings.Contains(ie.Reason, "rotated") || !strings.Contains(err.Error(), "http://"+s.addr+client.InfoPath) {
		t.Fatalf("Info = %v, want a 401 *InfoError with the server's reason", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Get(cctx, "service/a", "k"); statestore.CodeOf(err) != statestore.Unavailable || !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with a cancelled context: %v", err)
	}
}
