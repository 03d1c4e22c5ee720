package statestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
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
			// The tools' loading is Open's: the same refusal.
			_, lerr := recovery.LoadState(dir, 0, recovery.LoadOptions{Limits: tc.limits})
			var lce *journal.CorruptError
			if !errors.As(lerr, &lce) || lce.Index != ce.Index || lce.Reason != ce.Reason {
				t.Fatalf("LoadState: %v; Open: %v", lerr, err)
			}
		})
	}
}

func TestOpenCutsTornTailAndRefusesCorruption(t *testing.T) {
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
