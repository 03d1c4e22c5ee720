package statestore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// The settings namespaces testdata/settings-config.toml declares.
const (
	setNS   = "group/living-room"
	setUser = "user/alice"
)

// settingsFixture is a store whose Options.Settings is a copy of
// testdata/settings-config.toml in its own directory.
type settingsFixture struct {
	*fixture
	config string // path of config.toml
	orig   []byte // its bytes before the store touched it
}

func newSettingsFixture(t testing.TB, mod ...func(*statestore.Options)) *settingsFixture {
	t.Helper()
	orig, err := os.ReadFile("testdata/settings-config.toml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, append([]func(*statestore.Options){func(o *statestore.Options) { o.Settings = config }}, mod...)...)
	return &settingsFixture{fixture: f, config: config, orig: orig}
}

func (f *settingsFixture) read() []byte {
	f.t.Helper()
	b, err := os.ReadFile(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// outsideSection returns what the original fixture holds before its
// [state_store] header and from the comment above [[cameras]] on: the
// bytes no settings write may change. Found by search in the fixture, not
// by the code under test.
func outsideSection(t testing.TB, orig []byte) (before, after []byte) {
	t.Helper()
	i := bytes.Index(orig, []byte("\n[state_store]\nnamespaces"))
	j := bytes.Index(orig, []byte("\n# Cameras:"))
	if i < 0 || j < i {
		t.Fatal("fixture lacks its markers")
	}
	return orig[:i+1], orig[j:]
}

// checkRestIntact fails unless config keeps every byte of orig outside
// the state_store section, and still parses.
func checkRestIntact(t testing.TB, orig, config []byte) *settings.Section {
	t.Helper()
	before, after := outsideSection(t, orig)
	if !bytes.HasPrefix(config, before) || !bytes.HasSuffix(config, after) {
		t.Fatalf("bytes outside [state_store] changed:\n%s", config)
	}
	sec, err := settings.Parse(config)
	if err != nil {
		t.Fatalf("config.toml no longer parses: %v\n%s", err, config)
	}
	return sec
}

func TestSettingsPutCASDeleteGet(t *testing.T) {
	f := newSettingsFixture(t)
	if got := f.s.SettingsNamespaces(); strings.Join(got, ",") != "group/living-room,system/config,user/alice" {
		t.Fatalf("settings namespaces %v", got)
	}
	f.clock.Advance(time.Second)
	e1, err := f.put(admin, setNS, "layout", docN(1), statestore.CreateOnly)
	if err != nil {
		t.Fatal(err)
	}
	if e1.Revision != 1 || e1.Owner != admin.ID || e1.CreatedMs != t0.Add(time.Second).UnixMilli() || e1.ExpiresMs != 0 {
		t.Fatalf("created entry %+v", e1)
	}
	_, err = f.put(admin, setNS, "layout", docN(2), statestore.CreateOnly)
	if se := wantCode(t, err, statestore.Conflict, "expected_revision"); se.CurrentRevision != 1 {
		t.Fatalf("conflict carries revision %d", se.CurrentRevision)
	}
	_, err = f.put(admin, setNS, "layout", docN(2), statestore.IfRevision(7))
	wantCode(t, err, statestore.Conflict, "expected_revision")
	f.clock.Advance(time.Second)
	e2, err := f.put(admin, setNS, "layout", docN(2), statestore.IfRevision(1))
	if err != nil {
		t.Fatal(err)
	}
	if e2.Revision != 2 || e2.CreatedMs != e1.CreatedMs || e2.UpdatedMs != e1.UpdatedMs+1000 {
		t.Fatalf("replaced entry %+v", e2)
	}
	got, err := f.s.Get(ctx, admin, setNS, "layout")
	if err != nil || got.Revision != 2 || !bytes.Equal(got.Document, docN(2)) {
		t.Fatalf("get: %+v %v", got, err)
	}
	// The file holds it, readable, before any restart.
	sec := checkRestIntact(t, f.orig, f.read())
	if len(sec.Entries) != 1 || sec.Entries[0].Revision != 2 || string(sec.Entries[0].Document) != string(docN(2)) || sec.Revisions[setNS] != 2 {
		t.Fatalf("file section %+v", sec)
	}
	// A missing key: NOT_FOUND for get and delete; CAS on it is CONFLICT 0.
	_, err = f.s.Get(ctx, admin, setNS, "nope")
	wantCode(t, err, statestore.NotFound, "key")
	_, err = f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "nope"})
	wantCode(t, err, statestore.NotFound, "key")
	_, err = f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "layout", Expect: statestore.IfRevision(1)})
	wantCode(t, err, statestore.Conflict, "expected_revision")
	rev, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "layout", Expect: statestore.IfRevision(2)})
	if err != nil || rev != 3 {
		t.Fatalf("delete: %d %v", rev, err)
	}
	_, err = f.s.Get(ctx, admin, setNS, "layout")
	wantCode(t, err, statestore.NotFound, "key")
	if n := f.s.Namespace(setNS); n.Revision != 3 || n.Entries != 0 {
		t.Fatalf("namespace counters %+v", n)
	}
	// Policy is the journal namespaces' policy.
	_, err = f.put(alice, setNS, "layout", docN(3), statestore.Expect{})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	_, err = f.s.Get(ctx, bob, setUser, "prefs")
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	if e, err := f.put(alice, setUser, "prefs", docN(4), statestore.Expect{}); err != nil || e.Owner != "alice" {
		t.Fatalf("owner writes own settings namespace: %+v %v", e, err)
	}
	_, err = f.put(admin, "system/config", "k", docN(5), statestore.Expect{})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	// Schema and identifiers are checked as for the journal.
	_, err = f.put(admin, setNS, "bad", []byte(`{"role":"publish"}`), statestore.Expect{})
	wantCode(t, err, statestore.SchemaInvalid, "")
	_, err = f.put(admin, setNS, "../x", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.InvalidArgument, "key")
	// The counters, entries and the namespace revision survive a restart,
	// the emptied namespace's counter included.
	f.reopen()
	if n := f.s.Namespace(setNS); n.Revision != 3 || n.Entries != 0 {
		t.Fatalf("after reopen: namespace counters %+v", n)
	}
	if e, err := f.put(admin, setNS, "layout", docN(6), statestore.CreateOnly); err != nil || e.Revision != 4 {
		t.Fatalf("put after reopen: %+v %v", e, err)
	}
	if e, err := f.s.Get(ctx, alice, setUser, "prefs"); err != nil || e.Revision != 1 || e.Owner != "alice" {
		t.Fatalf("user entry after reopen: %+v %v", e, err)
	}
}

func TestSettingsWatchNoExpire(t *testing.T) {
	f := newSettingsFixture(t)
	f.mustPut(admin, setNS, "a", docN(1))
	ss, sink := f.session(admin)
	res := f.watch(ss, "w", setNS, "")
	if res.SnapshotRevision != 1 || len(res.Entries) != 1 || res.Entries[0].Key != "a" {
		t.Fatalf("snapshot %+v", res)
	}
	if snap, ok := sink.next(t).(*watch.Snapshot); !ok || snap.SnapshotRevision != 1 {
		t.Fatalf("first message %#v", snap)
	}
	f.mustPut(admin, setNS, "b", docN(2))
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "a"}); err != nil {
		t.Fatal(err)
	}
	// A journal namespace's write does not reach a settings watch.
	f.mustPut(admin, "group/other", "a", docN(3))
	u1, u2 := sink.nextUpdate(t), sink.nextUpdate(t)
	if u1.Sequence != 1 || u1.Kind != watch.Put || u1.Revision != 2 || u1.Key != "b" || !bytes.Equal(u1.Entry.Document, docN(2)) {
		t.Fatalf("first update %+v", u1)
	}
	if u2.Sequence != 2 || u2.Kind != watch.Delete || u2.Revision != 3 || u2.Key != "a" {
		t.Fatalf("second update %+v", u2)
	}
	// Acknowledged (so no ack deadline runs), then days pass: nothing
	// expires, nothing is sent, the watch stays open.
	if err := f.s.Ack(ss, "w", 2); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(48 * time.Hour)
	if _, err := f.s.Get(ctx, admin, setNS, "b"); err != nil {
		t.Fatalf("settings entry gone after 48 h: %v", err)
	}
	f.mustPut(admin, setNS, "c", docN(4))
	if u := sink.nextUpdate(t); u.Sequence != 3 || u.Kind != watch.Put || u.Key != "c" {
		t.Fatalf("update after 48 h: %+v (an EXPIRE or a closure would be a bug)", u)
	}
	sink.empty(t)
	// Policy and watch identifiers as for journal namespaces.
	bs, _ := f.session(bob)
	_, err := f.s.Watch(ctx, bs, statestore.WatchRequest{WatchID: "x", Namespace: setUser})
	wantCode(t, err, statestore.PermissionDenied, "namespace")
	if _, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: setNS}); statestore.CodeOf(err) != statestore.InvalidArgument {
		t.Fatalf("duplicate watch id: %v", err)
	}
}

// TestSettingsRestOfFileByteIdentical makes a hundred mutations; after
// every one, the bytes outside [state_store] (comments, root keys, a
// multi-line array and string whose lines start with '[', arrays of
// tables, the comment above the next table) are exactly the original.
func TestSettingsRestOfFileByteIdentical(t *testing.T) {
	f := newSettingsFixture(t)
	revs := map[string]uint64{}
	for i := range 100 {
		key := fmt.Sprintf("k%d", i%7)
		switch {
		case i%5 == 4 && revs[key] != 0:
			if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: key, Expect: statestore.IfRevision(revs[key])}); err != nil {
				t.Fatal(err)
			}
			delete(revs, key)
		default:
			e, err := f.put(admin, setNS, key, docN(i), statestore.IfRevision(revs[key]))
			if err != nil {
				t.Fatal(err)
			}
			revs[key] = e.Revision
		}
		sec := checkRestIntact(t, f.orig, f.read())
		if sec.Revisions[setNS] != uint64(i+1) || len(sec.Entries) != len(revs) {
			t.Fatalf("mutation %d: file section revision %d with %d entries, want %d with %d", i, sec.Revisions[setNS], len(sec.Entries), i+1, len(revs))
		}
	}
	st, err := os.Stat(f.config)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("config.toml mode after rewrites: %v %v", st.Mode(), err)
	}
}

// TestSettingsConcurrentCAS races writers on one settings key, round after
// round: exactly one compare-and-set wins each round, and a watcher sees
// every winner once, in order, with consecutive sequences.
func TestSettingsConcurrentCAS(t *testing.T) {
	f := newSettingsFixture(t, func(o *statestore.Options) { o.Limits.MaxUnackedUpdates = 1 << 10 })
	ss, sink := f.session(admin)
	f.watch(ss, "w", setNS, "lease")
	const writers, rounds = 6, 30
	var rev uint64
	var winners []uint64
	for r := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make(chan statestore.Entry, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				e, err := f.put(admin, setNS, "lease", docN(r*100+w), statestore.IfRevision(rev))
				switch {
				case err == nil:
					results <- e
				case statestore.CodeOf(err) != statestore.Conflict:
					t.Errorf("round %d: %v", r, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		var won []statestore.Entry
		for e := range results {
			won = append(won, e)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d winners", r, len(won))
		}
		rev = won[0].Revision
		winners = append(winners, rev)
	}
	for i, want := range winners {
		u := sink.nextUpdate(t)
		if u.Sequence != uint64(i+1) || u.Revision != want || u.Kind != watch.Put {
			t.Fatalf("update %d: %+v, want revision %d", i, u, want)
		}
	}
	sink.empty(t)
}

// TestSettingsQuotaCountsBothKinds: the store-wide bounds count journal
// and settings entries together, whichever kind the write goes to.
func TestSettingsQuotaCountsBothKinds(t *testing.T) {
	doc := docN(1)
	f := newSettingsFixture(t, func(o *statestore.Options) {
		o.Limits.MaxTotalBytes = int64(3 * len(doc))
		o.Limits.MaxNamespaces = 3
	})
	f.mustPut(admin, "group/journal", "a", doc)
	f.mustPut(admin, setNS, "a", doc)
	f.mustPut(admin, setNS, "b", doc)
	_, err := f.put(admin, "group/journal", "b", doc, statestore.Expect{})
	wantCode(t, err, statestore.QuotaExceeded, quota.BoundTotalBytes)
	_, err = f.put(admin, setUser, "c", doc, statestore.Expect{})
	wantCode(t, err, statestore.QuotaExceeded, quota.BoundTotalBytes)
	if n, b, nss := f.s.Usage(); n != 3 || b != int64(3*len(doc)) || nss != 2 {
		t.Fatalf("usage %d entries %d bytes %d namespaces", n, b, nss)
	}
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "b"}); err != nil {
		t.Fatal(err)
	}
	f.mustPut(admin, "group/journal2", "a", doc) // the third namespace
	_, err = f.put(admin, setUser, "c", []byte(`{"role":"subscribe","desired":true,"source_id":"c","media_kind":"audio"}`), statestore.Expect{})
	wantCode(t, err, statestore.QuotaExceeded, quota.BoundNamespaces)
}

// TestSettingsBackupExcludesSettings: a runtime backup carries no settings
// namespace; restoring one leaves the settings entries as they are; a
// backup that holds a now settings-backed namespace is refused.
func TestSettingsBackupExcludesSettings(t *testing.T) {
	f := newSettingsFixture(t)
	f.mustPut(admin, setNS, "s", docN(1))
	f.mustPut(admin, "group/runtime", "r", docN(2))
	var buf bytes.Buffer
	if err := f.s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	f.mustPut(admin, setNS, "s", docN(3))
	f.mustPut(admin, "group/runtime", "r", docN(4))
	if err := f.s.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if e, _ := f.s.Get(ctx, admin, "group/runtime", "r"); e.Revision != 1 {
		t.Fatalf("runtime entry not restored: %+v", e)
	}
	if e, _ := f.s.Get(ctx, admin, setNS, "s"); e.Revision != 2 || !bytes.Equal(e.Document, docN(3)) {
		t.Fatalf("settings entry changed by a runtime restore: %+v", e)
	}
	dir := t.TempDir()
	if err := statestore.RestoreDir(dir, bytes.NewReader(buf.Bytes()), quota.Limits{}); err != nil {
		t.Fatal(err)
	}
	plain, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if n := plain.Namespace(setNS); n.Revision != 0 {
		t.Fatalf("the backup carried settings namespace %s: %+v", setNS, n)
	}
	// A backup from a store where the namespace was journal-backed.
	var foreign bytes.Buffer
	if _, err := plain.Put(ctx, admin, statestore.PutRequest{Namespace: setNS, Key: "j", Schema: schema.MediaIntentV1, Document: docN(5)}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Backup(&foreign); err != nil {
		t.Fatal(err)
	}
	err = f.s.Restore(&foreign)
	if se := wantCode(t, err, statestore.InvalidArgument, "backup"); !strings.Contains(se.Message, setNS) {
		t.Fatalf("refusal does not name the namespace: %v", err)
	}
}
