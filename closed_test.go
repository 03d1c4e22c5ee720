package statestore_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/schema"
)

// dirHashes fingerprints the tree under dir (internal/filetree).
func dirHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	h, err := filetree.Hashes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sameFiles fails unless the two fingerprints agree, naming what differs.
func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if diff := filetree.Diff(before, after); len(diff) > 0 {
		t.Fatalf("%s changed the store directory: %s", what, strings.Join(diff, ", "))
	}
}

// TestClosedStoreAnswersUnavailable calls the whole API on a closed store:
// every call that can fail answers UNAVAILABLE naming the store, the rest
// change nothing, and no file in the store directory changes.
func TestClosedStoreAnswersUnavailable(t *testing.T) {
	f := newFixture(t)
	for i := range 8 {
		f.mustPut(admin, "group/g", "k"+string(rune('a'+i)), docN(i))
	}
	// A lease that lapses while the store is closed: an open store's Get
	// would commit its EXPIRE, a closed one must not.
	if _, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "lease", Schema: schema.MediaIntentV1, Document: docN(99), TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := f.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	ss, sink := f.session(admin)
	f.watch(ss, "w1", "group/g", "")
	s := f.s
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.s = nil
	f.clock.Advance(time.Minute)
	sink.nextClosed(t) // Close ended the watch with STORE_CLOSED

	put := statestore.PutRequest{Namespace: "group/g", Key: "new", Schema: schema.MediaIntentV1, Document: docN(1)}
	rows := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, admin, "group/g", "ka"); return err }},
		{"Get of a lapsed lease", func() error { _, err := s.Get(ctx, admin, "group/g", "lease"); return err }},
		{"Get with a bad key", func() error { _, err := s.Get(ctx, admin, "group/g", "../x"); return err }},
		{"Put", func() error { _, err := s.Put(ctx, admin, put); return err }},
		{"Put create-only", func() error {
			r := put
			r.Expect = statestore.CreateOnly
			_, err := s.Put(ctx, admin, r)
			return err
		}},
		{"Delete", func() error {
			_, err := s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/g", Key: "ka"})
			return err
		}},
		{"OpenSession", func() error { _, err := s.OpenSession(admin, newSink()); return err }},
		{"OpenSession without sink", func() error { _, err := s.OpenSession(admin, nil); return err }},
		{"Watch", func() error {
			_, err := s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w2", Namespace: "group/g"})
			return err
		}},
		{"Unwatch", func() error { return s.Unwatch(ss, "w1") }},
		{"Ack", func() error { return s.Ack(ss, "w1", 1) }},
		{"Checkpoint", s.Checkpoint},
		{"Backup", func() error { return s.Backup(&bytes.Buffer{}) }},
		{"Restore", func() error { return s.Restore(bytes.NewReader(backup.Bytes())) }},
		{"Restore of garbage", func() error { return s.Restore(strings.NewReader("not a backup")) }},
		{"Close again", s.Close},
	}
	root := filepath.Join(f.dir, statestore.StoreDirName)
	before := dirHashes(t, root)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			se := wantCode(t, err, statestore.Unavailable, "store")
			if !strings.Contains(se.Message, "closed") {
				t.Fatalf("message does not say the store is closed: %v", err)
			}
			sameFiles(t, r.name, before, dirHashes(t, root))
		})
	}
	// The calls that cannot fail: they change nothing either.
	if n := s.SetPrincipal(admin.ID, statestore.Principal{ID: admin.ID}, true); n != 0 {
		t.Fatalf("SetPrincipal on a closed store closed %d watches", n)
	}
	if ss.Principal() != admin {
		t.Fatalf("SetPrincipal on a closed store changed a session's principal to %+v", ss.Principal())
	}
	if got := s.Namespace("group/g"); got.Entries != 9 {
		t.Fatalf("Namespace on the closed store: %+v, want the 9 entries it closed with", got)
	}
	if n, _, _ := s.Usage(); n != 9 {
		t.Fatalf("Usage on the closed store: %d entries, want 9", n)
	}
	_, _ = s.JournalStats(), s.OpenReport()
	ss.Close()
	<-ss.Done()
	sameFiles(t, "the calls that cannot fail", before, dirHashes(t, root))
	sink.empty(t)

	// Nothing above reached the disk: the reopened store is as it was.
	f.open()
	if _, err := f.s.Get(ctx, admin, "group/g", "new"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("a Put on the closed store survived: %v", err)
	}
	if _, err := f.s.Get(ctx, admin, "group/g", "ka"); err != nil {
		t.Fatalf("a Delete on the closed store took effect: %v", err)
	}
}

// TestClosedHandleCannotUndoRestore is the two-handle sequence of issue 10:
// a closed handle's Checkpoint must not rewrite the image a second handle
// restored, and the restore survives a restart.
func TestClosedHandleCannotUndoRestore(t *testing.T) {
	dir := t.TempDir()
	// Without pre-writing: s2 stays open while the files are compared, and
	// its pre-writer filling the tail with zeros is no change by s1.
	opts := statestore.Options{Dir: dir, NoPrewrite: true}
	s1, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s *statestore.Store, n int) {
		t.Helper()
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "k", Schema: schema.MediaIntentV1, Document: docN(n)}); err != nil {
			t.Fatal(err)
		}
	}
	write(s1, 1)
	var backup bytes.Buffer
	if err := s1.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	write(s1, 2)
	write(s1, 3)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Restore(&backup); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, statestore.StoreDirName)
	before := dirHashes(t, root)
	wantCode(t, s1.Checkpoint(), statestore.Unavailable, "store")
	wantCode(t, s1.Backup(&bytes.Buffer{}), statestore.Unavailable, "store")
	sameFiles(t, "the closed handle's Checkpoint", before, dirHashes(t, root))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	s3, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	e, err := s3.Get(ctx, admin, "group/g", "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Document, docN(1)) || e.Revision != 1 {
		t.Fatalf("after restart k is revision %d %s, want the restored revision 1 %s", e.Revision, e.Document, docN(1))
	}
}

// TestCheckpointAndRestoreRacingClose runs explicit checkpoints and a
// restore while Close runs: each either completes before Close releases
// the LOCK or answers UNAVAILABLE, nothing changes a file once Close has
// returned, and the store reopens with the restore applied exactly when
// Restore reported success.
func TestCheckpointAndRestoreRacingClose(t *testing.T) {
	for round := range 20 {
		f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
		f.mustPut(admin, "group/g", "k", docN(1))
		var backup bytes.Buffer
		if err := f.s.Backup(&backup); err != nil {
			t.Fatal(err)
		}
		f.mustPut(admin, "group/g", "k", docN(2))
		s := f.s
		f.s = nil

		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 1024)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					err := s.Checkpoint()
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		restored := make(chan error, 1)
		go func() {
			<-start
			restored <- s.Restore(bytes.NewReader(backup.Bytes()))
		}()
		close(start)
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		root := filepath.Join(f.dir, statestore.StoreDirName)
		atClose := dirHashes(t, root)
		wg.Wait()
		rerr := <-restored
		close(errs)
		for err := range errs {
			wantCode(t, err, statestore.Unavailable, "store")
		}
		if rerr != nil {
			wantCode(t, rerr, statestore.Unavailable, "store")
		}
		sameFiles(t, "a checkpoint or restore after Close", atClose, dirHashes(t, root))

		f.open()
		e, err := f.s.Get(ctx, admin, "group/g", "k")
		if err != nil {
			t.Fatal(err)
		}
		want := docN(2)
		if rerr == nil {
			want = docN(1)
		}
		if !bytes.Equal(e.Document, want) {
			t.Fatalf("round %d: Restore returned %v but k holds %s", round, rerr, e.Document)
		}
	}
}
