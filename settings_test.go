package statestore_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/config/configzip"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// envSettingsCrashWriter makes the test binary run settingsCrashWriter on
// the directory it names (see TestMain).
const envSettingsCrashWriter = "KP_TEST_SETTINGS_CRASH_WRITER"

func settingsCrashOptions(dir string) statestore.Options {
	return statestore.Options{Dir: filepath.Join(dir, "store"), Settings: filepath.Join(dir, "config.toml")}
}

// settingsCrashWriter mutates one settings key with compare-and-set puts
// and deletes, one at a time, forever, printing "P rev" or "D rev" only
// after the store acknowledged the mutation. The parent SIGKILLs it.
func settingsCrashWriter(dir string) {
	s, err := statestore.Open(settingsCrashOptions(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	for i := 0; ; i++ {
		cur, err := s.Get(ctx, admin, setNS, "layout")
		x := statestore.CreateOnly
		if err == nil {
			x = statestore.IfRevision(cur.Revision)
		}
		if err == nil && i%4 == 3 {
			rev, err := s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "layout", Expect: x})
			if err != nil {
				fmt.Fprintln(os.Stderr, "delete:", err)
				os.Exit(4)
			}
			fmt.Printf("D %d\n", rev)
			continue
		}
		e, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: setNS, Key: "layout", Schema: schema.MediaIntentV1, Document: docN(i), Expect: x})
		if err != nil {
			fmt.Fprintln(os.Stderr, "put:", err)
			os.Exit(4)
		}
		fmt.Printf("P %d\n", e.Revision)
	}
}

// TestSettingsCrashDuringRewrite SIGKILLs a process that rewrites
// config.toml in a loop, many times. After each kill the file parses, is
// the last acknowledged state or the one after it (never a mix), keeps
// every byte outside [state_store], and the reopened store serves every
// acknowledged mutation; no temporary file is left behind.
func TestSettingsCrashDuringRewrite(t *testing.T) {
	// Serial: it forks child processes, and from fork to exec a child
	// holds this process's flocks (the stores' LOCK files), which a
	// parallel test's Open would find taken.
	iterations := 25
	if testing.Short() {
		iterations = 5
	}
	dir := t.TempDir()
	orig, err := os.ReadFile("testdata/settings-config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	// Before any acknowledged mutation the key does not exist: a kill
	// before the first answer (want 0) leaves the file with no entry.
	last := struct {
		del bool
		rev uint64
	}{del: true}
	for it := range iterations {
		got := killWriter(t, it, envSettingsCrashWriter, dir, rng.IntN(40))
		for _, l := range got {
			f := strings.Fields(l)
			if len(f) != 2 {
				continue // cut by the kill: never a complete acknowledgement
			}
			rev, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				continue
			}
			if rev <= last.rev {
				t.Fatalf("iteration %d: revision %d acknowledged after %d", it, rev, last.rev)
			}
			last.del, last.rev = f[0] == "D", rev
		}
		// The file on its own, before any store touches it.
		raw, err := os.ReadFile(filepath.Join(dir, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		sec := checkRestIntact(t, orig, raw)
		fileRev := sec.Revisions[setNS]
		if fileRev != last.rev && fileRev != last.rev+1 {
			t.Fatalf("iteration %d: file at revision %d, last acknowledged %d", it, fileRev, last.rev)
		}
		if fileRev == last.rev && (len(sec.Entries) == 0) != last.del {
			t.Fatalf("iteration %d: file at acknowledged revision %d disagrees with the acknowledged mutation (deleted=%v): %+v", it, fileRev, last.del, sec.Entries)
		}
		s, err := statestore.Open(settingsCrashOptions(dir))
		if err != nil {
			t.Fatalf("iteration %d: reopen: %v", it, err)
		}
		e, gerr := s.Get(ctx, admin, setNS, "layout")
		nsRev := s.Namespace(setNS).Revision
		s.Close()
		switch {
		case nsRev != fileRev:
			t.Fatalf("iteration %d: store serves revision %d, file holds %d", it, nsRev, fileRev)
		case gerr == nil && len(sec.Entries) == 1 && e.Revision != sec.Entries[0].Revision:
			t.Fatalf("iteration %d: entry revision %d, file %d", it, e.Revision, sec.Entries[0].Revision)
		case gerr != nil && len(sec.Entries) != 0:
			t.Fatalf("iteration %d: get: %v", it, gerr)
		}
		last.rev, last.del = fileRev, len(sec.Entries) == 0
		temps, _ := filepath.Glob(filepath.Join(dir, ".config.toml.tmp-*"))
		if len(temps) != 0 {
			t.Fatalf("iteration %d: temporary files left after reopen: %v", it, temps)
		}
	}
	if last.rev == 0 {
		t.Fatal("no write was ever acknowledged")
	}
}

// TestSettingsFailedWrite: when config.toml cannot be rewritten the write
// answers STORAGE, config.toml keeps its bytes, memory keeps the old entry,
// and watchers hear nothing. Without root a read-only directory refuses
// the temporary file; as root (CI) a full tmpfs refuses the bytes.
func TestSettingsFailedWrite(t *testing.T) {
	// Serial: it forks child processes, and from fork to exec a child
	// holds this process's flocks (the stores' LOCK files), which a
	// parallel test's Open would find taken.
	t.Run("read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores directory permissions; the full-tmpfs case covers root")
		}
		f := newSettingsFixture(t)
		f.mustPut(admin, setNS, "k", docN(1))
		dir := filepath.Dir(f.config)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		checkFailedWrite(t, f, func() { os.Chmod(dir, 0o755) })
	})
	t.Run("full tmpfs", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting a tmpfs needs root; the read-only-directory case covers this user")
		}
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		orig, err := os.ReadFile("testdata/settings-config.toml")
		if err != nil {
			t.Fatal(err)
		}
		config := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(config, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		f := &settingsFixture{fixture: newFixture(t, func(o *statestore.Options) { o.Settings = config }), config: config, orig: orig}
		f.mustPut(admin, setNS, "k", docN(1))
		filler := filepath.Join(dir, "filler")
		fill(t, filler)
		checkFailedWrite(t, f, func() { os.Remove(filler) })
	})
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := w.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space") {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			return
		}
	}
}

// checkFailedWrite expects writes to the store's config.toml to fail, then
// heal calls to succeed again.
func checkFailedWrite(t *testing.T, f *settingsFixture, heal func()) {
	t.Helper()
	before := f.read()
	ss, sink := f.session(admin)
	f.watch(ss, "w", setNS, "")
	_, err := f.put(admin, setNS, "k", docN(2), statestore.IfRevision(1))
	wantCode(t, err, statestore.Storage, "config.toml")
	_, err = f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "k"})
	wantCode(t, err, statestore.Storage, "config.toml")
	if !bytes.Equal(f.read(), before) {
		t.Fatal("config.toml changed by a failed write")
	}
	if e, err := f.s.Get(ctx, admin, setNS, "k"); err != nil || e.Revision != 1 || !bytes.Equal(e.Document, docN(1)) {
		t.Fatalf("memory changed by a failed write: %+v %v", e, err)
	}
	if n := f.s.Namespace(setNS); n.Revision != 1 {
		t.Fatalf("namespace revision moved to %d", n.Revision)
	}
	sink.empty(t)
	// Journal namespaces are unaffected meanwhile.
	f.mustPut(admin, "group/runtime", "k", docN(3))
	heal()
	e, err := f.put(admin, setNS, "k", docN(2), statestore.IfRevision(1))
	if err != nil || e.Revision != 2 {
		t.Fatalf("write after the disk healed: %+v %v", e, err)
	}
	if u := sink.nextUpdate(t); u.Sequence != 1 || u.Revision != 2 {
		t.Fatalf("first update after healing %+v", u)
	}
}

// TestSettingsConfigZipRoundTrip: a format-3 configuration ZIP of a live
// store's config.toml and secrets.toml, installed on a fresh machine,
// brings the settings entries back with their revisions, and none of the
// runtime entries.
func TestSettingsConfigZipRoundTrip(t *testing.T) {
	t.Parallel()
	f := newSettingsFixture(t)
	f.mustPut(admin, setNS, "layout", docN(1))
	f.mustPut(admin, setNS, "layout", docN(2))
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: setNS, Key: "layout"}); err != nil {
		t.Fatal(err)
	}
	kept := f.mustPut(admin, setNS, "audio", docN(3))
	mine, err := f.put(alice, setUser, "prefs", docN(4), statestore.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	f.mustPut(admin, "group/runtime", "intent", docN(5))
	secrets := []byte("[turn]\npassword = \"hunter2\"\n")
	var zbuf bytes.Buffer
	if err := configzip.Write(&zbuf, configzip.Files{Config: f.read(), Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
	// The archive holds exactly the two files and its manifest.
	zr, err := zip.NewReader(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 || zr.File[0].Name != "config.toml" || zr.File[1].Name != "secrets.toml" || !strings.Contains(zr.Comment, `"format":3`) {
		t.Fatalf("archive %v comment %q", zr.File, zr.Comment)
	}

	fresh := t.TempDir()
	files, m, err := configzip.Read(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != 3 || !bytes.Equal(files.Secrets, secrets) {
		t.Fatalf("manifest %+v secrets %q", m, files.Secrets)
	}
	if err := configzip.Install(files, filepath.Join(fresh, "config.toml"), filepath.Join(fresh, "secrets.toml")); err != nil {
		t.Fatal(err)
	}
	s, err := statestore.Open(statestore.Options{Dir: filepath.Join(fresh, "data"), Settings: filepath.Join(fresh, "config.toml")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.Namespace(setNS); n.Revision != 4 || n.Entries != 1 {
		t.Fatalf("restored namespace counters %+v", n)
	}
	for _, want := range []statestore.Entry{kept, mine} {
		got, err := s.Get(ctx, admin, want.Namespace, want.Key)
		if err != nil || got.Revision != want.Revision || got.Owner != want.Owner || got.CreatedMs != want.CreatedMs || !bytes.Equal(got.Document, want.Document) {
			t.Fatalf("restored %s/%s: %+v %v, want %+v", want.Namespace, want.Key, got, err, want)
		}
	}
	_, err = s.Get(ctx, admin, "group/runtime", "intent")
	wantCode(t, err, statestore.NotFound, "key")
	if e, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: setNS, Key: "layout", Schema: schema.MediaIntentV1, Document: docN(6), Expect: statestore.CreateOnly}); err != nil || e.Revision != 5 {
		t.Fatalf("write after restore continues the revision: %+v %v", e, err)
	}
}

// TestSettingsOpenRejectsBadFile: a hand-edited [state_store] section that
// no admitted write could have produced keeps the store closed
// (UNAVAILABLE), naming the entry at fault.
func TestSettingsOpenRejectsBadFile(t *testing.T) {
	t.Parallel()
	entry := func(fields string) string {
		return "\n[[state_store.entries]]\n" + fields + "\n"
	}
	const good = "namespace = 'group/living-room'\nkey = 'k'\nschema = 'keeppeek.media-intent.v1'\nowner = 'ops'\nrevision = 1\ncreated_at_ms = 5\nupdated_at_ms = 5\ndocument = '{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"c\",\"media_kind\":\"video\"}'"
	revs := "\n[state_store.revisions]\n'group/living-room' = 1\n"
	cases := []struct {
		name, section, want string
	}{
		{"undeclared namespace", entry(strings.Replace(good, "group/living-room", "group/kitchen", 1)) + revs, "entries[0]"},
		{"bad key", entry(strings.Replace(good, "'k'", "'../k'", 1)) + revs, "entries[0]"},
		{"unregistered schema", entry(strings.Replace(good, "media-intent.v1", "nope.v9", 1)) + revs, "entries[0]"},
		{"invalid document", entry(strings.Replace(good, `"desired":true,`, "", 1)) + revs, "entries[0]"},
		{"revision above counter", entry(strings.Replace(good, "revision = 1", "revision = 2", 1)) + revs, "entries[0]"},
		{"missing owner", entry(strings.Replace(good, "owner = 'ops'\n", "", 1)) + revs, "entries[0]"},
		{"unknown field", entry(good+"\nexpires_at_ms = 9") + revs, "expires_at_ms"},
		{"duplicate key", entry(good) + entry(strings.Replace(good, "revision = 1", "revision = 2", 1)) + "\n[state_store.revisions]\n'group/living-room' = 2\n", "entries[1]"},
		{"too many entries", entry(good) + entry(strings.Replace(strings.Replace(good, "'k'", "'k2'", 1), "revision = 1", "revision = 2", 1)) + "\n[state_store.revisions]\n'group/living-room' = 2\n", "entries per namespace"},
		{"counter for an undeclared namespace", "\n[state_store.revisions]\n'group/kitchen' = 1\n", "group/kitchen"},
	}
	orig, err := os.ReadFile("testdata/settings-config.toml")
	if err != nil {
		t.Fatal(err)
	}
	before, after := outsideSection(t, orig)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			config := filepath.Join(dir, "config.toml")
			text := string(before) + "[state_store]\nnamespaces = ['group/living-room']\n" + c.section + string(after)
			if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := statestore.Open(statestore.Options{Dir: filepath.Join(dir, "data"), Settings: config,
				Limits: quotaWithEntries(1)})
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			se := wantCode(t, err, statestore.Unavailable, "")
			if !strings.Contains(se.Error(), c.want) {
				t.Fatalf("error does not name %q: %v", c.want, err)
			}
			if got, _ := os.ReadFile(config); string(got) != text {
				t.Fatal("a refused file was rewritten")
			}
		})
	}
}

func quotaWithEntries(n int) (l quota.Limits) {
	l.MaxEntriesPerNamespace = n
	return l
}

// TestSettingsNamespaceInJournalRefused: a namespace cannot be both
// journal-backed and settings-backed: declaring one the journal already
// holds makes Open fail.
func TestSettingsNamespaceInJournalRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: setNS, Key: "k", Schema: schema.MediaIntentV1, Document: docN(1)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	orig, _ := os.ReadFile("testdata/settings-config.toml")
	config := filepath.Join(dir, "config.toml")
	os.WriteFile(config, orig, 0o644)
	_, err = statestore.Open(statestore.Options{Dir: dir, Settings: config})
	if se := wantCode(t, err, statestore.Unavailable, ""); !strings.Contains(se.Error(), setNS) {
		t.Fatalf("error does not name the namespace: %v", err)
	}
	if _, err := settings.Parse(orig); err != nil {
		t.Fatal(err)
	}
}
