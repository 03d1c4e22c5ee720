package etcdpeer

import (
	"context"
	"testing"
	"time"
)

// TestClusterHasThreeMembers: OpenCluster's members form one cluster of
// three that agrees on one leader, each client reaches the member its
// index names, and a CAS through a client of any member commits.
func TestClusterHasThreeMembers(t *testing.T) {
	t.Parallel()
	db, err := OpenCluster(t.TempDir(), 3, 4, 64, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := db.clis[0].MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 || db.Members() != 3 {
		t.Fatalf("%d members listed, %d run: want 3", len(list.Members), db.Members())
	}
	leaders := map[uint64]bool{}
	for i, e := range db.etcds {
		if e.Config().UnsafeNoFsync {
			t.Fatalf("member %d runs without fsync", i)
		}
		leaders[uint64(e.Server.Leader())] = true
		if got, want := db.Endpoints()[i], e.Clients[0].Addr().String(); len(got) != 1 || got[0] != want {
			t.Fatalf("client %d reaches %v, want member %d at %s", i, got, i, want)
		}
	}
	if len(leaders) != 1 || leaders[0] {
		t.Fatalf("members name leaders %v, want one", leaders)
	}
	for k := range 4 {
		before := db.Revision(k)
		if err := db.CAS(k); err != nil {
			t.Fatalf("CAS %d: %v", k, err)
		}
		if db.Revision(k) <= before {
			t.Fatalf("CAS %d: revision %d after %d", k, db.Revision(k), before)
		}
	}
}
