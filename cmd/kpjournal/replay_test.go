package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
)

// history writes a known sequence and returns, for each journal index, the
// entries (namespace/key -> revision) live after it.
func history(t *testing.T, ts *testStore) []map[string]uint64 {
	t.Helper()
	states := []map[string]uint64{{}}
	cur := map[string]uint64{}
	step := func() {
		next := make(map[string]uint64, len(cur))
		for k, v := range cur {
			next[k] = v
		}
		states = append(states, next)
	}
	for i := 0; i < 24; i++ {
		ns, key := []string{"service/a", "user/bob"}[i%2], fmt.Sprintf("k%d", i%4)
		if i%6 == 5 {
			ts.del(ns, key)
			delete(cur, ns+"/"+key)
		} else {
			e := ts.put(ns, key, i, 0)
			cur[ns+"/"+key] = e.Revision
		}
		step()
	}
	return states
}

func TestReplayAt(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	states := history(t, ts)
	ts.close()
	for _, at := range []uint64{1, 5, 12, 17, 24} {
		var doc replayDoc
		code, errs := kpJSON(t, &doc, "replay", "--dir", ts.dir, "--at", fmt.Sprint(at))
		if code != exitOK {
			t.Fatalf("replay --at %d: exit %d: %s", at, code, errs)
		}
		got := map[string]uint64{}
		for _, e := range doc.Rows {
			got[e.Namespace+"/"+e.Key] = e.Revision
		}
		if doc.Index != at || fmt.Sprint(got) != fmt.Sprint(states[at]) {
			t.Errorf("replay --at %d: index %d, entries %v, want %v", at, doc.Index, got, states[at])
		}
	}
	// --namespace filters; text output is an aligned table.
	code, out, _ := kp(t, "replay", "--dir", ts.dir, "--at", "12", "--namespace", "user/bob")
	if code != exitOK || strings.Contains(out, "service/a") || !strings.Contains(out, "user/bob") {
		t.Errorf("replay --namespace: exit %d\n%s", code, out)
	}
	wantContains(t, "replay output", out, "NAMESPACE  REVISION  ENTRIES  BYTES", "state as of index 12")

	// Beyond the end is a usage error.
	code, _, errs := kp(t, "replay", "--dir", ts.dir, "--at", "25")
	if code != exitUsage || !strings.Contains(errs, "beyond the end of the journal (its last record is 24)") {
		t.Errorf("replay --at 25: exit %d: %s", code, errs)
	}
}

func TestReplayAtBeforeOldestRecord(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(30)
	// Two checkpoints: the journal is truncated up to the older one.
	for range 2 {
		if err := ts.s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		ts.fill(10)
	}
	ts.close()
	ckpts, _ := listCheckpoints(ts.root())
	first := ts.segments()[0].Start
	if first == 1 || ckpts[0].Index+1 < first {
		t.Fatalf("journal starts at %d, checkpoints %d, %d", first, ckpts[0].Index, ckpts[1].Index)
	}
	code, _, errs := kp(t, "replay", "--dir", ts.dir, "--at", fmt.Sprint(first-2))
	if code != exitUsage || !strings.Contains(errs, fmt.Sprintf("the oldest record available is %d", first)) {
		t.Errorf("replay before the oldest record: exit %d: %s", code, errs)
	}
	// At the older checkpoint's index: the image alone.
	var doc replayDoc
	if code, errs := kpJSON(t, &doc, "replay", "--dir", ts.dir, "--at", fmt.Sprint(ckpts[0].Index)); code != exitOK || doc.Replayed != 0 || doc.Checkpoint != some(ckpts[0].Name()) {
		t.Errorf("replay --at the checkpoint: exit %d %+v %s", code, doc, errs)
	}
	// Between the checkpoints: the older image plus the journal.
	mid := (ckpts[0].Index + ckpts[1].Index) / 2
	if code, errs := kpJSON(t, &doc, "replay", "--dir", ts.dir, "--at", fmt.Sprint(mid)); code != exitOK || doc.Checkpoint != some(ckpts[0].Name()) || doc.Replayed != int(mid-ckpts[0].Index) {
		t.Errorf("replay --at %d: exit %d %+v %s", mid, code, doc, errs)
	}
	// The end equals what the store serves.
	if code, errs := kpJSON(t, &doc, "replay", "--dir", ts.dir); code != exitOK || doc.Checkpoint != some(ckpts[1].Name()) {
		t.Fatalf("replay: exit %d %+v %s", code, doc, errs)
	}
	ts.open()
	entries, bytes, nss := ts.s.Usage()
	if doc.Entries != entries || doc.Bytes != bytes || doc.Live != nss || doc.Index != ts.records {
		t.Errorf("replay %+v, store %d entries %d bytes %d namespaces, %d records", doc, entries, bytes, nss, ts.records)
	}
	for _, n := range doc.Namespaces {
		if got := ts.s.Namespace(n.Namespace); got.Revision != n.Revision || got.Entries != n.Entries || got.Bytes != n.Bytes {
			t.Errorf("namespace %s: replay %+v, store %+v", n.Namespace, n, got)
		}
	}
}

func TestReplayStopsAtDamage(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(40)
	ts.close()
	segs := ts.segments()
	offs := entryOffsets(t, segs[2].Path)
	flipByte(t, segs[2].Path, offs[0]+30)
	// Before the damage replay works; past it, it names the record.
	if code, _, errs := kp(t, "replay", "--dir", ts.dir, "--at", fmt.Sprint(segs[2].Start-1)); code != exitOK {
		t.Errorf("replay before the damage: exit %d: %s", code, errs)
	}
	code, _, errs := kp(t, "replay", "--dir", ts.dir)
	if code != exitProblems {
		t.Fatalf("exit %d", code)
	}
	wantContains(t, "replay stderr", errs, fmt.Sprintf("index %d", segs[2].Start), segs[2].Name(), fmt.Sprintf("offset %d", offs[0]))
}

func TestDumpRange(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	history(t, ts)
	ts.close()
	var doc struct {
		Records  []dumpRecord `json:"records"`
		Problems []problem    `json:"problems"`
	}
	code, errs := kpJSON(t, &doc, "dump", "--dir", ts.dir, "--from", "5", "--to", "11", "--documents")
	if code != exitOK || len(doc.Problems) != 0 {
		t.Fatalf("dump: exit %d: %s", code, errs)
	}
	if len(doc.Records) != 7 {
		t.Fatalf("dump --from 5 --to 11: %d records", len(doc.Records))
	}
	segs := ts.segments()
	for k, r := range doc.Records {
		idx := uint64(5 + k)
		if r.Index != idx {
			t.Errorf("record %d has index %d", k, r.Index)
		}
		// Offsets and segments are the files' own.
		var seg string
		var off int64 = -1
		for _, s := range segs {
			if s.Start <= idx {
				seg = s.Name()
				offs := entryOffsets(t, s.Path)
				if int(idx-s.Start) < len(offs) {
					off = offs[idx-s.Start]
				}
			}
		}
		if r.Segment != seg || r.Offset != off {
			t.Errorf("index %d: segment %s offset %d, want %s %d", idx, r.Segment, r.Offset, seg, off)
		}
		// history() deletes on every sixth step: index 6 and 12.
		wantKind := "PUT"
		if idx%6 == 0 {
			wantKind = "DELETE"
		}
		if r.Kind != wantKind {
			t.Errorf("index %d is %s, want %s", idx, r.Kind, wantKind)
		}
		size, _ := r.Size.get()
		document, _ := r.Document.get()
		if wantKind == "PUT" && (!r.Size.ok || size != len(document) || r.Owner != some(admin.ID) || !r.Schema.ok) {
			t.Errorf("index %d: PUT fields %+v", idx, r)
		}
	}
	code, out, _ := kp(t, "dump", "--dir", ts.dir, "--from", "23")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 3 || !strings.HasPrefix(lines[0], "INDEX  SEGMENT") || !strings.HasPrefix(lines[1], "23 ") {
		t.Errorf("dump --from 23: exit %d\n%s", code, out)
	}
	// Columns line up.
	if i := strings.Index(lines[0], "KIND"); i < 0 || lines[1][i:i+3] != "PUT" && lines[1][i:i+6] != "DELETE" {
		t.Errorf("columns are not aligned:\n%s", out)
	}
}

func TestDumpGoesOnPastDamage(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(40)
	ts.close()
	segs := ts.segments()
	offs := entryOffsets(t, segs[1].Path)
	flipByte(t, segs[1].Path, offs[1]+30)
	var doc struct {
		Records  []dumpRecord `json:"records"`
		Problems []problem    `json:"problems"`
	}
	code, errs := kpJSON(t, &doc, "dump", "--dir", ts.dir)
	if code != exitProblems || len(doc.Problems) != 1 || len(doc.Records) != int(ts.records)-1 {
		t.Fatalf("exit %d, %d records, problems %v", code, len(doc.Records), doc.Problems)
	}
	if p := doc.Problems[0]; p.Index != segs[1].Start+1 || p.Offset != offs[1] {
		t.Errorf("problem %+v", p)
	}
	wantContains(t, "dump stderr", errs, fmt.Sprintf("index %d", segs[1].Start+1))
}

func TestStatMatchesTheStore(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(50)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.fill(7)
	ts.close()
	var st statDoc
	code, errs := kpJSON(t, &st, "stat", "--dir", ts.dir)
	if code != exitOK {
		t.Fatalf("stat: exit %d: %s", code, errs)
	}
	segs := ts.segments()
	if len(st.Segments) != len(segs) || st.FirstIndex != segs[0].Start || st.LastIndex != ts.records || st.Records != int(ts.records-segs[0].Start+1) {
		t.Errorf("stat journal: %d segments %d..%d, %d records; files: %d segments from %d, %d records written",
			len(st.Segments), st.FirstIndex, st.LastIndex, st.Records, len(segs), segs[0].Start, ts.records)
	}
	sum := 0
	for k, s := range st.Segments {
		sum += s.Records
		if s.Name != segs[k].Name() || s.FirstIndex != segs[k].Start || s.Size != segs[k].Size || s.Records != len(entryOffsets(t, segs[k].Path)) {
			t.Errorf("segment %+v, file %+v", s, segs[k])
		}
	}
	if sum != st.Records {
		t.Errorf("segment records add up to %d, total %d", sum, st.Records)
	}
	ckpts, _ := listCheckpoints(ts.root())
	if len(st.Checkpoints) != 1 || st.Checkpoints[0].Index != ckpts[0].Index || st.Checkpoints[0].Size != ckpts[0].Size {
		t.Errorf("stat checkpoints %+v, files %+v", st.Checkpoints, ckpts)
	}
	ts.open()
	entries, bytes, nss := ts.s.Usage()
	if st.Totals.Entries != entries || st.Totals.Bytes != bytes || st.Totals.Namespaces != nss || st.Totals.Incomplete.ok {
		t.Errorf("stat totals %+v, store %d entries %d bytes %d namespaces", st.Totals, entries, bytes, nss)
	}
	marker, err := os.Stat(filepath.Join(ts.root(), "journal", journal.FloorFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Disk.Journal != journalSize(segs)+marker.Size() || st.Disk.Reserve != journal.DefaultReserveBytes ||
		st.Disk.Checkpoints != ckpts[0].Size || st.Disk.Total < st.Disk.Journal+st.Disk.Reserve+st.Disk.Checkpoints {
		t.Errorf("disk use %+v", st.Disk)
	}
	code, out, _ := kp(t, "stat", "--dir", ts.dir+"/") // the store is open: refused
	if code != exitUsage {
		t.Errorf("stat on an open store: exit %d\n%s", code, out)
	}
	ts.close()
	_, out, _ = kp(t, "stat", "--dir", ts.dir)
	wantContains(t, "stat output", out, "SEGMENT               FIRST INDEX  RECORDS  SIZE", fmt.Sprintf("indexes %d..%d", segs[0].Start, ts.records))
	_ = statestore.StoreDirName
}
