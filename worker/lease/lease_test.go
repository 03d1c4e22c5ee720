package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

const ns, key = "service/transcoder-a", "leases/front-door-video-browser-h264-720p"

func client(t *testing.T, s *storetest.Store, id string) stateclient.Client {
	return stateclient.As(s.Store, statestore.Principal{ID: id, Admin: true})
}

func newLease(t *testing.T, s *storetest.Store, holder string, mod ...func(*lease.Config)) *lease.Lease {
	t.Helper()
	cfg := lease.Config{Namespace: ns, Key: key, Holder: holder, TTL: 10 * time.Second, Rand: func(n int64) int64 { return n / 2 }}
	for _, m := range mod {
		m(&cfg)
	}
	l, err := lease.New(client(t, s, holder), s.Reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestClaimRenewRelease(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	a, b := newLease(t, s, "worker-a"), newLease(t, s, "worker-b")
	if err := a.Claim(ctx, s.Clock.Now()); err != nil || !a.Held() {
		t.Fatalf("first claim: %v held=%v", err, a.Held())
	}
	var held *lease.HeldError
	if err := b.Claim(ctx, s.Clock.Now()); !errors.As(err, &held) || held.Revision != a.Revision() || b.Held() {
		t.Fatalf("second claim: %v, want HeldError at revision %d", err, a.Revision())
	}
	// TTL 10 s: renew every 10/3 s, brought forward by half the 1 s jitter.
	if want := storetest.T0.Add(10*time.Second/3 - 500*time.Millisecond); !a.RenewAt().Equal(want) {
		t.Fatalf("renew at %v, want %v", a.RenewAt(), want)
	}
	s.Clock.Set(a.RenewAt())
	before := a.Revision()
	if err := a.Renew(ctx, s.Clock.Now()); err != nil || a.Revision() <= before {
		t.Fatalf("renew: %v revision %d -> %d", err, before, a.Revision())
	}
	e, err := s.Get(ctx, statestore.System(), ns, key)
	if err != nil || e.ExpiresMs != s.Clock.Now().Add(10*time.Second).UnixMilli() || e.Owner != "worker-a" {
		t.Fatalf("renewed entry %+v %v", e, err)
	}
	if err := b.Renew(ctx, s.Clock.Now()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a standby renewed: %v", err)
	}
	if err := a.Release(ctx); err != nil || a.Held() {
		t.Fatalf("release: %v", err)
	}
	if err := b.Claim(ctx, s.Clock.Now()); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
}

// TestRenewNeverTouchesAnotherOwnersEntry: after the lease lapsed and a
// standby claimed it, the old holder's renewal and release fail as lost and
// leave the new holder's entry exactly as it was.
func TestRenewNeverTouchesAnotherOwnersEntry(t *testing.T) {
	t.Parallel()
	for name, op := range map[string]func(*lease.Lease, *storetest.Store) error{
		"renew":   func(l *lease.Lease, s *storetest.Store) error { return l.Renew(ctx, s.Clock.Now()) },
		"release": func(l *lease.Lease, _ *storetest.Store) error { return l.Release(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t, lease.RegisterSchema)
			a, b := newLease(t, s, "worker-a"), newLease(t, s, "worker-b")
			if err := a.Claim(ctx, s.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			s.Clock.Advance(10 * time.Second)
			if err := b.Claim(ctx, s.Clock.Now()); err != nil {
				t.Fatalf("standby claim after expiry: %v", err)
			}
			want, _ := s.Get(ctx, statestore.System(), ns, key)
			var lost *lease.LostError
			if err := op(a, s); !errors.As(err, &lost) || lost.Current != want.Revision || a.Held() {
				t.Fatalf("%s by the old holder: %v", name, err)
			}
			if err := op(a, s); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("%s again after the loss: %v", name, err)
			}
			got, _ := s.Get(ctx, statestore.System(), ns, key)
			if got.Revision != want.Revision || got.Owner != "worker-b" || got.ExpiresMs != want.ExpiresMs {
				t.Fatalf("new holder's entry changed: %+v, was %+v", got, want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	tests := []struct {
		name      string
		held      bool
		entry     func(rev uint64) *statestore.Entry
		seen      func(rev uint64) uint64
		wantClaim bool
		wantLost  bool
	}{
		{"standby, key present", false, func(r uint64) *statestore.Entry { return &statestore.Entry{Revision: r} }, func(r uint64) uint64 { return r }, false, false},
		{"standby, key absent", false, func(uint64) *statestore.Entry { return nil }, func(r uint64) uint64 { return r + 1 }, true, false},
		{"holder, our entry", true, func(r uint64) *statestore.Entry { return &statestore.Entry{Revision: r} }, func(r uint64) uint64 { return r }, false, false},
		{"holder, view behind our write", true, func(uint64) *statestore.Entry { return nil }, func(r uint64) uint64 { return r - 1 }, false, false},
		{"holder, expired", true, func(uint64) *statestore.Entry { return nil }, func(r uint64) uint64 { return r + 1 }, true, true},
		{"holder, replaced", true, func(r uint64) *statestore.Entry { return &statestore.Entry{Revision: r + 2} }, func(r uint64) uint64 { return r + 2 }, false, true},
	}
	// The cases run one by one: they claim and delete the one lease key of
	// the shared store.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLease(t, s, "worker-"+tc.name[:4])
			rev := s.Namespace(ns).Revision + 1
			if tc.held {
				if _, err := s.Delete(ctx, statestore.System(), statestore.DeleteRequest{Namespace: ns, Key: key}); err != nil && !errors.Is(err, statestore.ErrNotFound) {
					t.Fatal(err)
				}
				if err := l.Claim(ctx, s.Clock.Now()); err != nil {
					t.Fatal(err)
				}
				rev = l.Revision()
			}
			claim, lost := l.Observe(tc.entry(rev), tc.seen(rev))
			if claim != tc.wantClaim || (lost != nil) != tc.wantLost || l.Held() != (tc.held && !tc.wantLost) {
				t.Fatalf("claim=%v lost=%v held=%v", claim, lost, l.Held())
			}
		})
	}
}

func TestConfigRejected(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, lease.RegisterSchema)
	tests := []struct {
		field string
		mod   func(*lease.Config)
	}{
		{"namespace", func(c *lease.Config) { c.Namespace = "" }},
		{"key", func(c *lease.Config) { c.Key = "" }},
		{"ttl", func(c *lease.Config) { c.TTL = 500 * time.Millisecond }},
		{"renew_every", func(c *lease.Config) { c.RenewEvery = c.TTL }},
		{"jitter", func(c *lease.Config) { c.RenewEvery, c.Jitter = time.Second, 2*time.Second }},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			cfg := lease.Config{Namespace: ns, Key: key, Holder: "w", TTL: 10 * time.Second}
			tc.mod(&cfg)
			_, err := lease.New(client(t, s, "w"), s.Reg, cfg)
			var ce *lease.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("want ConfigError on %s, got %v", tc.field, err)
			}
		})
	}
	cfg := lease.Config{Namespace: ns, Key: key, Holder: "not/valid"}
	if _, err := lease.New(client(t, s, "w"), s.Reg, cfg); err == nil {
		t.Fatal("a holder the schema refuses was accepted")
	}
}
