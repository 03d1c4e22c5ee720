package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/schema"
)

// TestScenario1TwoWritersCAS is the specification's first acceptance
// scenario: two writers compare-and-set one key from the same revision.
func TestScenario1TwoWritersCAS(t *testing.T) {
	t.Parallel()
	eachStoreHome(t, func(t *testing.T, h home) {
		f := h.open(t)
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
	})
}

// TestConcurrentCASHammer runs many writers doing read-modify-CAS rounds on
// shared keys: every round has exactly one winner per key and revision, no
// update is lost, and each loser's CONFLICT names a revision that exists.
func TestConcurrentCASHammer(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	eachStoreHome(t, func(t *testing.T, h home) {
		f := h.open(t)
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
	})
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
	t.Parallel()
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
	t.Parallel()
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

func TestNamespacesListsEmptiedNamespacesWithTheirRevision(t *testing.T) {
	t.Parallel()
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

// dirHashes fingerprints the tree under dir (internal/filetree).
func dirHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	h, err := filetree.Hashes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sameFiles fails unless the two fingerprints agree, naming what differs.
func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if diff := filetree.Diff(before, after); len(diff) > 0 {
		t.Fatalf("%s changed the store directory: %s", what, strings.Join(diff, ", "))
	}
}

// TestClosedStoreAnswersUnavailable calls the whole API on a closed store:
// every call that can fail answers UNAVAILABLE naming the store, the rest
// change nothing, and no file in the store directory changes.
func TestClosedStoreAnswersUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 8 {
		f.mustPut(admin, "group/g", "k"+string(rune('a'+i)), docN(i))
	}
	// A lease that lapses while the store is closed: an open store's Get
	// would commit its EXPIRE, a closed one must not.
	if _, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "lease", Schema: schema.MediaIntentV1, Document: docN(99), TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := f.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	ss, sink := f.session(admin)
	f.watch(ss, "w1", "group/g", "")
	s := f.s
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.s = nil
	f.clock.Advance(time.Minute)
	sink.nextClosed(t) // Close ended the watch with STORE_CLOSED

	put := statestore.PutRequest{Namespace: "group/g", Key: "new", Schema: schema.MediaIntentV1, Document: docN(1)}
	rows := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, admin, "group/g", "ka"); return err }},
		{"Get of a lapsed lease", func() error { _, err := s.Get(ctx, admin, "group/g", "lease"); return err }},
		{"Get with a bad key", func() error { _, err := s.Get(ctx, admin, "group/g", "../x"); return err }},
		{"Put", func() error { _, err := s.Put(ctx, admin, put); return err }},
		{"Put create-only", func() error {
			r := put
			r.Expect = statestore.CreateOnly
			_, err := s.Put(ctx, admin, r)
			return err
		}},
		{"Delete", func() error {
			_, err := s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/g", Key: "ka"})
			return err
		}},
		{"OpenSession", func() error { _, err := s.OpenSession(admin, newSink()); return err }},
		{"OpenSession without sink", func() error { _, err := s.OpenSession(admin, nil); return err }},
		{"Watch", func() error {
			_, err := s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w2", Namespace: "group/g"})
			return err
		}},
		{"Unwatch", func() error { return s.Unwatch(ss, "w1") }},
		{"Ack", func() error { return s.Ack(ss, "w1", 1) }},
		{"Checkpoint", s.Checkpoint},
		{"Backup", func() error { return s.Backup(&bytes.Buffer{}) }},
		{"Restore", func() error { return s.Restore(bytes.NewReader(backup.Bytes())) }},
		{"Restore of garbage", func() error { return s.Restore(strings.NewReader("not a backup")) }},
		{"Close again", s.Close},
	}
	root := filepath.Join(f.dir, statestore.StoreDirName)
	before := dirHashes(t, root)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			se := wantCode(t, err, statestore.Unavailable, "store")
			if !strings.Contains(se.Message, "closed") {
				t.Fatalf("message does not say the store is closed: %v", err)
			}
			sameFiles(t, r.name, before, dirHashes(t, root))
		})
	}
	// The calls that cannot fail: they change nothing either.
	if n := s.SetPrincipal(admin.ID, statestore.Principal{ID: admin.ID}, true); n != 0 {
		t.Fatalf("SetPrincipal on a closed store closed %d watches", n)
	}
	if ss.Principal() != admin {
		t.Fatalf("SetPrincipal on a closed store changed a session's principal to %+v", ss.Principal())
	}
	if got := s.Namespace("group/g"); got.Entries != 9 {
		t.Fatalf("Namespace on the closed store: %+v, want the 9 entries it closed with", got)
	}
	if n, _, _ := s.Usage(); n != 9 {
		t.Fatalf("Usage on the closed store: %d entries, want 9", n)
	}
	_, _ = s.JournalStats(), s.OpenReport()
	ss.Close()
	<-ss.Done()
	sameFiles(t, "the calls that cannot fail", before, dirHashes(t, root))
	sink.empty(t)

	// Nothing above reached the disk: the reopened store is as it was.
	f.open()
	if _, err := f.s.Get(ctx, admin, "group/g", "new"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("a Put on the closed store survived: %v", err)
	}
	if _, err := f.s.Get(ctx, admin, "group/g", "ka"); err != nil {
		t.Fatalf("a Delete on the closed store took effect: %v", err)
	}
}

// TestClosedHandleCannotUndoRestore is the two-handle sequence of issue 10:
// a closed handle's Checkpoint must not rewrite the image a second handle
// restored, and the restore survives a restart.
func TestClosedHandleCannotUndoRestore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Without pre-writing: s2 stays open while the files are compared, and
	// its pre-writer filling the tail with zeros is no change by s1.
	opts := statestore.Options{Dir: dir, NoPrewrite: true}
	s1, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s *statestore.Store, n int) {
		t.Helper()
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "k", Schema: schema.MediaIntentV1, Document: docN(n)}); err != nil {
			t.Fatal(err)
		}
	}
	write(s1, 1)
	var backup bytes.Buffer
	if err := s1.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	write(s1, 2)
	write(s1, 3)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Restore(&backup); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, statestore.StoreDirName)
	before := dirHashes(t, root)
	wantCode(t, s1.Checkpoint(), statestore.Unavailable, "store")
	wantCode(t, s1.Backup(&bytes.Buffer{}), statestore.Unavailable, "store")
	sameFiles(t, "the closed handle's Checkpoint", before, dirHashes(t, root))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	s3, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	e, err := s3.Get(ctx, admin, "group/g", "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Document, docN(1)) || e.Revision != 1 {
		t.Fatalf("after restart k is revision %d %s, want the restored revision 1 %s", e.Revision, e.Document, docN(1))
	}
}

// TestCheckpointAndRestoreRacingClose runs explicit checkpoints and a
// restore while Close runs: each either completes before Close releases
// the LOCK or answers UNAVAILABLE, nothing changes a file once Close has
// returned, and the store reopens with the restore applied exactly when
// Restore reported success.
func TestCheckpointAndRestoreRacingClose(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
		f.mustPut(admin, "group/g", "k", docN(1))
		var backup bytes.Buffer
		if err := f.s.Backup(&backup); err != nil {
			t.Fatal(err)
		}
		f.mustPut(admin, "group/g", "k", docN(2))
		s := f.s
		f.s = nil

		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 1024)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					err := s.Checkpoint()
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		restored := make(chan error, 1)
		go func() {
			<-start
			restored <- s.Restore(bytes.NewReader(backup.Bytes()))
		}()
		close(start)
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		root := filepath.Join(f.dir, statestore.StoreDirName)
		atClose := dirHashes(t, root)
		wg.Wait()
		rerr := <-restored
		close(errs)
		for err := range errs {
			wantCode(t, err, statestore.Unavailable, "store")
		}
		if rerr != nil {
			wantCode(t, rerr, statestore.Unavailable, "store")
		}
		sameFiles(t, "a checkpoint or restore after Close", atClose, dirHashes(t, root))

		f.open()
		e, err := f.s.Get(ctx, admin, "group/g", "k")
		if err != nil {
			t.Fatal(err)
		}
		want := docN(2)
		if rerr == nil {
			want = docN(1)
		}
		if !bytes.Equal(e.Document, want) {
			t.Fatalf("round %d: Restore returned %v but k holds %s", round, rerr, e.Document)
		}
	}
}
