package statestore_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

// TestScenario1TwoWritersCAS is the specification's first acceptance
// scenario: two writers compare-and-set one key from the same revision.
func TestScenario1TwoWritersCAS(t *testing.T) {
	f := newFixture(t)
	ns, key := "service/transcoder-a", "intents/front-door"
	base := f.mustPut(admin, ns, key, docN(0))
	w1 := statestore.Principal{ID: "coordinator-1", Admin: true}
	w2 := statestore.Principal{ID: "coordinator-2", Admin: true}
	e1, err1 := f.put(w1, ns, key, docN(1), statestore.IfRevision(base.Revision))
	_, err2 := f.put(w2, ns, key, docN(2), statestore.IfRevision(base.Revision))
	if err1 != nil {
		t.Fatalf("first writer: %v", err1)
	}
	se := wantCode(t, err2, statestore.Conflict, "expected_revision")
	if se.CurrentRevision != e1.Revision {
		t.Fatalf("conflict carries revision %d, winner wrote %d", se.CurrentRevision, e1.Revision)
	}
	// The loser rereads, merges and retries against the current revision.
	cur, err := f.s.Get(ctx, w2, ns, key)
	if err != nil || cur.Revision != e1.Revision || cur.Owner != "coordinator-1" {
		t.Fatalf("reread: %+v %v", cur, err)
	}
	e2, err := f.put(w2, ns, key, docN(2), statestore.IfRevision(cur.Revision))
	if err != nil || e2.Revision != e1.Revision+1 || e2.Owner != "coordinator-2" {
		t.Fatalf("retry: %+v %v", e2, err)
	}
}

// TestConcurrentCASHammer runs many writers doing read-modify-CAS rounds on
// shared keys: every round has exactly one winner per key and revision, no
// update is lost, and each loser's CONFLICT names a revision that exists.
func TestConcurrentCASHammer(t *testing.T) {
	f := newFixture(t)
	const writers, rounds, keys = 16, 40, 3
	ns := "group/g1"
	for k := 0; k < keys; k++ {
		f.mustPut(admin, ns, fmt.Sprintf("k%d", k), docN(0))
	}
	var mu sync.Mutex
	wins := map[string]int{}
	winRevs := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := statestore.Principal{ID: fmt.Sprintf("w%d", w), Admin: true}
			for r := 0; r < rounds; r++ {
				key := fmt.Sprintf("k%d", (w+r)%keys)
				for {
					cur, err := f.s.Get(ctx, p, ns, key)
					if err != nil {
						t.Error(err)
						return
					}
					e, err := f.put(p, ns, key, docN(w*1000+r), statestore.IfRevision(cur.Revision))
					if err == nil {
						mu.Lock()
						wins[key]++
						if winRevs[e.Revision] {
							t.Errorf("revision %d won twice", e.Revision)
						}
						winRevs[e.Revision] = true
						mu.Unlock()
						break
					}
					var se *statestore.Error
					if !errors.As(err, &se) || se.Code != statestore.Conflict || se.CurrentRevision <= cur.Revision {
						t.Errorf("lost CAS: %v (read revision %d)", err, cur.Revision)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	total := 0
	for _, n := range wins {
		total += n
	}
	if total != writers*rounds {
		t.Fatalf("%d successful CAS rounds, want %d", total, writers*rounds)
	}
	// The namespace revision counts every committed write exactly once.
	if got := f.s.Namespace(ns).Revision; got != uint64(keys+writers*rounds) {
		t.Fatalf("namespace revision %d, want %d", got, keys+writers*rounds)
	}
}

func TestNamespacePolicy(t *testing.T) {
	principals := map[string]statestore.Principal{"owner": alice, "other user": bob, "admin": admin, "system": sys}
	// want[namespace][principal] = {read, write}
	want := map[string]map[string][2]bool{
		"system":          {"owner": {false, false}, "other user": {false, false}, "admin": {true, false}, "system": {true, true}},
		"system/media":    {"owner": {false, false}, "other user": {false, false}, "admin": {true, false}, "system": {true, true}},
		"service/transc1": {"owner": {false, false}, "other user": {false, false}, "admin": {true, true}, "system": {true, true}},
		"group/g1":        {"owner": {false, false}, "other user": {false, false}, "admin": {true, true}, "system": {true, true}},
		"user/alice":      {"owner": {true, true}, "other user": {false, false}, "admin": {true, true}, "system": {true, true}},
	}
	f := newFixture(t)
	for ns, row := range want {
		f.mustPut(sys, ns, "seed", docN(0))
		for who, rw := range row {
			p := principals[who]
			t.Run(ns+"/"+who, func(t *testing.T) {
				_, err := f.s.Get(ctx, p, ns, "seed")
				if rw[0] != (err == nil) {
					t.Fatalf("read allowed=%v, got %v", rw[0], err)
				}
				if !rw[0] {
					wantCode(t, err, statestore.PermissionDenied, "namespace")
				}
				before := f.s.Namespace(ns)
				e, err := f.put(p, ns, "k-"+strings.ReplaceAll(who, " ", "-"), docN(1), statestore.Expect{})
				if rw[1] != (err == nil) {
					t.Fatalf("write allowed=%v, got %v", rw[1], err)
				}
				if rw[1] && e.Owner != p.ID {
					t.Fatalf("owner %q, want the calling principal %q", e.Owner, p.ID)
				}
				if !rw[1] {
					wantCode(t, err, statestore.PermissionDenied, "namespace")
					if f.s.Namespace(ns) != before {
						t.Fatal("a denied write changed the namespace")
					}
					_, err = f.s.Delete(ctx, p, statestore.DeleteRequest{Namespace: ns, Key: "seed"})
					wantCode(t, err, statestore.PermissionDenied, "namespace")
				}
			})
		}
	}
	// A principal named like a service or the system gets nothing from it.
	impostor := statestore.Principal{ID: "transc1"}
	_, err := f.put(impostor, "service/transc1", "x", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	_, err = f.put(statestore.Principal{ID: "keeppeek-server", Admin: true}, "system", "x", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	_, err = f.put(statestore.Principal{}, "user/", "x", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.InvalidArgument, "namespace")
	_, err = f.put(statestore.Principal{}, "user/alice", "x", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.PermissionDenied, "principal")
}

func TestInvalidArguments(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("a", 300)
	tests := []struct {
		name, ns, key, schema string
		code                  statestore.Code
		field                 string
	}{
		{"empty namespace", "", "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"unknown namespace class", "tenant/x", "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"namespace too deep", "user/alice/extra", "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"namespace with dot-dot id", "user/..", "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"namespace with bad char", "user/al ice", "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"namespace too long", "user/" + long, "k", schema.MediaIntentV1, statestore.InvalidArgument, "namespace"},
		{"empty key", "user/alice", "", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key leading slash", "user/alice", "/k", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key empty segment", "user/alice", "a//b", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key trailing slash", "user/alice", "a/", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key dot segment", "user/alice", "a/./b", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key too long", "user/alice", long, schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"key with unicode", "user/alice", "caméra", schema.MediaIntentV1, statestore.InvalidArgument, "key"},
		{"unregistered schema", "user/alice", "k", "keeppeek.unknown.v1", statestore.SchemaInvalid, "schema"},
		{"malformed schema name", "user/alice", "k", "media-intent", statestore.SchemaInvalid, "schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.s.Put(ctx, alice, statestore.PutRequest{Namespace: tc.ns, Key: tc.key, Schema: tc.schema, Document: docN(1)})
			se := wantCode(t, err, tc.code, tc.field)
			if !strings.Contains(se.Error(), tc.field) {
				t.Fatalf("message %q does not name %q", se.Error(), tc.field)
			}
		})
	}
	if n, _, _ := f.s.Usage(); n != 0 {
		t.Fatalf("rejected writes left %d entries", n)
	}
}

// TestReopenIdentical closes and reopens: every entry, revision, owner,
// timestamp and counter is as it was.
func TestReopenIdentical(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 50; i++ {
		f.clock.Advance(time.Duration(i) * time.Millisecond)
		ns := []string{"user/alice", "group/g1", "service/s1", "system"}[i%4]
		p := map[string]statestore.Principal{"user/alice": alice, "group/g1": admin, "service/s1": admin, "system": sys}[ns]
		f.mustPut(p, ns, fmt.Sprintf("k%d", i%9), docN(i))
		if i%7 == 3 {
			if _, err := f.s.Delete(ctx, p, statestore.DeleteRequest{Namespace: ns, Key: fmt.Sprintf("k%d", i%9)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Empty a namespace completely: its revision must survive.
	f.mustPut(admin, "group/empty", "only", docN(1))
	f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/empty", Key: "only"})

	before := snapshotStore(t, f)
	f.reopen()
	after := snapshotStore(t, f)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state differs after reopen:\nbefore %+v\nafter  %+v", before, after)
	}
	if f.s.Namespace("group/empty").Revision != 2 {
		t.Fatalf("emptied namespace revision %d, want 2", f.s.Namespace("group/empty").Revision)
	}
	e := f.mustPut(admin, "group/empty", "again", docN(2))
	if e.Revision != 3 {
		t.Fatalf("write after reopen got revision %d, want 3", e.Revision)
	}
}

type storeImage struct {
	Entries    map[string]statestore.Entry
	Namespaces map[string]statestore.NamespaceInfo
	Totals     [3]int64
}

func snapshotStore(t *testing.T, f *fixture) storeImage {
	t.Helper()
	img := storeImage{Entries: map[string]statestore.Entry{}, Namespaces: map[string]statestore.NamespaceInfo{}}
	for _, ns := range []string{"user/alice", "group/g1", "service/s1", "system", "group/empty"} {
		img.Namespaces[ns] = f.s.Namespace(ns)
		for i := 0; i < 9; i++ {
			key := fmt.Sprintf("k%d", i)
			if e, err := f.s.Get(ctx, sys, ns, key); err == nil {
				img.Entries[ns+"/"+key] = e
			}
		}
	}
	n, b, nss := f.s.Usage()
	img.Totals = [3]int64{int64(n), b, int64(nss)}
	return img
}

func TestSecondOpenIsLocked(t *testing.T) {
	f := newFixture(t)
	_, err := statestore.Open(f.opts)
	wantCode(t, err, statestore.Unavailable, "store")
	if !strings.Contains(err.Error(), "locked") {
		t.Fatalf("error %q does not say the store is locked", err)
	}
}

// TestWriterIDBecomesAValidOwner: the writing principal's ID is the entry's
// owner, and replay refuses a PUT without one or with one over the owner
// bound; such a write must be refused before the journal, or the store
// would acknowledge it and then fail to reopen.
func TestWriterIDBecomesAValidOwner(t *testing.T) {
	long := statestore.Principal{ID: strings.Repeat("a", 129), Admin: true}
	tests := []struct {
		name  string
		p     statestore.Principal
		code  statestore.Code
		field string
	}{
		{"admin without an ID", statestore.Principal{Admin: true}, statestore.PermissionDenied, "principal"},
		{"ID over the owner bound", long, statestore.InvalidArgument, "principal"},
		{"ID at the owner bound", statestore.Principal{ID: strings.Repeat("a", 128), Admin: true}, statestore.OK, ""},
	}
	f := newFixture(t)
	for i, tc := range tests {
		_, err := f.put(tc.p, "group/owners", fmt.Sprintf("k%d", i), docN(i), statestore.Expect{})
		if tc.code == statestore.OK {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			continue
		}
		wantCode(t, err, tc.code, tc.field)
	}
	f.reopen() // every acknowledged write replays
	if n := f.s.Namespace("group/owners").Entries; n != 1 {
		t.Fatalf("%d entries after reopen, want the one acknowledged", n)
	}
}
