package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// files fingerprints the tree under dir (internal/filetree).
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	h, err := filetree.Hashes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestUnavailableModeWithACorruptJournal: a store whose journal has a
// flipped byte in its first record cannot open. The dispatcher built from
// the Open error answers every command UNAVAILABLE naming the cause,
// advertises nothing, and leaves every file byte-identical.
func TestUnavailableModeWithACorruptJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := s.Put(context.Background(), alice, statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: schema.MediaIntentV1, Document: doc("a")}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	segs, err := journal.ListSegments(filepath.Join(dir, statestore.StoreDirName, "journal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	data, err := os.ReadFile(segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	data[10] ^= 0xFF
	if err := os.WriteFile(segs[0].Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)

	_, openErr := statestore.Open(statestore.Options{Dir: dir})
	if statestore.CodeOf(openErr) != statestore.Unavailable {
		t.Fatalf("Open of a corrupt journal: %v", openErr)
	}
	srv := dispatch.NewUnavailable(openErr, dispatch.Options{})
	if caps := srv.Capabilities(); len(caps) != 0 {
		t.Fatalf("unavailable mode advertises %q", caps)
	}
	c := dial(t, srv, admin)
	requests := []*pb.ClientMessage{
		getReq(1, "user/alice", "k"),
		putReq(2, "user/alice", "k", doc("b"), nil, 0),
		deleteReq(3, "user/alice", "k", nil),
		watchReq(4, "w", "user/alice", ""),
		unwatchReq(5, "w"),
		ackReq(6, "w", 1),
	}
	for i, req := range requests {
		e := wantError(t, c.call(req), uint64(i+1), codeUnavailable, "store")
		if !strings.Contains(e.GetMessage(), openErr.Error()) {
			t.Fatalf("request %d: %q does not name the cause %q", i+1, e.GetMessage(), openErr)
		}
	}
	// Envelope checks still apply.
	wantError(t, c.call(getReq(0, "user/alice", "k")), 0, codeInvalidArgument, "request_id")
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	after := files(t, dir)
	if diff := filetree.Diff(before, after); len(diff) > 0 {
		t.Fatalf("files changed: %v", diff)
	}
}
