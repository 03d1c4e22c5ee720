package statestore_test

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
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
