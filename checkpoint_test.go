package statestore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/schema"
)

// image is a comparable rendering of a whole view.
type image struct {
	Entries    map[string]materialize.Entry
	Namespaces map[string]materialize.Namespace
	Totals     [3]int64
}

func imageOf(v *materialize.View) image {
	img := image{Entries: map[string]materialize.Entry{}, Namespaces: map[string]materialize.Namespace{}}
	v.All(func(e *materialize.Entry) bool { img.Entries[e.Namespace+"|"+e.Key] = *e; return true })
	v.Namespaces(func(name string, n materialize.Namespace) bool { img.Namespaces[name] = n; return true })
	n, b, nss := v.Totals()
	img.Totals = [3]int64{int64(n), b, int64(nss)}
	return img
}

// wholeImage reads a store's whole state through its own Backup.
func wholeImage(t *testing.T, s *statestore.Store) (image, uint64) {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	hdr, v, err := checkpoint.Decode(&buf, checkpoint.Limits{MaxNamespaces: 1 << 20, MaxEntries: 1 << 22, MaxTotalBytes: 1 << 30,
		MaxNamespace: 128, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 16384})
	if err != nil {
		t.Fatal(err)
	}
	return imageOf(v), hdr.Index
}

// workload applies a deterministic mix of puts, deletes, leases and
// expiries to f, advancing its fake clock.
func workload(t *testing.T, f *fixture, ops int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < ops; i++ {
		ns := fmt.Sprintf("group/g%d", rng.IntN(5))
		key := fmt.Sprintf("k%02d", rng.IntN(40))
		f.clock.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		switch r := rng.IntN(10); {
		case r < 6:
			if _, err := f.put(admin, ns, key, testdoc.MediaIntent(300+rng.IntN(2000), i), statestore.Expect{}); err != nil {
				t.Fatal(err)
			}
		case r < 8:
			if _, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1,
				Document: docN(i), TTL: time.Duration(1+rng.IntN(5)) * time.Second}); err != nil {
				t.Fatal(err)
			}
		default:
			f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key})
		}
		if i%97 == 0 {
			f.s.Get(ctx, admin, ns, key) // forces due expiries through the journal
		}
	}
}

// TestCheckpointReplayEqualsFullReplay runs the same workload on a store
// that checkpoints often and one that never does: after restart both hold
// the same state, revisions and counters, and the first replayed far less.
func TestCheckpointReplayEqualsFullReplay(t *testing.T) {
	withCkpt := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = 16 << 10; o.SegmentSize = 32 << 10 })
	without := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1; o.SegmentSize = 32 << 10 })
	workload(t, withCkpt, 1500, 42)
	workload(t, without, 1500, 42)
	if err := withCkpt.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	workload(t, withCkpt, 50, 43) // some journal after the newest image
	workload(t, without, 50, 43)
	withCkpt.reopen()
	without.reopen()
	a, _ := wholeImage(t, withCkpt.s)
	b, _ := wholeImage(t, without.s)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("a store restarted from checkpoints differs from one replaying its whole journal")
	}
	ra, rb := withCkpt.s.OpenReport(), without.s.OpenReport()
	if ra.Checkpoint.Path == "" || ra.Replayed >= rb.Replayed/4 {
		t.Fatalf("checkpointed store replayed %d records from %q; the full replay took %d", ra.Replayed, ra.Checkpoint.Path, rb.Replayed)
	}
	files, _ := checkpoint.List(filepath.Join(withCkpt.dir, statestore.StoreDirName))
	if len(files) != 2 {
		t.Fatalf("%d checkpoint files kept, want 2", len(files))
	}
}

func corruptFile(t *testing.T, path string, how string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "flip":
		data[len(data)/2] ^= 0xFF
	case "truncate":
		data = data[:len(data)/3]
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedNewestCheckpointFallsBack(t *testing.T) {
	for _, how := range []string{"flip", "truncate"} {
		t.Run(how, func(t *testing.T) {
			// Small segments, so the journal is reclaimed up to the older
			// image and no longer holds the records before it.
			f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.SegmentSize = -1, 16<<10 })
			workload(t, f, 300, 1)
			f.s.Checkpoint()
			workload(t, f, 300, 2)
			f.s.Checkpoint()
			workload(t, f, 100, 3)
			want, _ := wholeImage(t, f.s)
			f.s.Close()
			f.s = nil
			files, _ := checkpoint.List(filepath.Join(f.dir, statestore.StoreDirName))
			if len(files) != 2 {
				t.Fatalf("%d checkpoints", len(files))
			}
			corruptFile(t, files[1].Path, how)
			f.open()
			rep := f.s.OpenReport().Checkpoint
			if rep.Path != files[0].Path || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0].Error(), filepath.Base(files[1].Path)) {
				t.Fatalf("open report %+v: want fallback to %s naming %s", rep, files[0].Path, files[1].Path)
			}
			if got, _ := wholeImage(t, f.s); !reflect.DeepEqual(got, want) {
				t.Fatal("state after falling back to the older checkpoint differs")
			}
			// Both damaged, and the journal starts after index 1: the
			// records before it exist only in the images. Open fails
			// naming both files, the missing range and the way out.
			f.s.Close()
			f.s = nil
			corruptFile(t, files[0].Path, how)
			first := f.journalFirst()
			if first <= 1 {
				t.Fatalf("journal starts at %d; the test needs it reclaimed", first)
			}
			_, err := statestore.Open(f.opts)
			wantCode(t, err, statestore.Unavailable, "store")
			var nce *recovery.NoCheckpointError
			if !errors.As(err, &nce) || nce.JournalFirst != first || len(nce.Skipped) != 2 {
				t.Fatalf("want a *NoCheckpointError with the journal starting at %d and 2 images, got %v", first, err)
			}
			for _, want := range []string{filepath.Base(files[0].Path), filepath.Base(files[1].Path), fmt.Sprintf("records 1..%d", first-1), "restore a backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestUnloadableCheckpointWithWholeJournal: the only image is damaged but
// the journal still holds every record from index 1, so Open replays it
// from the empty state, reports the skipped image, and serves everything.
func TestUnloadableCheckpointWithWholeJournal(t *testing.T) {
	for _, how := range []string{"flip", "truncate"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
			workload(t, f, 200, 1)
			if err := f.s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			workload(t, f, 50, 2)
			want, _ := wholeImage(t, f.s)
			records := f.s.JournalStats().Records // this Open wrote the whole journal
			f.s.Close()
			f.s = nil
			files, _ := checkpoint.List(filepath.Join(f.dir, statestore.StoreDirName))
			if len(files) != 1 || f.journalFirst() != 1 {
				t.Fatalf("%d checkpoints, journal from %d: the test wants one image and the whole journal", len(files), f.journalFirst())
			}
			corruptFile(t, files[0].Path, how)
			f.open()
			rep := f.s.OpenReport()
			if rep.Checkpoint.Path != "" || len(rep.Checkpoint.Skipped) != 1 || !strings.Contains(rep.Checkpoint.Skipped[0].Error(), filepath.Base(files[0].Path)) {
				t.Fatalf("open report %+v: want the image skipped and no base", rep.Checkpoint)
			}
			if uint64(rep.Replayed) != records {
				t.Fatalf("replayed %d records, want all %d", rep.Replayed, records)
			}
			if got, _ := wholeImage(t, f.s); !reflect.DeepEqual(got, want) {
				t.Fatal("state replayed from the journal differs from the state before the damage")
			}
		})
	}
}

// diskUse is the bytes of journal segments plus checkpoints.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	root := filepath.Join(dir, statestore.StoreDirName)
	segs, err := journal.ListSegments(filepath.Join(root, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	files, _ := checkpoint.List(root)
	for _, f := range files {
		if st, err := os.Stat(f.Path); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestContinuousChurn is the specification's churn workload: fill and
// drain 256 entries for 24 cycles on one open store; journal plus
// checkpoints stay under 5 MiB and drop back without a restart.
func TestContinuousChurn(t *testing.T) {
	// Durable writes, as in the specification's workload: their pace is
	// what the background checkpoints keep up with.
	f := newFixture(t)
	var peak int64
	sample := func() {
		if u := diskUse(t, f.dir); u > peak {
			peak = u
		}
	}
	for cycle := 0; cycle < 24; cycle++ {
		for i := 0; i < 256; i++ {
			f.mustPut(admin, "service/churn", fmt.Sprintf("k%03d", i), testdoc.MediaIntent(specDocBytes, cycle*256+i))
			if i%16 == 0 {
				sample()
			}
		}
		for i := 0; i < 256; i++ {
			if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "service/churn", Key: fmt.Sprintf("k%03d", i)}); err != nil {
				t.Fatal(err)
			}
			if i%16 == 0 {
				sample()
			}
		}
	}
	if peak > 5<<20 {
		t.Fatalf("journal plus checkpoints peaked at %d bytes, over the 5 MiB ceiling", peak)
	}
	// Two images of the drained state, at two indexes (an image at the
	// index of the newest one replaces it), so the older image kept is no
	// background one from before the drain ended.
	statestore.WaitCheckpoints(f.s)
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	f.mustPut(admin, "service/churn", "k000", testdoc.MediaIntent(specDocBytes, 0))
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "service/churn", Key: "k000"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Drained, the store then holds at most the segment the older image
	// points into, the tail segment (pre-written up to the segment size;
	// the two may be one) and two images of an empty namespace. A bound of
	// half the peak failed once the peak itself got lower. A store that
	// reclaimed nothing would hold the whole churn's journal, about 15 MB.
	const drained = 2*journal.DefaultSegmentSize + 64<<10
	if end := diskUse(t, f.dir); end > drained {
		t.Fatalf("disk use %d after draining did not drop back to at most %d (peak %d)", end, drained, peak)
	}
	t.Logf("churn peak %d bytes", peak)
}

// TestRestartChurn: 1,024-entry cycles with a reopen after each reuse the
// space instead of growing.
func TestRestartChurn(t *testing.T) {
	f := newFixture(t, func(o *statestore.Options) { o.NoSync = true })
	var uses []int64
	var lag int64 // the largest checkpoint lag of any cycle
	for cycle := 0; cycle < 6; cycle++ {
		for i := 0; i < 1024; i++ {
			f.mustPut(admin, "service/churn", fmt.Sprintf("k%04d", i), testdoc.MediaIntent(specDocBytes, i))
		}
		for i := 0; i < 1024; i++ {
			f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "service/churn", Key: fmt.Sprintf("k%04d", i)})
		}
		statestore.WaitCheckpoints(f.s)
		lag = max(lag, statestore.CheckpointLag(f.s))
		f.reopen()
		uses = append(uses, diskUse(t, f.dir))
	}
	// The journal is freed a whole segment at a time, and where a cycle's
	// last checkpoints fall against segment boundaries decides whether one
	// more segment (1 MiB plus the record that crossed it) is still held:
	// use may move by that much, plus the spacing checkpoints take under
	// load (CheckpointLagFactor times the bytes written during one, at most
	// CheckpointLagCap bytes). A store that did not reuse its
	// space would grow by a whole cycle's journal (about 4.7 MB) each time,
	// past any of these by the fourth cycle.
	const segment = 1 << 20
	spacing := min(statestore.CheckpointLagFactor*lag, statestore.CheckpointLagCap)
	for i := 2; i < len(uses); i++ {
		if uses[i] > uses[1]+2*segment+spacing {
			t.Fatalf("disk use keeps growing across restart cycles: %v (spacing under load %d bytes)", uses, spacing)
		}
	}
	if last := uses[len(uses)-1]; last > uses[1]+4*segment+4<<20 {
		t.Fatalf("disk use %d after six cycles: space is not reused (%v)", last, uses)
	}
	if rev := f.s.Namespace("service/churn").Revision; rev != 6*2048 {
		t.Fatalf("namespace revision %d after the churn, want %d", rev, 6*2048)
	}
}

// TestBackupDuringWritesIsOneCommitPoint takes a backup while writers run
// and checks it equals the journal replayed to exactly the backup's index.
func TestBackupDuringWritesIsOneCommitPoint(t *testing.T) {
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				ns := fmt.Sprintf("group/b%d", w%3)
				key := fmt.Sprintf("k%d", i%20)
				if i%4 == 3 {
					f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key})
				} else if _, err := f.put(admin, ns, key, docN(w*10000+i), statestore.Expect{}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	for f.s.Namespace("group/b0").Revision < 200 {
		f.s.Get(ctx, admin, "group/b0", "k0")
	}
	var backup bytes.Buffer
	if err := f.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	for f.s.Namespace("group/b0").Revision < 400 {
		f.s.Get(ctx, admin, "group/b0", "k0")
	}
	stop.Store(true)
	wg.Wait()
	hdr, err := checkpoint.ReadHeader(bytes.NewReader(backup.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// The state at exactly hdr.Index, rebuilt from the journal.
	want := materialize.New()
	err = journal.ReplayDir(filepath.Join(f.dir, statestore.StoreDirName, "journal"), 1, 0, journal.Limits{}, func(idx uint64, r *journal.Record) error {
		if idx <= hdr.Index {
			_, err := want.Apply(r)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := statestore.RestoreDir(dir, bytes.NewReader(backup.Bytes()), f.opts.Limits); err != nil {
		t.Fatal(err)
	}
	s2, err := statestore.Open(statestore.Options{Dir: dir, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ := wholeImage(t, s2)
	if !reflect.DeepEqual(got, imageOf(want)) {
		t.Fatalf("restored backup differs from the journal replayed to its index %d", hdr.Index)
	}
	// New writes in the restored store continue its revisions.
	before := s2.Namespace("group/b0").Revision
	e, err := s2.Put(ctx, admin, statestore.PutRequest{Namespace: "group/b0", Key: "after", Schema: schema.MediaIntentV1, Document: docN(1)})
	if err != nil || e.Revision != before+1 {
		t.Fatalf("write after restore: %+v %v (want revision %d)", e, err, before+1)
	}
}

func TestRestoreIntoOpenStore(t *testing.T) {
	src := newFixture(t)
	workload(t, src, 300, 9)
	// A write commits every lease already due, so the backup holds none
	// that the restore would expire at the same instant.
	src.mustPut(admin, "group/g0", "flush", docN(0))
	var backup bytes.Buffer
	if err := src.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	want, _ := wholeImage(t, src.s)

	dst := newFixture(t)
	workload(t, dst, 200, 10)
	dst.clock.Set(src.clock.Now())
	if err := dst.s.Restore(bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, _ := wholeImage(t, dst.s); !reflect.DeepEqual(got, want) {
		t.Fatal("restored state differs from the backup's")
	}
	dst.reopen()
	if got, _ := wholeImage(t, dst.s); !reflect.DeepEqual(got, want) {
		t.Fatal("restored state did not survive a reopen")
	}
}

func TestRestoreRefusesBadBackups(t *testing.T) {
	src := newFixture(t)
	for i := 0; i < 20; i++ {
		src.mustPut(admin, "group/g", fmt.Sprintf("k%d", i), testdoc.MediaIntent(specDocBytes, i))
	}
	var good bytes.Buffer
	src.s.Backup(&good)
	newer := bytes.Clone(good.Bytes())
	binary.LittleEndian.PutUint16(newer[8:], checkpoint.FormatVersion+1)
	damaged := bytes.Clone(good.Bytes())
	damaged[len(damaged)/2] ^= 1
	tests := []struct {
		name   string
		data   []byte
		limits func(*statestore.Options)
		want   string
	}{
		{"newer format version", newer, nil, "version"},
		{"damaged", damaged, nil, ""},
		{"over the byte limit", good.Bytes(), func(o *statestore.Options) { o.Limits.MaxTotalBytes = 10 * specDocBytes }, ""},
		{"over the entries limit", good.Bytes(), func(o *statestore.Options) { o.Limits.MaxEntriesPerNamespace = 5 }, "entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mods := []func(*statestore.Options){}
			if tc.limits != nil {
				mods = append(mods, tc.limits)
			}
			dst := newFixture(t, mods...)
			dst.mustPut(admin, "group/keep", "k", docN(1))
			before, idx := wholeImage(t, dst.s)
			err := dst.s.Restore(bytes.NewReader(tc.data))
			wantCode(t, err, statestore.InvalidArgument, "backup")
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if after, idx2 := wholeImage(t, dst.s); !reflect.DeepEqual(after, before) || idx2 != idx {
				t.Fatal("a refused restore changed the store")
			}
			err = statestore.RestoreDir(t.TempDir(), bytes.NewReader(tc.data), dst.opts.Limits)
			wantCode(t, err, statestore.InvalidArgument, "backup")
		})
	}
}

// TestDamagedImageIsNoFallback: after Open skipped a damaged image and
// replayed the whole journal, the next checkpoint must not count that image
// among the two it keeps, or the journal would be reclaimed up to it and
// the records before it would live only in a damaged file.
func TestDamagedImageIsNoFallback(t *testing.T) {
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.SegmentSize = -1, 4<<10 })
	workload(t, f, 200, 1)
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	workload(t, f, 50, 2)
	f.s.Close()
	f.s = nil
	files, _ := checkpoint.List(filepath.Join(f.dir, statestore.StoreDirName))
	if len(files) != 1 || f.journalFirst() != 1 {
		t.Fatalf("%d images, journal from %d: the test wants one image and the whole journal", len(files), f.journalFirst())
	}
	corruptFile(t, files[0].Path, "flip")
	f.open()
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if first := f.journalFirst(); first != 1 {
		t.Fatalf("the journal was reclaimed to index %d behind the damaged image %s", first, filepath.Base(files[0].Path))
	}
	// Two good images: now the journal may go.
	workload(t, f, 50, 3)
	if err := f.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if first := f.journalFirst(); first == 1 {
		t.Fatal("with two good images the journal should have been reclaimed")
	}
}
