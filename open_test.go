package statestore_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/smalldisk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

func putRec(ns, key string, rev uint64) *journal.Record {
	return &journal.Record{Kind: journal.KindPut, Namespace: ns, Key: key, Revision: rev, TimeMs: 1,
		Schema: schema.MediaIntentV1, Owner: "alice", CreatedMs: 1, UpdatedMs: 1, Document: docN(int(rev))}
}

// TestReplayRejects writes journals by hand that no admitted write could
// have produced: Open must refuse each, naming the journal index and why.
func TestReplayRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		recs   []*journal.Record
		limits quota.Limits
		index  uint64
		reason string
	}{
		{"revision skips", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/alice", "b", 3)}, quota.Limits{}, 2, "not the namespace revision 1 plus one"},
		{"revision repeats", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/alice", "a", 1)}, quota.Limits{}, 2, "not the namespace revision 1 plus one"},
		{"delete of missing key", []*journal.Record{putRec("user/alice", "a", 1), {Kind: journal.KindDelete, Namespace: "user/alice", Key: "b", Revision: 2}}, quota.Limits{}, 2, "DELETE of a missing key"},
		{"expire of unleased key", []*journal.Record{putRec("user/alice", "a", 1), {Kind: journal.KindExpire, Namespace: "user/alice", Key: "a", Revision: 2}}, quota.Limits{}, 2, "without a lease"},
		{"invalid namespace", []*journal.Record{putRec("tenant/x", "a", 1)}, quota.Limits{}, 1, "namespace"},
		{"invalid key", []*journal.Record{putRec("user/alice", "../a", 1)}, quota.Limits{}, 1, "key"},
		{"unregistered schema", []*journal.Record{func() *journal.Record { r := putRec("user/alice", "a", 1); r.Schema = "keeppeek.gone.v9"; return r }()}, quota.Limits{}, 1, "not a registered schema"},
		{"missing owner", []*journal.Record{func() *journal.Record { r := putRec("user/alice", "a", 1); r.Owner = ""; return r }()}, quota.Limits{}, 1, "owner"},
		{"entries over bound", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/alice", "b", 2)}, quota.Limits{MaxEntriesPerNamespace: 1}, 2, "entries per namespace limit 1"},
		{"namespaces over bound", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/bob", "b", 1)}, quota.Limits{MaxNamespaces: 1}, 2, "namespaces limit 1"},
		{"bytes over bound", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/alice", "b", 2)}, quota.Limits{MaxTotalBytes: 150}, 2, "total value bytes limit 150"},
		// Documents pass the rules admission applied, after every metadata
		// check and bound, and the first record to fail is the refusal.
		{"document not JSON", []*journal.Record{putRec("user/alice", "a", 1), withDoc(putRec("user/alice", "b", 2), "not json at all")}, quota.Limits{}, 2,
			"document of user/alice/b at journal index 2: schema keeppeek.media-intent.v1: $: invalid JSON"},
		{"document with a credential", []*journal.Record{withDoc(putRec("user/alice", "a", 1), `{"password":"hunter2"}`)}, quota.Limits{}, 1, "$.password"},
		{"document breaking its schema", []*journal.Record{withDoc(putRec("user/alice", "a", 1), `{"role":"publish","desired":true,"source_id":"cam","media_kind":"video"}`)},
			quota.Limits{}, 1, "$.recording_mode"},
		{"identifier before document", []*journal.Record{withDoc(putRec("user/alice", "../a", 1), "not json")}, quota.Limits{}, 1, `has an invalid segment ".."`},
		{"bound before document", []*journal.Record{putRec("user/alice", "a", 1), withDoc(putRec("user/alice", "b", 2), "not json")},
			quota.Limits{MaxEntriesPerNamespace: 1}, 2, "entries per namespace limit 1"},
		{"document before a later revision skip", []*journal.Record{putRec("user/alice", "a", 1), withDoc(putRec("user/alice", "b", 2), "not json"), putRec("user/alice", "c", 4)},
			quota.Limits{}, 2, "document of user/alice/b"},
		{"revision skip before a later document", []*journal.Record{putRec("user/alice", "a", 1), putRec("user/alice", "b", 3), withDoc(putRec("user/alice", "c", 4), "not json")},
			quota.Limits{}, 2, "not the namespace revision 1 plus one"},
		{"first of many documents", manyForbidden(3, 400), quota.Limits{}, 3, "document of user/alice/k0003"},
		// Live configuration refuses every TTL at admission (refuseLease), so
		// no write stored a lease there: replay refuses one, before the
		// document, and a lease elsewhere is no finding.
		{"lease in MQTT integration state", []*journal.Record{leased(putRec("user/alice", "a", 1)), leased(withDoc(putRec("service/mqtt-north", "bridge", 1), "not json"))}, quota.Limits{}, 2,
			`entry service/mqtt-north/bridge at journal index 2 carries a lease (expires_ms 60000), but namespace "service/mqtt-north" is MQTT integration state`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j, _, err := journal.Open(filepath.Join(dir, statestore.StoreDirName, "journal"), journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(tc.recs); err != nil {
				t.Fatal(err)
			}
			j.Close()
			_, err = statestore.Open(statestore.Options{Dir: dir, Limits: tc.limits})
			wantCode(t, err, statestore.Unavailable, "store")
			var ce *journal.CorruptError
			if !errors.As(err, &ce) || ce.Index != tc.index {
				t.Fatalf("want a corrupt error at index %d, got %v", tc.index, err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not say %q", err, tc.reason)
			}
			// The document rows' reasons name the document or its field.
			var de *statestore.DocumentError
			if isDoc := strings.HasPrefix(tc.reason, "document of") || strings.HasPrefix(tc.reason, "$"); errors.As(err, &de) != isDoc ||
				isDoc && (de.Index != tc.index || de.Namespace != "user/alice" || de.Key != tc.recs[tc.index-1].Key) {
				t.Fatalf("refusal %v: want a DocumentError at index %d: %v", err, tc.index, isDoc)
			}
			// The tools' loading is Open's: the same refusal.
			_, lerr := recovery.LoadState(dir, 0, recovery.LoadOptions{Limits: tc.limits})
			var lce *journal.CorruptError
			if !errors.As(lerr, &lce) || lce.Index != ce.Index || lce.Reason != ce.Reason {
				t.Fatalf("LoadState: %v; Open: %v", lerr, err)
			}
		})
	}
}

// leased is rec with a lease to 60,000 ms.
func leased(rec *journal.Record) *journal.Record {
	rec.ExpiresMs = 60000
	return rec
}

// withDoc is rec with document doc.
func withDoc(rec *journal.Record, doc string) *journal.Record {
	rec.Document = []byte(doc)
	return rec
}

// manyForbidden is n PUTs in user/alice whose documents, from the record
// at index first on, are all forbidden: a replay that validates documents
// on several goroutines must still report the one at first.
func manyForbidden(first, n int) []*journal.Record {
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = putRec("user/alice", fmt.Sprintf("k%04d", i+1), uint64(i+1))
		if i+1 >= first {
			withDoc(recs[i], fmt.Sprintf(`{"token_%d":"x"}`, i))
		}
	}
	return recs
}

func TestOpenCutsTornTailAndRefusesCorruption(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := 0; i < 5; i++ {
		f.mustPut(alice, "user/alice", "k", docN(i))
	}
	f.s.Close()
	f.s = nil
	segs, _ := journal.ListSegments(filepath.Join(f.dir, statestore.StoreDirName, "journal"))
	tail := segs[len(segs)-1]
	jdir := filepath.Dir(tail.Path)
	data, _ := os.ReadFile(tail.Path)

	// The final record loses its last 3 bytes after a clean close: it was
	// acknowledged (the ACKNOWLEDGED marker says so), so this is damage,
	// not a torn write, and nothing is cut.
	os.WriteFile(tail.Path, data[:len(data)-3], 0o644)
	_, err := statestore.Open(f.opts)
	var ce *journal.CorruptError
	if !errors.As(err, &ce) || ce.Index != 5 || !strings.Contains(err.Error(), "records up to index 5 were acknowledged") {
		t.Fatalf("want corruption at index 5 naming the acknowledged floor, got %v", err)
	}
	if now, _ := os.ReadFile(tail.Path); len(now) != len(data)-3 {
		t.Fatalf("a refused open changed the segment: %d bytes, want %d", len(now), len(data)-3)
	}

	// The same bytes after a crash during the final record's append (the
	// floor below it): a torn write, cut.
	if err := journal.SetFloor(jdir, 4); err != nil {
		t.Fatal(err)
	}
	f.open()
	cut := f.s.OpenReport().TailCut
	if cut == nil || cut.Index != 5 {
		t.Fatalf("tail cut %+v, want index 5", cut)
	}
	if e, err := f.s.Get(ctx, alice, "user/alice", "k"); err != nil || e.Revision != 4 {
		t.Fatalf("after cut: %+v %v; want revision 4", e, err)
	}
	f.s.Close()
	f.s = nil

	// Corrupt: a byte of the first record flipped.
	data, _ = os.ReadFile(tail.Path)
	data[10] ^= 0xFF
	os.WriteFile(tail.Path, data, 0o644)
	_, err = statestore.Open(f.opts)
	if !errors.As(err, &ce) || ce.Index != 1 || ce.Offset != 0 {
		t.Fatalf("want corruption at index 1 offset 0, got %v", err)
	}
	wantCode(t, err, statestore.Unavailable, "store")
}

// alignJournalTail puts padding entries until the tail segment ends on a
// page boundary, so the next record needs a page of its own: on a full
// tmpfs it then fails with ENOSPC instead of landing in the last page's
// slack.
func alignJournalTail(t *testing.T, f *fixture) {
	t.Helper()
	const page = 4096
	dir := filepath.Join(f.dir, statestore.StoreDirName, "journal")
	tail := func() int64 {
		segs, err := journal.ListSegments(dir)
		if err != nil || len(segs) == 0 {
			t.Fatalf("segments: %v %v", segs, err)
		}
		return segs[len(segs)-1].Size
	}
	pad := func(n int) []byte {
		// JSON whitespace: any amount of it is a valid document.
		return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"pad","media_kind":"video"%s}`, strings.Repeat(" ", n))
	}
	const probe = 200
	size := tail()
	f.mustPut(admin, "group/pad", "pad", pad(probe))
	overhead := tail() - size - probe // the frame and length prefix around the padding
	for range 4 {
		size = tail()
		rem := (page - size%page) % page
		if rem == 0 {
			return
		}
		if rem < overhead+1 {
			rem += page
		}
		f.mustPut(admin, "group/pad", "pad", pad(int(rem-overhead)))
	}
	t.Fatalf("could not align the journal tail (size %d)", tail())
}

// TestOpenOnFullDiskSpendsReserveForPurge: a store closed with its reserve
// whole, reopened on a disk filled meanwhile with a lease overdue, opens:
// the purge's EXPIRE fails for want of space, the journal gives the
// reserve up, and the EXPIRE is committed into it. The store then serves
// on its reserve.
func TestOpenOnFullDiskSpendsReserveForPurge(t *testing.T) {
	t.Parallel()
	f, mnt := newFullDiskFixture(t)
	const ns = "service/leases"
	if _, err := f.lease(admin, ns, "holder", statestore.CreateOnly, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	kept := f.mustPut(admin, ns, "kept", docN(3))
	alignJournalTail(t, f)
	f.s.Close()
	f.s = nil
	requireReserve(t, mnt, true)
	smalldisk.Fill(t, mnt, "filler")

	f.clock.Advance(10 * time.Second)
	f.open()
	if got := f.s.OpenReport().Expired; got != 1 {
		t.Fatalf("restart purge expired %d leases, want 1", got)
	}
	if st := f.s.Stats().JournalReserve; !st.Spent || st.Releases != 1 {
		t.Fatalf("the purge should have spent the reserve: %+v", st)
	}
	requireReserve(t, mnt, false)
	if e, err := f.s.Get(ctx, admin, ns, "kept"); err != nil || e.Revision != kept.Revision {
		t.Fatalf("kept entry: %+v %v", e, err)
	}
	_, err := f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	f.reopen()
	if _, err := f.s.Get(ctx, admin, ns, "holder"); statestore.CodeOf(err) != statestore.NotFound || f.s.OpenReport().Expired != 0 {
		t.Fatalf("the purge's EXPIRE did not survive a reopen: %v, expired again %d", err, f.s.OpenReport().Expired)
	}
}

// updateFixtures rewrites testdata/forbidden from writeForbiddenFixtures:
//
//	go test -run TestForbiddenFixturesAreReproducible -update-fixtures .
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/forbidden from its generator")

// The forbidden-document fixtures are what issue 29 found served: a backup
// holding {"password":"hunter2"}, and a journal whose second record's
// document is "not json at all". Everything else about them is valid, so
// only the document rules refuse them.
const (
	forbiddenDir     = "testdata/forbidden"
	forbiddenJournal = forbiddenDir + "/not-json"       // a stopped store's Dir
	forbiddenBackup  = forbiddenDir + "/password.kpbak" // a backup (checkpoint image) at index 2
	fixtureTimeMs    = 1_780_000_000_000
)

// fixtureRec is the PUT of doc at user/alice/key with namespace revision
// rev, as alice's admitted write would have journaled it.
func fixtureRec(key string, rev uint64, doc string) *journal.Record {
	return &journal.Record{Kind: journal.KindPut, Namespace: "user/alice", Key: key, Revision: rev, TimeMs: fixtureTimeMs,
		Schema: schema.MediaIntentV1, Owner: "alice", CreatedMs: fixtureTimeMs, UpdatedMs: fixtureTimeMs, Document: []byte(doc)}
}

const fixtureGoodDoc = `{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video"}`

// writeStoppedStore writes the files of a stopped store in dir whose
// journal holds recs from index 1: its LOCK (a store that ever ran has
// one, and a refused Open must not even add it) and one segment of the
// records framed as the journal frames them (a length, then the record).
func writeStoppedStore(dir string, recs ...*journal.Record) error {
	root := filepath.Join(dir, statestore.StoreDirName)
	if err := os.MkdirAll(filepath.Join(root, "journal"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "LOCK"), nil, 0o644); err != nil {
		return err
	}
	var seg []byte
	for _, rec := range recs {
		frame, err := rec.Encode()
		if err != nil {
			return err
		}
		seg = append(binary.AppendUvarint(seg, uint64(len(frame))), frame...)
	}
	return os.WriteFile(filepath.Join(root, "journal", "00000000000000000001"), seg, 0o644)
}

// writeForbiddenFixtures is the generator of testdata/forbidden: it writes
// the journal store and the backup into dir.
func writeForbiddenFixtures(dir string) error {
	if err := writeStoppedStore(filepath.Join(dir, "not-json"),
		fixtureRec("intents/front-door", 1, fixtureGoodDoc), fixtureRec("intents/broken", 2, "not json at all")); err != nil {
		return err
	}
	v := materialize.New()
	for _, rec := range []*journal.Record{fixtureRec("intents/front-door", 1, fixtureGoodDoc), fixtureRec("intents/secret", 2, `{"password":"hunter2"}`)} {
		if _, err := v.Apply(rec); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if _, err := checkpoint.Encode(&b, v, 2, fixtureTimeMs); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "password.kpbak"), b.Bytes(), 0o644)
}

// TestForbiddenFixturesAreReproducible rebuilds testdata/forbidden and
// holds it byte for byte to what is checked in, so the fixtures are what
// their generator says they are.
func TestForbiddenFixturesAreReproducible(t *testing.T) {
	// Not parallel with -update-fixtures: the other tests read the files it rewrites.
	if !*updateFixtures {
		t.Parallel()
	}
	gen := t.TempDir()
	if err := writeForbiddenFixtures(gen); err != nil {
		t.Fatal(err)
	}
	if *updateFixtures {
		copyTree(t, gen, forbiddenDir)
	}
	want, err := filetree.Hashes(gen)
	if err != nil {
		t.Fatal(err)
	}
	got, err := filetree.Hashes(forbiddenDir)
	if err != nil {
		t.Fatal(err)
	}
	delete(got, "README.md")
	if diff := filetree.Diff(want, got); len(diff) > 0 {
		t.Fatalf("testdata/forbidden is not what its generator writes (%s); rerun it with -update-fixtures", strings.Join(diff, ", "))
	}
}

// storeFromBackup makes dir a stopped store holding the backup at path as
// its checkpoint image, with an empty journal after it: what RestoreDir
// makes of a backup it accepts. It returns the image's path.
func storeFromBackup(t *testing.T, dir, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := checkpoint.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, statestore.StoreDirName)
	img := filepath.Join(root, checkpoint.Name(hdr.Index))
	if err := journal.CreateEmpty(filepath.Join(root, "journal"), hdr.Index+1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestOpenRefusesForbiddenDocuments opens the stores issue 29 found
// served: a journal record whose document is not JSON, and a checkpoint
// image holding a credential (with an older image that loads beside it,
// which Open must not fall back to). Open refuses with UNAVAILABLE wrapping
// a *DocumentError that names the entry, the journal index or image, and
// the rule's field, says how to migrate, and changes no file; the tools'
// LoadState refuses alike.
func TestOpenRefusesForbiddenDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) (image string)
		key   string
		index uint64
		path  string // the schema error's field
	}{
		{"journal record not JSON", func(t *testing.T, dir string) string {
			copyTree(t, forbiddenJournal, dir)
			return ""
		}, "intents/broken", 2, "$"},
		{"checkpoint image with a credential", func(t *testing.T, dir string) string {
			img := storeFromBackup(t, dir, forbiddenBackup)
			// An older image that loads: damage would fall back to it.
			older := materialize.New()
			if _, err := older.Apply(fixtureRec("intents/front-door", 1, fixtureGoodDoc)); err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.WriteFile(filepath.Join(filepath.Dir(img), checkpoint.Name(1)), older, 1, fixtureTimeMs); err != nil {
				t.Fatal(err)
			}
			return img
		}, "intents/secret", 0, "$.password"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			image := tc.setup(t, dir)
			before := dirHashes(t, dir)
			s, err := statestore.Open(statestore.Options{Dir: dir})
			if err == nil {
				s.Close()
				t.Fatal("Open served a store holding a forbidden document")
			}
			wantCode(t, err, statestore.Unavailable, "store")
			var de *statestore.DocumentError
			if !errors.As(err, &de) || de.Namespace != "user/alice" || de.Key != tc.key || de.Index != tc.index || de.Image != image {
				t.Fatalf("refusal %v: want a DocumentError for user/alice/%s at index %d in %q", err, tc.key, tc.index, image)
			}
			var se *schema.Error
			if !errors.As(err, &se) || se.Path != tc.path || se.Schema != schema.MediaIntentV1 {
				t.Fatalf("refusal %v: want the rule at %s of %s", err, tc.path, schema.MediaIntentV1)
			}
			var ce *journal.CorruptError
			if (tc.index != 0) != errors.As(err, &ce) || tc.index != 0 && (ce.Index != tc.index || ce.Segment == "" || ce.Offset <= 0) {
				t.Fatalf("refusal %v: a journal record's refusal names its index, segment and offset", err)
			}
			if !strings.Contains(err.Error(), recovery.MigrationHint) {
				t.Fatalf("refusal %q does not say how to migrate", err)
			}
			sameFiles(t, "a refused Open", before, dirHashes(t, dir))
			_, lerr := recovery.LoadState(dir, 0, recovery.LoadOptions{})
			if !errors.As(lerr, &de) || de.Key != tc.key || de.Index != tc.index || !strings.Contains(err.Error(), lerr.Error()) {
				t.Fatalf("LoadState: %v; Open: %v", lerr, err)
			}
		})
	}
}

// noteSchema is keeppeek.camera-note.v1 as two builds define it: the
// older accepts any level, the newer (tightened) at most maxLevel.
type noteSchema struct{ maxLevel int64 }

func (n noteSchema) Validate(doc map[string]any) error {
	num, ok := doc["level"].(json.Number)
	if !ok {
		return &schema.Error{Path: "$.level", Reason: "required, a number"}
	}
	if lv, err := num.Int64(); err != nil || lv > n.maxLevel {
		return &schema.Error{Path: "$.level", Reason: fmt.Sprintf("%s is over the maximum %d", num, n.maxLevel)}
	}
	return nil
}

const noteSchemaName = "keeppeek.camera-note.v1"

// noteBuild is the registry of a build whose camera-note schema allows
// levels up to maxLevel.
func noteBuild(t *testing.T, maxLevel int64) *schema.Registry {
	t.Helper()
	reg := schema.NewRegistry()
	if err := reg.Register(noteSchemaName, noteSchema{maxLevel}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestTightenedSchemaRefusesOldEntriesUntilMigrated is the decision the
// package comment states ("Tightened rules"): a newer build whose schema
// old entries no longer meet refuses the store, naming the entry and the
// rule and changing nothing, rather than serving them; and the migration
// path the refusal gives works, step by step: rewriting under the previous
// build is not enough while an image or replayed record still holds an old
// document, and after a checkpoint the newer build opens.
func TestTightenedSchemaRefusesOldEntriesUntilMigrated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	open := func(maxLevel int64) (*statestore.Store, error) {
		return statestore.Open(statestore.Options{Dir: dir, Clock: clk, Schemas: noteBuild(t, maxLevel), CheckpointBytes: -1})
	}
	note := func(level int) []byte { return fmt.Appendf(nil, `{"level":%d}`, level) }
	put := func(s *statestore.Store, key string, level int, x statestore.Expect) statestore.Entry {
		t.Helper()
		e, err := s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: key, Schema: noteSchemaName, Document: note(level), Expect: x})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	refused := func(key, image string) {
		t.Helper()
		before := dirHashes(t, dir)
		s, err := open(3)
		if err == nil {
			s.Close()
			t.Fatalf("the tightened build served entries its schema refuses")
		}
		var de *statestore.DocumentError
		var se *schema.Error
		if !errors.As(err, &de) || de.Key != key || !strings.HasPrefix(filepath.Base(de.Image), image) || !errors.As(err, &se) || se.Path != "$.level" ||
			!strings.Contains(err.Error(), recovery.MigrationHint) {
			t.Fatalf("refusal %v: want user/alice/%s in %q at $.level, with the migration path", err, key, image)
		}
		sameFiles(t, "the tightened build's refused Open", before, dirHashes(t, dir))
	}

	// The older build stores levels 5 (in a checkpoint image), 7 and 1
	// (in the journal after it).
	s, err := open(10)
	if err != nil {
		t.Fatal(err)
	}
	a := put(s, "notes/a", 5, statestore.CreateOnly)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	b := put(s, "notes/b", 7, statestore.CreateOnly)
	put(s, "notes/c", 1, statestore.CreateOnly)
	s.Close()
	refused("notes/a", "checkpoint-")

	// Migration, step one under the older build: rewrite and delete what
	// the newer one refuses. The image still holds the old document.
	if s, err = open(10); err != nil {
		t.Fatal(err)
	}
	put(s, "notes/a", 2, statestore.IfRevision(a.Revision))
	if _, err := s.Delete(ctx, alice, statestore.DeleteRequest{Namespace: "user/alice", Key: "notes/b", Expect: statestore.IfRevision(b.Revision)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	refused("notes/a", "checkpoint-")

	// Step two: a checkpoint, so that replay starts after the old records.
	if s, err = open(10); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = open(3); err != nil {
		t.Fatalf("the tightened build after the migration: %v", err)
	}
	defer s.Close()
	if e, err := s.Get(ctx, alice, "user/alice", "notes/a"); err != nil || string(e.Document) != string(note(2)) {
		t.Fatalf("notes/a after the migration: %+v %v", e, err)
	}
	if _, err := s.Get(ctx, alice, "user/alice", "notes/b"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("notes/b after the migration: %v", err)
	}
	if _, err := s.Get(ctx, alice, "user/alice", "notes/c"); err != nil {
		t.Fatalf("notes/c, valid under both builds: %v", err)
	}
}
