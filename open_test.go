package statestore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/smalldisk"
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
