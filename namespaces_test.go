package statestore_test

import (
	"testing"

	"github.com/keeppeek/statestore"
)

func TestNamespacesListsEmptiedNamespacesWithTheirRevision(t *testing.T) {
	f := newFixture(t)
	f.mustPut(admin, "service/b", "k1", docN(1))
	f.mustPut(admin, "service/a", "k1", docN(1))
	f.mustPut(admin, "service/a", "k2", docN(2))
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "service/b", Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	got := f.s.Namespaces()
	want := []statestore.NamespaceListing{
		{Name: "service/a", NamespaceInfo: statestore.NamespaceInfo{Revision: 2, Entries: 2}},
		{Name: "service/b", NamespaceInfo: statestore.NamespaceInfo{Revision: 2, Entries: 0}},
	}
	if len(got) != len(want) {
		t.Fatalf("Namespaces() = %+v, want %d namespaces", got, len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Revision != want[i].Revision || got[i].Entries != want[i].Entries {
			t.Errorf("Namespaces()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got[0].Bytes <= 0 || got[1].Bytes != 0 {
		t.Errorf("bytes: %d and %d, want a positive count and 0", got[0].Bytes, got[1].Bytes)
	}
}

func TestMayReadFollowsTheNamespacePolicy(t *testing.T) {
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
