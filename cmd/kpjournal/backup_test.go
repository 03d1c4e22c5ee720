package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"

	"github.com/keeppeek/statestore"
)

func TestCheckpointBackupRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, smallSegments)
	ts.fill(40)
	ts.close()
	before := ts.segments()

	var ck checkpointDoc
	code, errs := kpJSON(t, &ck, "checkpoint", "--dir", ts.dir)
	if code != exitOK {
		t.Fatalf("checkpoint: exit %d: %s", code, errs)
	}
	if ck.Checkpoint.Index != ts.records || ck.Journal.LastIndex != ts.records || ck.Replayed != int(ts.records) || len(ck.Kept) != 1 {
		t.Errorf("checkpoint %+v; the store wrote %d records", ck, ts.records)
	}
	if ck.Journal.FirstIndex != before[0].Start {
		t.Errorf("journal kept from %d, was from %d", ck.Journal.FirstIndex, before[0].Start)
	}
	_, want, _ := kp(t, "replay", "--dir", ts.dir, "--json")

	bak := filepath.Join(t.TempDir(), "state.kpbak")
	code, out, errs := kp(t, "backup", "--dir", ts.dir, "--out", bak)
	if code != exitOK {
		t.Fatalf("backup: exit %d: %s", code, errs)
	}
	wantContains(t, "backup output", out, fmt.Sprintf("backup of index %d", ts.records), bak)
	if ents, _ := os.ReadDir(filepath.Dir(bak)); len(ents) != 1 {
		t.Errorf("backup left %d files beside it", len(ents))
	}
	// The store itself was not written.
	if after := ts.segments(); fmt.Sprint(after) != fmt.Sprint(ts.segments()) || len(after) != len(before) {
		t.Errorf("backup changed the journal")
	}

	dst := t.TempDir()
	code, out, errs = kp(t, "restore", "--in", bak, "--dir", dst)
	if code != exitOK {
		t.Fatalf("restore: exit %d: %s", code, errs)
	}
	wantContains(t, "restore output", out, fmt.Sprintf("index %d", ts.records))
	_, got, _ := kp(t, "replay", "--dir", dst, "--json")
	if strip(got) != strip(want) {
		t.Errorf("restored state:\n%s\nwant:\n%s", got, want)
	}
	if code, rep := verifyChecked(t, dst); code != exitOK {
		t.Errorf("verify the restored store: exit %d %v", code, rep.Problems)
	}
	// The restored store opens and serves the same state.
	s, err := statestore.Open(statestore.Options{Dir: dst})
	if err != nil {
		t.Fatal(err)
	}
	e1, b1, n1 := s.Usage()
	s.Close()
	ts.open()
	e2, b2, n2 := ts.s.Usage()
	ts.close()
	if e1 != e2 || b1 != b2 || n1 != n2 {
		t.Errorf("restored usage %d/%d/%d, original %d/%d/%d", e1, b1, n1, e2, b2, n2)
	}

	// A second restore into the same directory is refused.
	code, _, errs = kp(t, "restore", "--in", bak, "--dir", dst)
	if code != exitUsage || !strings.Contains(errs, "refusing to restore") || !strings.Contains(errs, "already holds") {
		t.Errorf("restore into a store: exit %d: %s", code, errs)
	}
	// A damaged backup changes nothing.
	data, _ := os.ReadFile(bak)
	data[len(data)/2] ^= 0xff
	os.WriteFile(bak, data, 0o644)
	empty := t.TempDir()
	code, _, errs = kp(t, "restore", "--in", bak, "--dir", empty)
	if code != exitProblems || !strings.Contains(errs, "not a usable backup") {
		t.Errorf("restore of a damaged backup: exit %d: %s", code, errs)
	}
	if ents, _ := os.ReadDir(filepath.Join(empty, statestore.StoreDirName, "journal")); len(ents) != 0 {
		t.Errorf("a refused restore wrote a journal")
	}
}

// strip drops the "store" path line from replay --json output.
func strip(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, `"store":`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestBackupToStdoutLeavesOverdueLeasesOut(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, func(o *statestore.Options) { o.Clock = clock.NewFake(time.Now().Add(-time.Hour)) })
	ts.put("service/a", "lease", 1, time.Minute)
	ts.put("service/a", "keep", 2, 0)
	ts.close()
	code, out, errs := kp(t, "backup", "--dir", ts.dir, "--out", "-")
	if code != exitOK || !strings.HasPrefix(out, "KPCKPT\r\n") {
		t.Fatalf("backup --out -: exit %d: %s", code, errs)
	}
	wantContains(t, "backup stderr", errs, "left out 1 overdue leases", "1 entries")
	// The store's own journal still holds the lease: nothing was written.
	if code, rep := verifyChecked(t, ts.dir); code != exitOK || len(rep.Overdue) != 1 || rep.Journal.LastIndex != 2 {
		t.Errorf("after backup: exit %d %+v", code, rep)
	}
}
