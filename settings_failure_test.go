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
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/config/configzip"
	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

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
