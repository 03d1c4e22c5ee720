package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/schema"
)

func TestVerifyCleanStore(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, func(o *statestore.Options) { o.SegmentSize = 4096 })
	ts.fill(60)
	ts.close()
	code, out, errs := kp(t, "verify", "--dir", ts.dir)
	if code != exitOK {
		t.Fatalf("verify exit %d\n%s%s", code, out, errs)
	}
	wantContains(t, "verify output", out, "OK: no problems found", fmt.Sprintf("indexes 1..%d", ts.records))
	wantContains(t, "verify stderr", errs, "records/s", "MB/s")

	code, rep := verifyChecked(t, ts.dir)
	if code != exitOK || !rep.OK || len(rep.Problems) != 0 {
		t.Fatalf("verify --json: exit %d, report %+v", code, rep)
	}
	if rep.Journal.Records != int(ts.records) || rep.Replay.Records != int(ts.records) || rep.Journal.LastIndex != ts.records {
		t.Errorf("journal %+v, replay %+v; the store wrote %d records", rep.Journal, rep.Replay, ts.records)
	}
	if rep.Journal.Segments < 3 {
		t.Errorf("want several segments, got %d", rep.Journal.Segments)
	}
	if rep.Throughput.Records != int(ts.records) || rep.Throughput.Bytes == 0 || rep.Throughput.RecordsPerSecond <= 0 {
		t.Errorf("throughput %+v", rep.Throughput)
	}
	// The replayed totals are what the store serves.
	ts.open()
	entries, bytes, nss := ts.s.Usage()
	if rep.Replay.Entries != entries || rep.Replay.Bytes != bytes || rep.Replay.Namespaces != nss {
		t.Errorf("replay totals %+v, store usage %d entries %d bytes %d namespaces", rep.Replay, entries, bytes, nss)
	}
}

func TestVerifyListsOverdueLeasesAsNotes(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, func(o *statestore.Options) { o.Clock = clock.NewFake(time.Now().Add(-time.Hour)) })
	ts.put("service/transcoder-a", "leases/worker", 1, time.Minute)
	ts.put("service/transcoder-a", "intents/cam", 2, 0)
	ts.close()
	code, rep := verifyChecked(t, ts.dir)
	if code != exitOK || len(rep.Problems) != 0 {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
	if len(rep.Overdue) != 1 || rep.Overdue[0].Key != "leases/worker" {
		t.Fatalf("overdue leases %+v", rep.Overdue)
	}
	_, out, _ := kp(t, "verify", "--dir", ts.dir)
	wantContains(t, "verify output", out, "lease service/transcoder-a/leases/worker expired at", "OK: no problems found")
}

func TestVerifyTornTailThenRepair(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(20)
	ts.close()
	segs := ts.segments()
	last := segs[len(segs)-1]
	offs := entryOffsets(t, last.Path)
	finalOff := offs[len(offs)-1]
	ts.tearFinalRecord()

	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems || len(rep.Problems) != 1 {
		t.Fatalf("verify exit %d, problems %v", code, rep.Problems)
	}
	p := rep.Problems[0]
	if p.Severity != repairable || p.File != "journal/"+last.Name() || p.Offset != finalOff || p.Index != ts.records {
		t.Errorf("problem %+v, want REPAIRABLE in journal/%s at offset %d index %d", p, last.Name(), finalOff, ts.records)
	}
	_, out, _ := kp(t, "verify", "--dir", ts.dir)
	wantContains(t, "verify output", out, "REPAIRABLE", fmt.Sprint(finalOff), fmt.Sprint(ts.records), "kpjournal repair cuts it")

	// Without --yes and without a terminal, repair refuses and changes nothing.
	code, _, errs := kp(t, "repair", "--dir", ts.dir)
	if code != exitUsage || !strings.Contains(errs, "--yes") {
		t.Fatalf("repair without --yes: exit %d, stderr %s", code, errs)
	}
	code, out, errs = kp(t, "repair", "--dir", ts.dir, "--yes")
	if code != exitOK {
		t.Fatalf("repair exit %d\n%s%s", code, out, errs)
	}
	wantContains(t, "repair output", out, fmt.Sprintf("cut segment %s at offset %d", last.Name(), finalOff), fmt.Sprintf("index %d", ts.records), "quarantine")
	code, rep = verifyChecked(t, ts.dir)
	if code != exitOK || rep.Journal.LastIndex != ts.records-1 {
		t.Fatalf("verify after repair: exit %d, journal %+v, problems %v", code, rep.Journal, rep.Problems)
	}
	code, out, _ = kp(t, "repair", "--dir", ts.dir, "--yes")
	if code != exitOK || !strings.Contains(out, "nothing to repair") {
		t.Errorf("second repair: exit %d, %s", code, out)
	}
}

// smallSegments makes a store of several sealed segments.
func smallSegments(o *statestore.Options) { o.SegmentSize = 2048 }

func TestVerifyFlippedByteInSealedSegment(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(40)
	ts.close()
	segs := ts.segments()
	if len(segs) < 4 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	seg := segs[1]
	offs := entryOffsets(t, seg.Path)
	if len(offs) < 3 {
		t.Fatalf("segment %s holds %d entries", seg.Name(), len(offs))
	}
	flipByte(t, seg.Path, offs[2]+40) // inside the third record's frame
	wantIndex := seg.Start + 2

	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems || len(rep.Problems) != 1 {
		t.Fatalf("verify exit %d, problems %v", code, rep.Problems)
	}
	p := rep.Problems[0]
	if p.Severity != corruption || p.File != "journal/"+seg.Name() || p.Offset != offs[2] || p.Index != wantIndex || !strings.Contains(p.Reason, "crc") {
		t.Errorf("problem %+v, want CORRUPTION (crc) in journal/%s at offset %d index %d", p, seg.Name(), offs[2], wantIndex)
	}
	if rep.Replay.StoppedAt != some(wantIndex) {
		t.Errorf("semantic replay stopped at %v, want %d", rep.Replay.StoppedAt, wantIndex)
	}
	// Every other record was still read.
	if rep.Journal.Records != int(ts.records)-1 {
		t.Errorf("valid records %d, want %d", rep.Journal.Records, ts.records-1)
	}
	_, out, _ := kp(t, "verify", "--dir", ts.dir)
	wantContains(t, "verify output", out, "CORRUPTION", seg.Name(), fmt.Sprint(offs[2]), fmt.Sprint(wantIndex))

	// The store agrees: it refuses to open, naming the same place.
	_, err := statestore.Open(statestore.Options{Dir: ts.dir})
	wantContains(t, "open error", fmt.Sprint(err), fmt.Sprintf("index %d", wantIndex), seg.Name(), fmt.Sprintf("offset %d", offs[2]))
}

func TestVerifyReportsEachProblem(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(60)
	ts.close()
	segs := ts.segments()
	// A flipped payload byte in one sealed segment, a damaged length
	// prefix (the entries behind it misalign) in another.
	a, b := segs[1], segs[3]
	aOffs, bOffs := entryOffsets(t, a.Path), entryOffsets(t, b.Path)
	flipByte(t, a.Path, aOffs[1]+30)
	flipByte(t, b.Path, bOffs[2]) // the uvarint length prefix
	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems {
		t.Fatalf("exit %d", code)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, fmt.Sprintf("%s %s %d %d", p.Severity, p.File, p.Offset, p.Index))
	}
	want := []string{
		fmt.Sprintf("CORRUPTION journal/%s %d %d", a.Name(), aOffs[1], a.Start+1),
		fmt.Sprintf("CORRUPTION journal/%s %d %d", b.Name(), bOffs[2], b.Start+2),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s\n(%v)", strings.Join(got, "\n"), strings.Join(want, "\n"), rep.Problems)
	}
	wantContains(t, "resync reason", rep.Problems[1].Reason, fmt.Sprintf("next valid record at offset %d", bOffs[3]))
	if rep.Replay.StoppedAt != some(a.Start+1) {
		t.Errorf("replay stopped at %v, want %d", rep.Replay.StoppedAt, a.Start+1)
	}
}

func TestVerifyCorruptNewestCheckpoint(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(15)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.fill(10)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.fill(5)
	ts.close()
	ckpts, err := listCheckpoints(ts.root())
	if err != nil || len(ckpts) != 2 {
		t.Fatalf("checkpoints %v %v", ckpts, err)
	}
	older, newest := ckpts[0], ckpts[1]
	_, want, _ := kp(t, "replay", "--dir", ts.dir)
	flipByte(t, newest.Path, 80) // inside the compressed body

	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems || len(rep.Problems) != 1 {
		t.Fatalf("verify exit %d, problems %v", code, rep.Problems)
	}
	p := rep.Problems[0]
	// The store opens from the older image, so the damaged one is only
	// clutter for repair to move aside, not a refusal.
	if p.Severity != repairable || p.File != newest.Name() || p.Index != newest.Index || !strings.Contains(p.Reason, "opens from the older "+older.Name()) {
		t.Errorf("problem %+v, want REPAIRABLE naming %s and the older image", p, newest.Name())
	}
	if rep.Replay.FromIndex != older.Index+1 || rep.Replay.Records != int(ts.records-older.Index) {
		t.Errorf("replay %+v, want it from the older checkpoint at %d", rep.Replay, older.Index)
	}
	_, out, _ := kp(t, "verify", "--dir", ts.dir)
	wantContains(t, "verify output", out, newest.Name(), "DOES NOT LOAD")

	// replay falls back to the older image and rebuilds the same state.
	code, got, errs := kp(t, "replay", "--dir", ts.dir)
	if code != exitOK {
		t.Fatalf("replay exit %d: %s", code, errs)
	}
	wantContains(t, "replay stderr", errs, newest.Name(), "does not load")
	if stateTables(got) != stateTables(want) {
		t.Errorf("replay from the older checkpoint:\n%s\nwant:\n%s", got, want)
	}
}

// stateTables drops replay's first line, which names the checkpoint used.
func stateTables(s string) string {
	_, rest, _ := strings.Cut(s, "\n")
	return rest
}

func TestVerifyNamesTheBoundBroken(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	for i := 0; i < 5; i++ {
		ts.put("service/transcoder-a", fmt.Sprintf("intents/cam-%d", i), i, 0)
	}
	ts.put("service/transcoder-b", "intents/cam-0", 9, 0)
	ts.close()
	// Written under the defaults, verified against tighter bounds.
	code, rep := verifyChecked(t, ts.dir, "--max-entries-per-namespace", "3")
	if code != exitProblems || len(rep.Problems) != 2 {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
	for k, p := range rep.Problems {
		if p.Index != uint64(4+k) || !strings.Contains(p.Reason, "entries per namespace limit 3 exceeded") {
			t.Errorf("problem %+v, want index %d naming the entries per namespace bound", p, 4+k)
		}
	}
	code, rep = verifyChecked(t, ts.dir, "--max-namespaces", "1")
	if code != exitProblems || len(rep.Problems) != 1 || rep.Problems[0].Index != 6 || !strings.Contains(rep.Problems[0].Reason, "namespaces limit 1") {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
	code, rep = verifyChecked(t, ts.dir, "--max-total-bytes", "300")
	if code != exitProblems || len(rep.Problems) == 0 || rep.Problems[0].Index != 4 || !strings.Contains(rep.Problems[0].Reason, "total value bytes limit 300") {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
	code, rep = verifyChecked(t, ts.dir, "--max-document-bytes", "50")
	if code != exitProblems || len(rep.Problems) == 0 || !strings.Contains(rep.Problems[0].Reason, "document length") {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
}

// handJournal writes records straight into a store's journal, bypassing
// admission, as damage or a foreign writer could.
func handJournal(t *testing.T, recs ...*journal.Record) string {
	t.Helper()
	dir := t.TempDir()
	j, _, err := journal.Open(filepath.Join(dir, statestore.StoreDirName, "journal"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func putRec(ns, key string, rev uint64, document string) *journal.Record {
	return &journal.Record{Kind: journal.KindPut, Namespace: ns, Key: key, Revision: rev, TimeMs: 1,
		Schema: schema.MediaIntentV1, Owner: "ops", CreatedMs: 1, UpdatedMs: 1, Document: []byte(document)}
}

func TestVerifySemanticProblemsInHandWrittenJournal(t *testing.T) {
	t.Parallel()
	good := string(doc(1))
	cases := []struct {
		name  string
		recs  []*journal.Record
		index uint64
		says  string
		stops bool
	}{
		{"revision gap", []*journal.Record{putRec("service/a", "k", 1, good), putRec("service/a", "k", 3, good)}, 2, "revision 3 is not the namespace revision 1 plus one", true},
		{"delete of a missing key", []*journal.Record{putRec("service/a", "k", 1, good),
			{Kind: journal.KindDelete, Namespace: "service/a", Key: "other", Revision: 2}}, 2, "DELETE of a missing key", true},
		{"expire without a lease", []*journal.Record{putRec("service/a", "k", 1, good),
			{Kind: journal.KindExpire, Namespace: "service/a", Key: "k", Revision: 2}}, 2, "EXPIRE of an entry without a lease", true},
		{"invalid namespace", []*journal.Record{putRec("service/a", "k", 1, good), putRec("bogus/a", "k", 1, good)}, 2, "not under system/", false},
		{"invalid key", []*journal.Record{putRec("service/a", "a//b", 1, good)}, 1, "invalid segment", false},
		{"unregistered schema", []*journal.Record{{Kind: journal.KindPut, Namespace: "service/a", Key: "k", Revision: 1, Schema: "keeppeek.other.v1", Owner: "ops", Document: []byte(good)}}, 1, "not a registered schema", false},
		{"no owner", []*journal.Record{{Kind: journal.KindPut, Namespace: "service/a", Key: "k", Revision: 1, Schema: schema.MediaIntentV1, Document: []byte(good)}}, 1, "without an owner", false},
		{"invalid document", []*journal.Record{putRec("service/a", "k", 1, `{"role":"publish","password":"x"}`)}, 1, "document of service/a/k at journal index 1", false},
		{"lease in MQTT integration state", []*journal.Record{putRec("service/a", "k", 1, good), func() *journal.Record {
			r := putRec("service/mqtt-north", "bridge", 1, good)
			r.ExpiresMs = 60000
			return r
		}()}, 2, `entry service/mqtt-north/bridge carries a lease (expires_ms 60000), but namespace "service/mqtt-north" is MQTT integration state`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := handJournal(t, tc.recs...)
			code, rep := verifyChecked(t, dir)
			want := 1
			if tc.name == "unregistered schema" {
				want = 2 // the document cannot be validated either
			}
			if code != exitProblems || len(rep.Problems) != want {
				t.Fatalf("exit %d, problems %v", code, rep.Problems)
			}
			p := rep.Problems[want-1]
			if p.Index != tc.index || !strings.Contains(p.Reason, tc.says) || p.Offset < 0 {
				t.Errorf("problem %+v, want index %d saying %q", p, tc.index, tc.says)
			}
			if stopped := rep.Replay.StoppedAt.ok; stopped != tc.stops {
				t.Errorf("replay stopped at %v; want stop %v", rep.Replay.StoppedAt, tc.stops)
			}
			// The store refuses to open on every replay problem verify reports,
			// documents included.
			if s, err := statestore.Open(statestore.Options{Dir: dir}); err == nil {
				s.Close()
				t.Errorf("the store opens a journal verify refuses")
			} else {
				wantContains(t, "open error", err.Error(), fmt.Sprintf("index %d", tc.index))
			}
		})
	}
}

func TestVerifyCheckpointAheadOfJournal(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(10)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.close()
	ckpts, _ := listCheckpoints(ts.root())
	// Drop the journal's last records: the checkpoint is now ahead of it.
	segs := ts.segments()
	offs := entryOffsets(t, segs[len(segs)-1].Path)
	if err := os.Truncate(segs[len(segs)-1].Path, offs[len(offs)-2]); err != nil {
		t.Fatal(err)
	}
	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems || len(rep.Problems) != 1 || rep.Problems[0].Severity != corruption ||
		!strings.Contains(rep.Problems[0].Reason, fmt.Sprintf("journal ends at index %d but records up to index %d were acknowledged (checkpoint %s)", ts.records-2, ts.records, ckpts[0].Name())) {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
}

func TestVerifyMissingSegment(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(40)
	ts.close()
	segs := ts.segments()
	if err := os.Remove(segs[2].Path); err != nil {
		t.Fatal(err)
	}
	code, rep := verifyChecked(t, ts.dir)
	if code != exitProblems || len(rep.Problems) != 1 {
		t.Fatalf("exit %d, problems %v", code, rep.Problems)
	}
	p := rep.Problems[0]
	if p.File != "journal/"+segs[1].Name() || p.Offset != segs[1].Size || p.Index != segs[2].Start || !strings.Contains(p.Reason, "missing or duplicated segment") {
		t.Errorf("problem %+v", p)
	}
}

// forbiddenFixtures is the root package's testdata/forbidden (see its
// README): a journal whose record 2 is not JSON, and a backup holding a
// credential.
const forbiddenFixtures = "../../testdata/forbidden"

// copyFixture copies the fixture store under forbiddenFixtures/name into
// a new directory and returns it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(forbiddenFixtures, name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestVerifyReportsForbiddenDocumentsAsOpenRefuses: on the stores issue 29
// found served, verify reports the document Open refuses, word for word
// (namespace, key, journal index or image, and the rule), as CORRUPTION,
// says how to migrate, and changes nothing; repair refuses to move an
// intact image aside.
func TestVerifyReportsForbiddenDocumentsAsOpenRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		file  string // the problem's
		index uint64
		says  string
		// repairRefuses: an image repair would move aside; a journal
		// record is no damage repair acts on, so it has nothing to do.
		repairRefuses bool
	}{
		{"journal record not JSON", func(t *testing.T) string { return copyFixture(t, "not-json") },
			"journal/00000000000000000001", 2, "document of user/alice/intents/broken at journal index 2: schema keeppeek.media-intent.v1: $: invalid JSON", false},
		{"checkpoint image with a credential", func(t *testing.T) string {
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join(forbiddenFixtures, "password.kpbak"))
			if err != nil {
				t.Fatal(err)
			}
			// kpjournal restore refuses it, as RestoreDir does; the store
			// is made by hand, as a tampered or older one could be.
			if code, _, errs := kp(t, "restore", "--dir", dir, "--in", filepath.Join(forbiddenFixtures, "password.kpbak")); code == exitOK ||
				!strings.Contains(errs, "document of user/alice/intents/secret in the backup") {
				t.Fatalf("restore of the forbidden backup: exit %d: %s", code, errs)
			}
			root := filepath.Join(dir, statestore.StoreDirName)
			if err := journal.CreateEmpty(filepath.Join(root, "journal"), 3); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "checkpoint-00000000000000000002.ckpt"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "LOCK"), nil, 0o644); err != nil { // a stopped store's
				t.Fatal(err)
			}
			return dir
		}, "checkpoint-00000000000000000002.ckpt", 2, "document of user/alice/intents/secret in checkpoint ", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tc.setup(t)
			before := treeHashes(t, dir)
			code, rep := verifyChecked(t, dir)
			sameTree(t, "verify", before, treeHashes(t, dir))
			if code != exitProblems || len(rep.Problems) != 1 {
				t.Fatalf("exit %d, problems %+v", code, rep.Problems)
			}
			p := rep.Problems[0]
			if p.Severity != corruption || p.File != tc.file || p.Index != tc.index || !strings.Contains(p.Reason, tc.says) ||
				!strings.Contains(p.Reason+strings.Join(rep.Notes, "\n"), recovery.MigrationHint) {
				t.Fatalf("problem %+v (notes %q), want CORRUPTION in %s at %d saying %q and how to migrate", p, rep.Notes, tc.file, tc.index, tc.says)
			}
			_, err := statestore.Open(statestore.Options{Dir: dir})
			var de *statestore.DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("Open: %v, want a DocumentError", err)
			}
			if !strings.Contains(p.Reason, de.Error()) {
				t.Fatalf("verify says %q, Open %q", p.Reason, de.Error())
			}
			var ce *journal.CorruptError
			if errors.As(err, &ce) && (ce.Offset != p.Offset || segFile(ce.Segment) != p.File) {
				t.Fatalf("Open refuses at %s offset %d, verify reports %s offset %d", ce.Segment, ce.Offset, p.File, p.Offset)
			}
			if code, out, errs := kp(t, "repair", "--dir", dir, "--yes"); (code != exitOK) != tc.repairRefuses {
				t.Fatalf("repair exit %d: %s%s", code, out, errs)
			}
			sameTree(t, "verify and repair", before, treeHashes(t, dir))
		})
	}
}

// TestVerifyIgnoresDocumentsBeforeTheReplayBase: a document the rules
// refuse, in a journal record the newest checkpoint has retired (the
// record is still on disk, the image holds its replacement), is read by
// neither Open nor verify: the store opens and verify finds nothing, as
// after the migration the package comment of the store describes.
func TestVerifyIgnoresDocumentsBeforeTheReplayBase(t *testing.T) {
	t.Parallel()
	good := string(doc(1))
	recs := []*journal.Record{putRec("service/a", "k", 1, `{"role":"publish","password":"x"}`), putRec("service/a", "k", 2, good)}
	dir := handJournal(t, recs...)
	// The image is the state at index 2: the second PUT replaced the first.
	v := materialize.New()
	for _, rec := range recs {
		if _, err := v.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := checkpoint.WriteFile(filepath.Join(dir, statestore.StoreDirName, checkpoint.Name(2)), v, 2, 1); err != nil {
		t.Fatal(err)
	}
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.Close()
	if code, rep := verifyChecked(t, dir); code != exitOK || len(rep.Problems) != 0 || rep.Replay.FromIndex != 3 {
		t.Fatalf("verify exit %d, problems %v, replay from %d", code, rep.Problems, rep.Replay.FromIndex)
	}
	// Without the image, both replay the record and refuse it.
	os.Remove(filepath.Join(dir, statestore.StoreDirName, checkpoint.Name(2)))
	if code, rep := verifyChecked(t, dir); code != exitProblems || len(rep.Problems) != 1 || rep.Problems[0].Index != 1 {
		t.Fatalf("without the image: verify exit %d, problems %v", code, rep.Problems)
	}
}
