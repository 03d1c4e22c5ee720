package statestore_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// The contract both homes of a namespace keep (backend.go): the same
// compare-and-set forms, quotas, TTL rules, and watch snapshot and
// updates, whether the namespace lives in the journal or in config.toml,
// or in a cluster's replicated journal, at its leader or at a follower.
// Every case runs against each; what differs by home is in the case.

// contractNS is journal-backed in a plain store and settings-backed in
// one opened on testdata/settings-config.toml, which declares it.
const contractNS = setNS

// home opens a store holding contractNS in one of its two homes.
type home struct {
	name string
	open func(t *testing.T, mod ...func(*statestore.Options)) *fixture
	// files is what a refused write must leave unchanged on disk: the
	// journal's record count, config.toml's bytes, or a cluster's applied
	// raft indexes.
	files func(f *fixture) string
	// cluster is set for a node of a 3-node cluster (cluster_contract_test.go).
	cluster bool
}

var journalHome = home{
	name: "journal",
	open: func(t *testing.T, mod ...func(*statestore.Options)) *fixture { return newFixture(t, mod...) },
	files: func(f *fixture) string {
		return fmt.Sprint(f.s.JournalStats().Records)
	},
}

// storeHomes hold a namespace of any name; homes adds config.toml's.
var storeHomes = append([]home{journalHome}, clusterHomes...)

var homes = append([]home{
	journalHome,
	{
		name: "settings",
		open: func(t *testing.T, mod ...func(*statestore.Options)) *fixture {
			return newSettingsFixture(t, mod...).fixture
		},
		files: func(f *fixture) string {
			b, err := os.ReadFile(f.opts.Settings)
			if err != nil {
				f.t.Fatal(err)
			}
			return string(b)
		},
	},
}, clusterHomes...)

// eachHome runs fn as one parallel subtest per home.
func eachHome(t *testing.T, fn func(t *testing.T, h home)) {
	t.Helper()
	for _, h := range homes {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			fn(t, h)
		})
	}
}

// TestContractExpectedRevision: expected_revision absent, 0 and N, on put
// and delete, on a missing and an existing key.
func TestContractExpectedRevision(t *testing.T) {
	t.Parallel()
	blind := func(uint64) statestore.Expect { return statestore.Expect{} }
	create := func(uint64) statestore.Expect { return statestore.CreateOnly }
	tests := []struct {
		name    string
		exists  bool // key written (at revision 1) before the step
		del     bool
		expect  func(cur uint64) statestore.Expect
		code    statestore.Code
		wantCur uint64 // CurrentRevision on CONFLICT
		wantRev uint64 // revision produced on success
	}{
		{"put blind on missing key creates", false, false, blind, statestore.OK, 0, 1},
		{"put blind on existing key replaces", true, false, blind, statestore.OK, 0, 2},
		{"put create-only on missing key", false, false, create, statestore.OK, 0, 1},
		{"put create-only on existing key conflicts", true, false, create, statestore.Conflict, 1, 0},
		{"put matching revision replaces", true, false, statestore.IfRevision, statestore.OK, 0, 2},
		{"put stale revision conflicts", true, false, func(c uint64) statestore.Expect { return statestore.IfRevision(c + 5) }, statestore.Conflict, 1, 0},
		{"put revision on missing key conflicts with 0", false, false, func(uint64) statestore.Expect { return statestore.IfRevision(3) }, statestore.Conflict, 0, 0},
		{"delete blind existing", true, true, blind, statestore.OK, 0, 2},
		{"delete blind missing is not found", false, true, blind, statestore.NotFound, 0, 0},
		{"delete matching revision", true, true, statestore.IfRevision, statestore.OK, 0, 2},
		{"delete stale revision conflicts", true, true, func(c uint64) statestore.Expect { return statestore.IfRevision(c + 1) }, statestore.Conflict, 1, 0},
		{"delete with revision on missing key is not found", false, true, func(uint64) statestore.Expect { return statestore.IfRevision(1) }, statestore.NotFound, 0, 0},
		{"delete create-only on existing conflicts", true, true, create, statestore.Conflict, 1, 0},
	}
	eachHome(t, func(t *testing.T, h home) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				f := h.open(t)
				var cur uint64
				if tc.exists {
					cur = f.mustPut(admin, contractNS, "k", docN(1)).Revision
				}
				before := h.files(f)
				var rev uint64
				var err error
				if tc.del {
					rev, err = f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: contractNS, Key: "k", Expect: tc.expect(cur)})
				} else {
					var e statestore.Entry
					e, err = f.put(admin, contractNS, "k", docN(2), tc.expect(cur))
					rev = e.Revision
				}
				if got := statestore.CodeOf(err); got != tc.code {
					t.Fatalf("code %v, want %v (%v)", got, tc.code, err)
				}
				switch tc.code {
				case statestore.OK:
					if rev != tc.wantRev || f.s.Namespace(contractNS).Revision != tc.wantRev {
						t.Fatalf("revision %d (namespace %d), want %d", rev, f.s.Namespace(contractNS).Revision, tc.wantRev)
					}
					return
				case statestore.Conflict:
					se := wantCode(t, err, statestore.Conflict, "expected_revision")
					if se.CurrentRevision != tc.wantCur {
						t.Fatalf("conflict carries %d, want %d", se.CurrentRevision, tc.wantCur)
					}
					if !strings.Contains(err.Error(), fmt.Sprintf("current revision %d", tc.wantCur)) {
						t.Fatalf("message %q lacks the current revision", err)
					}
				case statestore.NotFound:
					wantCode(t, err, statestore.NotFound, "key")
				}
				if f.s.Namespace(contractNS).Revision != cur || h.files(f) != before {
					t.Fatalf("a rejected write changed the store (namespace revision %d)", f.s.Namespace(contractNS).Revision)
				}
			})
		}
	})
}

// TestContractQuota: the entries-per-namespace bound refuses a new key,
// names the bound, the limit and the namespace, and still lets an existing
// key be replaced; emptying the namespace keeps its revision.
func TestContractQuota(t *testing.T) {
	t.Parallel()
	eachHome(t, func(t *testing.T, h home) {
		f := h.open(t, func(o *statestore.Options) { o.Limits.MaxEntriesPerNamespace = 2 })
		f.mustPut(admin, contractNS, "a", docN(1))
		f.mustPut(admin, contractNS, "b", docN(2))
		before := h.files(f)
		_, err := f.put(admin, contractNS, "c", docN(3), statestore.Expect{})
		se := wantCode(t, err, statestore.QuotaExceeded, quota.BoundEntriesPerNamespace)
		if !strings.Contains(se.Error(), "limit 2") || !strings.Contains(se.Error(), contractNS) {
			t.Fatalf("message %q does not name the limit and the namespace", se)
		}
		if h.files(f) != before {
			t.Fatal("the refused write reached the disk")
		}
		if e := f.mustPut(admin, contractNS, "a", docN(4)); e.Revision != 3 {
			t.Fatalf("replacing an existing key: revision %d, want 3", e.Revision)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: contractNS, Key: k}); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.s.Namespace(contractNS); n.Revision != 5 || n.Entries != 0 || n.Bytes != 0 {
			t.Fatalf("emptied namespace %+v, want revision 5 and nothing held", n)
		}
	})
}

// TestContractTTL: the journal takes leases (1 s to 24 h, clamped above,
// expiry inclusive); config.toml takes none, and every TTL is refused with
// nothing written. Below the minimum both refuse alike.
func TestContractTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ttl      time.Duration
		journal  statestore.Code
		expireIn time.Duration // the journal's accepted deadline
	}{
		{"999 ms", 999 * time.Millisecond, statestore.TTLInvalid, 0},
		{"negative", -time.Second, statestore.TTLInvalid, 0},
		{"1 s", time.Second, statestore.OK, time.Second},
		{"24 h", 24 * time.Hour, statestore.OK, 24 * time.Hour},
		{"24 h + 1 ms clamped", 24*time.Hour + time.Millisecond, statestore.OK, 24 * time.Hour},
		{"a week clamped", 7 * 24 * time.Hour, statestore.OK, 24 * time.Hour},
	}
	eachHome(t, func(t *testing.T, h home) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				f := h.open(t)
				before := h.files(f)
				e, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: contractNS, Key: "k", Schema: schema.MediaIntentV1, Document: docN(1), TTL: tc.ttl})
				want := tc.journal
				if h.name == "settings" {
					want = statestore.TTLInvalid
				}
				if want != statestore.OK {
					wantCode(t, err, want, "ttl")
					if f.s.Namespace(contractNS).Revision != 0 || h.files(f) != before {
						t.Fatal("a refused TTL wrote something")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if want := t0.Add(tc.expireIn).UnixMilli(); e.ExpiresMs != want {
					t.Fatalf("expires_at_ms %d, want %d", e.ExpiresMs, want)
				}
				// One millisecond before the deadline the entry reads; at
				// exactly the deadline it is gone (expiry is inclusive).
				f.clock.Set(time.UnixMilli(e.ExpiresMs - 1))
				if _, err := f.s.Get(ctx, admin, contractNS, "k"); err != nil {
					t.Fatalf("1 ms before the deadline: %v", err)
				}
				f.clock.Set(time.UnixMilli(e.ExpiresMs))
				_, err = f.s.Get(ctx, admin, contractNS, "k")
				wantCode(t, err, statestore.NotFound, "key")
			})
		}
	})
}

// TestContractWatch: a watch's snapshot holds the entries under its prefix
// at the namespace's revision; every later mutation under the prefix
// arrives once, in order, with consecutive sequences and the revision it
// produced; others do not; a snapshot over its bound registers nothing.
func TestContractWatch(t *testing.T) {
	t.Parallel()
	eachHome(t, func(t *testing.T, h home) {
		f := h.open(t, func(o *statestore.Options) { o.Limits.MaxSnapshotEntries = 2 })
		f.mustPut(admin, contractNS, "cams/a", docN(1))
		f.mustPut(admin, contractNS, "other", docN(2))
		ss, sink := f.session(admin)
		res := f.watch(ss, "w", contractNS, "cams/")
		if res.SnapshotRevision != 2 || len(res.Entries) != 1 || res.Entries[0].Key != "cams/a" || res.Entries[0].Revision != 1 {
			t.Fatalf("snapshot %+v", res)
		}
		if snap, ok := sink.next(t).(*watch.Snapshot); !ok || snap.SnapshotRevision != 2 || len(snap.Entries) != 1 {
			t.Fatalf("first message %#v, want the snapshot", snap)
		}
		f.mustPut(admin, contractNS, "cams/b", docN(3))
		f.mustPut(admin, contractNS, "other", docN(4)) // outside the prefix
		if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: contractNS, Key: "cams/a"}); err != nil {
			t.Fatal(err)
		}
		u1, u2 := sink.nextUpdate(t), sink.nextUpdate(t)
		if u1.Sequence != 1 || u1.Kind != watch.Put || u1.Revision != 3 || u1.Key != "cams/b" || !bytes.Equal(u1.Entry.Document, docN(3)) {
			t.Fatalf("first update %+v", u1)
		}
		if u2.Sequence != 2 || u2.Kind != watch.Delete || u2.Revision != 5 || u2.Key != "cams/a" {
			t.Fatalf("second update %+v", u2)
		}
		sink.empty(t)
		f.mustPut(admin, contractNS, "cams/c", docN(5))
		f.mustPut(admin, contractNS, "cams/d", docN(6))
		_, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "wide", Namespace: contractNS, KeyPrefix: "cams/"})
		wantCode(t, err, statestore.WatchTooBroad, "watch snapshot entries")
		if res := f.watch(ss, "wide", contractNS, "cams/c"); len(res.Entries) != 1 {
			t.Fatalf("the refused watch registered something, or the narrowed one is wrong: %+v", res)
		}
	})
}
