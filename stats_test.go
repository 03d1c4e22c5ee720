package statestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// TestStatsCommitMoves: each committed write moves the commit counters and
// histograms by exactly its share, and the quota gauges follow the data.
func TestStatsCommitMoves(t *testing.T) {
	t.Parallel()
	// No pre-writing: its background zeros would move the journal's size
	// on disk between the stats and the directory listing compared below.
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.NoPrewrite = -1, true })
	st := f.s.Stats()
	if st.State != statestore.StateOpen || st.WritesCommitted != 0 || st.CommitLatency.Count != 0 || st.Quota.Entries != 0 {
		t.Fatalf("fresh store: %+v", st)
	}
	doc := intentDoc(t)
	const ns = "user/alice"
	for i := range 3 {
		f.mustPut(alice, ns, fmt.Sprintf("k%d", i), doc)
	}
	f.mustPut(admin, "group/g", "k", doc)
	st = f.s.Stats()
	if st.WritesCommitted != 4 || st.CommitLatency.Count != 4 || st.CommitLatency.Sum <= 0 {
		t.Fatalf("after 4 puts: committed %d, commit latency count %d sum %d", st.WritesCommitted, st.CommitLatency.Count, st.CommitLatency.Sum)
	}
	// Serial writers: one op per batch, one record per sync.
	if st.BatchOps.Count != 4 || st.BatchOps.Sum != 4 || st.SyncRecords.Sum != 4 || st.SyncLatency.Count != 4 {
		t.Fatalf("batches %+v, sync records %+v, syncs %d", st.BatchOps, st.SyncRecords, st.SyncLatency.Count)
	}
	if st.Journal.Records != 4 || st.Journal.Appends != 4 || st.Journal.Bytes == 0 {
		t.Fatalf("journal %+v", st.Journal)
	}
	segs, err := journal.ListSegments(filepath.Join(f.dir, statestore.StoreDirName, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	if st.JournalSegments != len(segs) || st.JournalDiskBytes != size || size == 0 {
		t.Fatalf("journal on disk: %d segments %d bytes, stats say %d and %d", len(segs), size, st.JournalSegments, st.JournalDiskBytes)
	}
	lim := f.s.Limits()
	want := statestore.QuotaStats{Entries: 4, Bytes: 4 * int64(len(doc)), Namespaces: 2, FullestNamespaceEntries: 3,
		MaxTotalBytes: lim.MaxTotalBytes, MaxNamespaces: lim.MaxNamespaces, MaxEntriesPerNamespace: lim.MaxEntriesPerNamespace}
	if st.Quota != want {
		t.Fatalf("quota %+v, want %+v", st.Quota, want)
	}
	if _, err := f.s.Delete(ctx, alice, statestore.DeleteRequest{Namespace: ns, Key: "k0"}); err != nil {
		t.Fatal(err)
	}
	st = f.s.Stats()
	if st.WritesCommitted != 5 || st.Quota.Entries != 3 || st.Quota.FullestNamespaceEntries != 2 {
		t.Fatalf("after delete: committed %d, quota %+v", st.WritesCommitted, st.Quota)
	}
	for code, n := range st.WritesRefused {
		if n != 0 {
			t.Fatalf("no write was refused, but %v counts %d", code, n)
		}
	}
}

// TestStatsRefusedByCode refuses one write per code and checks that only
// that code's counter moved, by one, and nothing counted as committed.
func TestStatsRefusedByCode(t *testing.T) {
	t.Parallel()
	doc := intentDoc(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		code  statestore.Code
		limit func(*quota.Limits)
		write func(f *fixture) error
	}{
		{statestore.Conflict, nil, func(f *fixture) error {
			_, err := f.put(alice, "user/alice", "k", doc, statestore.CreateOnly)
			return err
		}},
		{statestore.NotFound, nil, func(f *fixture) error {
			_, err := f.s.Delete(ctx, alice, statestore.DeleteRequest{Namespace: "user/alice", Key: "missing"})
			return err
		}},
		{statestore.TTLInvalid, nil, func(f *fixture) error {
			_, err := f.s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "t", Schema: schema.MediaIntentV1, Document: doc, TTL: time.Millisecond})
			return err
		}},
		{statestore.PermissionDenied, nil, func(f *fixture) error {
			_, err := f.put(bob, "user/alice", "k2", doc, statestore.Expect{})
			return err
		}},
		{statestore.InvalidArgument, nil, func(f *fixture) error {
			_, err := f.put(alice, "user/alice", "../k", doc, statestore.Expect{})
			return err
		}},
		{statestore.SchemaInvalid, nil, func(f *fixture) error {
			_, err := f.put(alice, "user/alice", "k2", []byte(`{"role":"publish"}`), statestore.Expect{})
			return err
		}},
		{statestore.ValueTooLarge, func(l *quota.Limits) { l.MaxDocumentBytes = len(doc) }, func(f *fixture) error {
			_, err := f.put(alice, "user/alice", "k2", append(doc[:len(doc):len(doc)], ' '), statestore.Expect{})
			return err
		}},
		{statestore.QuotaExceeded, func(l *quota.Limits) { l.MaxEntriesPerNamespace = 1 }, func(f *fixture) error {
			_, err := f.put(alice, "user/alice", "k2", doc, statestore.Expect{})
			return err
		}},
		{statestore.Unavailable, nil, func(f *fixture) error {
			_, err := f.s.Put(cancelled, alice, statestore.PutRequest{Namespace: "user/alice", Key: "k2", Schema: schema.MediaIntentV1, Document: doc})
			return err
		}},
		{statestore.Storage, nil, func(f *fixture) error {
			defer f.opts.Faults.SetSync(func(string) error { return syscall.EIO })()
			_, err := f.put(alice, "user/alice", "k2", doc, statestore.Expect{})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.code.String(), func(t *testing.T) {
			f := newFixture(t, func(o *statestore.Options) {
				if c.limit != nil {
					c.limit(&o.Limits)
				}
				o.Faults = &fault.Hooks{}
			})
			f.mustPut(alice, "user/alice", "k", doc)
			before := f.s.Stats()
			wantCode(t, c.write(f), c.code, "")
			after := f.s.Stats()
			for code, n := range after.WritesRefused {
				want := before.WritesRefused[code]
				if code == c.code {
					want++
				}
				if n != want {
					t.Errorf("refused %v: %d, want %d", code, n, want)
				}
			}
			if after.WritesCommitted != before.WritesCommitted || after.CommitLatency.Count != before.CommitLatency.Count {
				t.Errorf("a refused write counted as committed: %d -> %d", before.WritesCommitted, after.WritesCommitted)
			}
		})
	}
}

// TestStatsFailedSync: an fdatasync that fails is timed and counted as a
// journal failure, and the write it fails counts as STORAGE, not as a
// commit.
func TestStatsFailedSync(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.Faults = faults })
	f.mustPut(alice, "user/alice", "k", docN(1))
	before := f.s.Stats()
	restore := faults.SetSync(func(string) error { return syscall.EIO })
	_, err := f.put(alice, "user/alice", "k", docN(2), statestore.Expect{})
	restore()
	wantCode(t, err, statestore.Storage, "journal")
	after := f.s.Stats()
	switch {
	case after.Journal.Failures != before.Journal.Failures+1:
		t.Fatalf("journal failures %d -> %d", before.Journal.Failures, after.Journal.Failures)
	case after.SyncLatency.Count != before.SyncLatency.Count+1:
		t.Fatalf("failed sync not timed: %d -> %d", before.SyncLatency.Count, after.SyncLatency.Count)
	case after.WritesRefused[statestore.Storage] != 1:
		t.Fatalf("STORAGE refusals %d, want 1", after.WritesRefused[statestore.Storage])
	case after.WritesCommitted != before.WritesCommitted || after.Journal.Records != before.Journal.Records+1:
		t.Fatalf("committed %d -> %d, records %d -> %d", before.WritesCommitted, after.WritesCommitted, before.Journal.Records, after.Journal.Records)
	}
	// The store recovers, and the counters carry on.
	f.mustPut(alice, "user/alice", "k", docN(3))
	if st := f.s.Stats(); st.WritesCommitted != before.WritesCommitted+1 {
		t.Fatalf("committed %d after recovery, want %d", st.WritesCommitted, before.WritesCommitted+1)
	}
}

// TestStatsWatches: opening a watch, its snapshot, its updates, closing it
// by each way a watch ends, and a refused watch all show.
func TestStatsWatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.Limits.MaxSnapshotEntries = 2 })
	const ns = "user/alice"
	f.mustPut(alice, ns, "a/1", docN(1))
	ss, sink := f.session(alice)
	res, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: ns, KeyPrefix: "a/"})
	if err != nil {
		t.Fatal(err)
	}
	sink.next(t) // the snapshot
	st := f.s.Stats()
	if st.Watches.Open != 1 || st.Watches.Sessions != 1 || st.Watches.Added != 1 {
		t.Fatalf("after Watch: %+v", st.Watches)
	}
	if st.SnapshotEntries.Count != 1 || st.SnapshotEntries.Sum != int64(len(res.Entries)) || st.SnapshotBytes.Sum <= int64(len(docN(1))) {
		t.Fatalf("snapshot sizes: entries %+v bytes %+v", st.SnapshotEntries, st.SnapshotBytes)
	}
	f.mustPut(alice, ns, "a/2", docN(2))
	sink.nextUpdate(t)
	if err := f.s.Unwatch(ss, "w"); err != nil {
		t.Fatal(err)
	}
	st = f.s.Stats()
	if st.Watches.Enqueued != 1 || st.Watches.Unwatched != 1 || st.Watches.Open != 0 {
		t.Fatalf("after an update and Unwatch: %+v", st.Watches)
	}
	f.mustPut(alice, ns, "a/3", docN(3))
	_, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "broad", Namespace: ns})
	wantCode(t, err, statestore.WatchTooBroad, "")
	_, err = f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w2", Namespace: "user/bob"})
	wantCode(t, err, statestore.PermissionDenied, "")
	st = f.s.Stats()
	if st.WatchesRefused[statestore.WatchTooBroad] != 1 || st.WatchesRefused[statestore.PermissionDenied] != 1 || st.SnapshotEntries.Count != 1 {
		t.Fatalf("refused watches %v, snapshots %d", st.WatchesRefused, st.SnapshotEntries.Count)
	}
	if _, err := f.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w3", Namespace: ns, KeyPrefix: "a/1"}); err != nil {
		t.Fatal(err)
	}
	f.s.SetPrincipal(alice.ID, statestore.Principal{}, true)
	if st := f.s.Stats(); st.Watches.Closed[watch.AuthorizationLost] != 1 {
		t.Fatalf("closures after revoking: %v", st.Watches.Closed)
	}
	ss2, _ := f.session(admin)
	if _, err := f.s.Watch(ctx, ss2, statestore.WatchRequest{WatchID: "w", Namespace: ns, KeyPrefix: "a/1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	st = f.s.Stats()
	f.s = nil
	if st.State != statestore.StateClosed || st.Watches.Closed[watch.StoreClosed] != 1 || st.Watches.Open != 0 {
		t.Fatalf("after Close: state %v, watches %+v", st.State, st.Watches)
	}
}

// TestStatsCheckpoint: a checkpoint moves the count, index, time and
// duration; one that fails moves only the failure count and duration.
func TestStatsCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
	f.mustPut(alice, "user/alice", "k", docN(1))
	if st := f.s.Stats(); st.Checkpoints.Written != 0 || !st.Checkpoints.LastTime.IsZero() {
		t.Fatalf("checkpoint stats before any: %+v", st.Checkpoints)
	}
	f.clock.Advance(time.Minute)
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st := f.s.Stats()
	c := st.Checkpoints
	if c.Written != 1 || c.Failed != 0 || c.LastIndex != st.Journal.Records || !c.LastTime.Equal(t0.Add(time.Minute)) || c.Duration.Count != 1 || c.LastDuration <= 0 {
		t.Fatalf("after a checkpoint: %+v (journal records %d)", c, st.Journal.Records)
	}
	// A directory where the next image must go makes its rename fail.
	f.mustPut(alice, "user/alice", "k", docN(2))
	next := c.LastIndex + 1
	if err := os.Mkdir(filepath.Join(f.dir, statestore.StoreDirName, checkpoint.Name(next)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); err == nil {
		t.Fatal("checkpoint over a directory succeeded")
	}
	c2 := f.s.Stats().Checkpoints
	if c2.Written != 1 || c2.Failed != 1 || c2.LastIndex != c.LastIndex || c2.Duration.Count != 2 {
		t.Fatalf("after a failed checkpoint: %+v", c2)
	}
}

// TestFailedOpenStats: the Stats built from each kind of Open failure say
// the store is not open and why.
func TestFailedOpenStats(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		open    func(t *testing.T) error
		failure statestore.OpenFailure
	}{
		{"invalid options", func(t *testing.T) error {
			_, err := statestore.Open(statestore.Options{})
			return err
		}, statestore.FailureInvalidOptions},
		{"locked", func(t *testing.T) error {
			f := newFixture(t)
			_, err := statestore.Open(f.opts)
			return err
		}, statestore.FailureLocked},
		{"corrupt journal", func(t *testing.T) error {
			f := newFixture(t)
			for i := range 3 {
				f.mustPut(alice, "user/alice", fmt.Sprintf("k%d", i), docN(i))
			}
			f.s.Close()
			f.s = nil
			segs, err := journal.ListSegments(filepath.Join(f.dir, statestore.StoreDirName, "journal"))
			if err != nil {
				t.Fatal(err)
			}
			// Flip a byte in the first record: a bad record followed by
			// good ones is corruption, not a torn tail.
			b, err := os.ReadFile(segs[0].Path)
			if err != nil {
				t.Fatal(err)
			}
			b[8] ^= 0xff
			if err := os.WriteFile(segs[0].Path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = statestore.Open(f.opts)
			return err
		}, statestore.FailureCorrupt},
		{"storage", func(t *testing.T) error {
			file := filepath.Join(t.TempDir(), "not-a-dir")
			if err := os.WriteFile(file, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := statestore.Open(statestore.Options{Dir: file})
			return err
		}, statestore.FailureStorage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.open(t)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			st := statestore.FailedOpenStats(err)
			if st.State != statestore.StateFailed || st.Failure != c.failure || st.FailureMessage != err.Error() {
				t.Fatalf("got state %v failure %q message %q; want failed, %q, %q", st.State, st.Failure, st.FailureMessage, c.failure, err)
			}
		})
	}
	if st := statestore.FailedOpenStats(nil); st.State != statestore.StateFailed || st.Failure != statestore.FailureOther {
		t.Fatalf("nil error: %+v", st)
	}
	if s := statestore.StateFailed.String(); !strings.Contains(s, "failed") {
		t.Fatalf("StateFailed.String() = %q", s)
	}
}
