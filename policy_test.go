package statestore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

// TestPermissionDeniedNamesRule holds each PERMISSION_DENIED to the policy
// row that refused it, so a caller can tell "not an administrator" from
// "not the owner" from "only the server writes here" without the source.
func TestPermissionDeniedNamesRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name  string
		p     statestore.Principal
		ns    string
		write bool
		field string
		rule  string
	}{
		{"anonymous reads a user namespace", statestore.Principal{}, "user/alice", false, "principal", "only an authenticated principal"},
		{"anonymous writes a service namespace", statestore.Principal{}, "service/s1", true, "principal", "only an authenticated principal"},
		{"admin writes system", admin, "system/media", true, "namespace", "rule system/: only the server writes"},
		{"user writes system", alice, "system", true, "namespace", "rule system/: only the server writes"},
		{"user reads system", alice, "system/media", false, "namespace", "rule system/: only administrators read"},
		{"user writes service", alice, "service/transcoder-a", true, "namespace", "rule service/<id>/: only administrators"},
		{"user named like the service reads it", statestore.Principal{ID: "transcoder-a"}, "service/transcoder-a", false, "namespace", "rule service/<id>/: only administrators"},
		{"user reads group", bob, "group/lobby", false, "namespace", "rule group/<id>/: only administrators"},
		{"user writes another user's namespace", bob, "user/alice", true, "namespace", `rule user/<owner-id>/: only the owner "alice" or an administrator`},
		{"user reads another user's namespace", alice, "user/bob", false, "namespace", `rule user/<owner-id>/: only the owner "bob" or an administrator`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.write {
				_, err = f.put(tc.p, tc.ns, "k", docN(1), statestore.Expect{})
			} else {
				_, err = f.s.Get(ctx, tc.p, tc.ns, "k")
			}
			se := wantCode(t, err, statestore.PermissionDenied, tc.field)
			if !strings.Contains(se.Error(), tc.rule) {
				t.Fatalf("%q does not name the rule %q", se, tc.rule)
			}
			if !strings.Contains(se.Error(), tc.ns) {
				t.Fatalf("%q does not name the namespace %q", se, tc.ns)
			}
		})
	}
}

func TestMayReadFollowsTheNamespacePolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    statestore.Principal
		ns   string
		want bool
	}{
		{alice, "user/alice", true},
		{alice, "user/bob", false},
		{alice, "service/transcoder-a", false},
		{alice, "system/observed", false},
		{admin, "service/transcoder-a", true},
		{admin, "user/bob", true},
		{admin, "system/observed", true},
		{statestore.Principal{}, "user/", false},
	}
	for _, c := range cases {
		if got := c.p.MayRead(c.ns); got != c.want {
			t.Errorf("%+v.MayRead(%q) = %v, want %v", c.p, c.ns, got, c.want)
		}
	}
}

// TestLiveConfigurationRefusesTTL: MQTT integration state
// (service/mqtt-<bridge>) is live configuration, so every TTL there is
// TTL_INVALID naming the field and the reason, and writes nothing, whether
// the namespace lives in the journal or is settings-backed; the same TTLs
// are leases on any other service namespace, and a bridge's document
// without a TTL is accepted.
func TestLiveConfigurationRefusesTTL(t *testing.T) {
	t.Parallel()
	bridge, err := os.ReadFile("testdata/mqtt-bridge.json")
	if err != nil {
		t.Fatal(err)
	}
	const garage = "service/mqtt-garage" // settings-backed in the settings store below
	tests := []struct {
		name    string
		ns      string
		ttl     time.Duration
		refused bool
		expires time.Duration // the accepted lease, when not refused
	}{
		{"a lease on a bridge", statestore.MQTTNamespace("front-door"), 10 * time.Second, true, 0},
		{"below the minimum on a bridge: live configuration, not the minimum", statestore.MQTTNamespace("front-door"), 500 * time.Millisecond, true, 0},
		{"above the maximum on a bridge: refused, not clamped", statestore.MQTTNamespace("front-door"), 48 * time.Hour, true, 0},
		{"a negative TTL on a bridge", statestore.MQTTNamespace("front-door"), -time.Second, true, 0},
		{"a lease on a settings-backed bridge", garage, 10 * time.Second, true, 0},
		{"no TTL on a bridge", statestore.MQTTNamespace("front-door"), 0, false, 0},
		{"no TTL on a settings-backed bridge", garage, 0, false, 0},
		{"a lease on an ordinary service namespace", "service/transcoder-a", 10 * time.Second, false, 10 * time.Second},
		{"a clamped lease on an ordinary service namespace", "service/transcoder-a", 48 * time.Hour, false, 24 * time.Hour},
		{"service/mqtt is not a bridge's namespace", "service/mqtt", 10 * time.Second, false, 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			config := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(config, []byte("[state_store]\nnamespaces = ['"+garage+"']\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, func(o *statestore.Options) { o.Settings = config })
			before, err := os.ReadFile(config)
			if err != nil {
				t.Fatal(err)
			}
			e, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: tc.ns, Key: "bridge", Schema: schema.MQTTBridgeV1, Document: bridge, TTL: tc.ttl})
			after, rerr := os.ReadFile(config)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.refused {
				se := wantCode(t, err, statestore.TTLInvalid, "ttl")
				if !strings.Contains(se.Message, "live configuration takes no TTL") || !strings.Contains(se.Message, tc.ns) {
					t.Fatalf("%q does not name the namespace and the reason", se)
				}
				if f.s.Namespace(tc.ns).Revision != 0 || f.s.JournalStats().Records != 0 || !bytes.Equal(before, after) {
					t.Fatal("a refused TTL wrote something")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want int64
			if tc.expires != 0 {
				want = t0.Add(tc.expires).UnixMilli()
			}
			if e.ExpiresMs != want {
				t.Fatalf("expires_at_ms %d, want %d", e.ExpiresMs, want)
			}
			if tc.ns == garage && !bytes.Contains(after, []byte(`'service/mqtt-garage'`+"\nkey = 'bridge'")) {
				t.Fatalf("the settings-backed bridge is not in config.toml:\n%s", after)
			}
		})
	}
}
