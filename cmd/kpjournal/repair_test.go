package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
)

func TestRepairTruncateAfterCorruption(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(30)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.fill(30)
	if err := ts.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ts.close()
	ckpts, _ := listCheckpoints(ts.root())
	older, newest := ckpts[0], ckpts[1]
	// Damage a record between the two checkpoints.
	segs := ts.segments()
	var seg = segs[0]
	for _, s := range segs {
		if s.Start > older.Index+1 && s.Start+3 < newest.Index {
			seg = s
			break
		}
	}
	offs := entryOffsets(t, seg.Path)
	flipByte(t, seg.Path, offs[2]+30)
	bad := seg.Start + 2
	if code, rep := verifyChecked(t, ts.dir); code != exitProblems || rep.Problems[0].Index != bad {
		t.Fatalf("verify: exit %d %v", code, rep.Problems)
	}

	// Cutting at or after the damage is refused.
	code, _, errs := kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(bad+3), "--yes")
	if code != exitProblems || !strings.Contains(errs, fmt.Sprintf("truncate after %d instead", bad-1)) {
		t.Fatalf("repair past the damage: exit %d: %s", code, errs)
	}
	// Without --yes nothing changes.
	if code, _, errs := kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(bad-1)); code != exitUsage || !strings.Contains(errs, "--yes") {
		t.Fatalf("repair without --yes: exit %d: %s", code, errs)
	}
	if got := ts.segments(); len(got) != len(segs) {
		t.Fatalf("refused repair changed the journal")
	}

	code, out, errs := kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(bad-1), "--yes")
	if code != exitOK {
		t.Fatalf("repair: exit %d\n%s%s", code, out, errs)
	}
	dropped := ts.records - (bad - 1) - 1 // every valid record after bad-1; bad itself is damaged
	wantContains(t, "repair output", out,
		fmt.Sprintf("drops %d records (indexes %d..%d)", dropped, bad+1, ts.records),
		"and 1 damaged entries", "service/transcoder-a", "group/lobby", "user/alice",
		fmt.Sprintf("segment %s is cut at offset %d", seg.Name(), offs[2]),
		fmt.Sprintf("checkpoint %s is ahead of index %d and moves to quarantine/", newest.Name(), bad-1),
		fmt.Sprintf("the journal now ends at index %d", bad-1))
	q, _ := os.ReadDir(filepath.Join(ts.root(), "quarantine"))
	if len(q) < 2 {
		t.Errorf("quarantine holds %d files", len(q))
	}
	code, rep := verifyChecked(t, ts.dir)
	if code != exitOK || rep.Journal.LastIndex != bad-1 || rep.Replay.FromIndex != older.Index+1 {
		t.Fatalf("verify after repair: exit %d, %+v %+v %v", code, rep.Journal, rep.Replay, rep.Problems)
	}
	// The store opens and goes on from there.
	s, err := statestore.Open(statestore.Options{Dir: ts.dir})
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "after-repair", Schema: "keeppeek.media-intent.v1", Document: doc(1)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if code, rep := verifyChecked(t, ts.dir); code != exitOK || rep.Journal.LastIndex != bad {
		t.Fatalf("verify after a write: exit %d %+v", code, rep.Journal)
	}
}

func TestRepairNothingToDo(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.fill(5)
	ts.close()
	code, out, _ := kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(ts.records))
	if code != exitOK || !strings.Contains(out, "nothing to drop") {
		t.Errorf("exit %d: %s", code, out)
	}
	code, _, errs := kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(ts.records+3), "--yes")
	if code != exitUsage || !strings.Contains(errs, "not a whole record") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestRepairRefusesCorruptionAsTornTail(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(30)
	ts.close()
	segs := ts.segments()
	offs := entryOffsets(t, segs[1].Path)
	flipByte(t, segs[1].Path, offs[0]+30)
	code, _, errs := kp(t, "repair", "--dir", ts.dir, "--yes")
	if code != exitProblems || !strings.Contains(errs, fmt.Sprintf("--truncate-after %d", segs[1].Start-1)) {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// tornStore is a stopped store whose final record is torn, with the
// segment, offset and index of that record.
func tornStore(t *testing.T) (ts *testStore, seg string, off int64) {
	ts = newTestStore(t)
	ts.fill(12)
	ts.close()
	segs := ts.segments()
	last := segs[len(segs)-1]
	offs := entryOffsets(t, last.Path)
	ts.tearFinalRecord()
	return ts, last.Name(), offs[len(offs)-1]
}

// Every kind of repair states its plan on stdout, where its result goes,
// and in the --json report, even when it is not confirmed.
func TestRepairPlanOnStdoutAndInJSON(t *testing.T) {
	t.Parallel()
	ts, seg, off := tornStore(t)
	plan := fmt.Sprintf("will cut journal/%s at offset %d (index %d)", seg, off, ts.records)

	code, out, errs := kp(t, "repair", "--dir", ts.dir) // not confirmed: no --yes, no terminal
	if code != exitUsage || !strings.Contains(out, plan) || strings.Contains(errs, "will cut") || !strings.Contains(errs, "--yes") {
		t.Fatalf("tail cut without --yes: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	var rep tailCutReport
	code, errs = kpJSON(t, &rep, "repair", "--dir", ts.dir)
	p, planned := rep.Plan.get()
	if code != exitUsage || !planned || p.File != "journal/"+seg || p.Offset != off || p.Index != ts.records || rep.Applied || rep.Cut != nil {
		t.Fatalf("tail cut --json without --yes: exit %d, report %+v, stderr %s", code, rep, errs)
	}
	code, errs = kpJSON(t, &rep, "repair", "--dir", ts.dir, "--yes")
	if code != exitOK || !rep.Applied || rep.Cut == nil || rep.Cut.Offset != off || rep.Plan != some(p) {
		t.Fatalf("tail cut --json --yes: exit %d, report %+v, stderr %s", code, rep, errs)
	}

	// --truncate-after: the same, for a plan that drops acknowledged records.
	after := ts.records - 4
	code, out, errs = kp(t, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(after))
	if code != exitUsage || !strings.Contains(out, fmt.Sprintf("truncating after index %d drops 3 records (indexes %d..%d)", after, after+1, after+3)) {
		t.Fatalf("truncate-after without --yes: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	var tp truncatePlan
	code, errs = kpJSON(t, &tp, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(after))
	if code != exitUsage || tp.Applied || tp.Records != 3 || tp.FirstIndex != some(after+1) || tp.LastIndex != some(after+3) || len(tp.Quarantine) != 0 {
		t.Fatalf("truncate-after --json without --yes: exit %d, plan %+v, stderr %s", code, tp, errs)
	}
	if code, rep := verifyChecked(t, ts.dir); code != exitOK || rep.Journal.LastIndex != after+3 {
		t.Fatalf("an unconfirmed plan changed the store: verify exit %d, journal %+v", code, rep.Journal)
	}
	code, errs = kpJSON(t, &tp, "repair", "--dir", ts.dir, "--truncate-after", fmt.Sprint(after), "--yes")
	if code != exitOK || !tp.Applied || tp.Records != 3 || len(tp.Quarantine) == 0 {
		t.Fatalf("truncate-after --json --yes: exit %d, plan %+v, stderr %s", code, tp, errs)
	}
}
