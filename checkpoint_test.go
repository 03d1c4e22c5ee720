package statestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fault"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	// Serial: its disk-use ceiling depends on the background checkpoints
	// keeping pace with the writes, which other tests' CPU use slows.
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
	t.Parallel()
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

// TestDamagedImageIsNoFallback: after Open skipped a damaged image and
// replayed the whole journal, the next checkpoint must not count that image
// among the two it keeps, or the journal would be reclaimed up to it and
// the records before it would live only in a damaged file.
func TestDamagedImageIsNoFallback(t *testing.T) {
	t.Parallel()
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

// A store that restarts often must still checkpoint: the trigger follows
// the journal after the newest image as it stands on disk, not what one
// process wrote. These tests run many lifetimes, each writing far less than
// CheckpointBytes, and hold the journal on disk and each Open's replay to a
// ceiling derived from CheckpointBytes and the segment size.

// envRestartWriter makes TestRestartingWriterChild run one lifetime in the
// store directory it names.
const envRestartWriter = "KP_TEST_RESTART_WRITER"

const (
	restartNS   = "group/restart"
	restartKeys = 64
)

// restartDoc is a document of the same size for every n, so every record
// frame a lifetime writes has one size and bounds in records are exact.
func restartDoc(n int) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%09d","media_kind":"video"}`, n)
}

// lifetime is what one open-write-close cycle saw.
type lifetime struct {
	replayed int           // records Open replayed
	written  journal.Stats // what it appended
	live     int64         // live value bytes when it closed
}

// runLifetime opens the store, puts `puts` documents over restartKeys keys
// starting at key gen*puts, and closes it.
func runLifetime(opts statestore.Options, gen, puts int) (lifetime, error) {
	s, err := statestore.Open(opts)
	if err != nil {
		return lifetime{}, err
	}
	lt := lifetime{replayed: s.OpenReport().Replayed}
	for i := range puts {
		n := gen*puts + i
		_, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: restartNS, Key: fmt.Sprintf("k%02d", n%restartKeys), Schema: schema.MediaIntentV1, Document: restartDoc(n)})
		if err != nil {
			s.Close()
			return lt, err
		}
	}
	lt.written = s.JournalStats()
	_, lt.live, _ = s.Usage()
	return lt, s.Close()
}

// restartBounds are the ceilings a lifetime's store must stay under.
type restartBounds struct {
	opts  statestore.Options
	frame int64 // bytes of one record frame (all frames here are equal)
	// perLife is the journal bytes one lifetime writes (all write the
	// same records, so the first one's count holds for all).
	perLife int64
	// the largest journal and replay seen, for the log
	seenSize     int64
	seenReplayed int
}

// threshold is the checkpoint trigger in force: CheckpointBytes, or half
// the live value bytes if larger.
func (b restartBounds) threshold(live int64) int64 { return max(b.opts.CheckpointBytes, live/2) }

// maxReplayed: a checkpoint starts whenever the journal after the newest
// image reaches the threshold (at Open too), so what a lifetime leaves
// after it is under the threshold plus what it writes while the last
// checkpoint runs, at most one lifetime's bytes.
func (b restartBounds) maxReplayed(live int64) int {
	return int((b.threshold(live) + b.perLife) / b.frame)
}

// maxJournalBytes: the journal keeps the records after the older of the
// two images (two spans of at most threshold + one lifetime), plus the
// segment holding the older image's next record and the one-record
// segment Reclaim leaves in front of it; every entry also carries a length
// prefix of at most 2 bytes at these sizes.
func (b restartBounds) maxJournalBytes(live int64) int64 {
	span := 2 * (b.threshold(live) + b.perLife)
	return span*(b.frame+2)/b.frame + int64(b.opts.SegmentSize) + 2*(b.frame+2)
}

// check measures the journal on disk after a lifetime and fails the test if
// it, or that lifetime's replay, is over its ceiling.
func (b *restartBounds) check(t *testing.T, gen int, lt lifetime) {
	t.Helper()
	if lt.written.Records == 0 || lt.written.Bytes%lt.written.Records != 0 {
		t.Fatalf("lifetime %d: wrote %d records in %d bytes, want equal frames", gen, lt.written.Records, lt.written.Bytes)
	}
	if b.frame == 0 {
		b.frame = int64(lt.written.Bytes / lt.written.Records)
	}
	if got := int64(lt.written.Bytes / lt.written.Records); got != b.frame {
		t.Fatalf("lifetime %d: frame of %d bytes, earlier ones %d", gen, got, b.frame)
	}
	if b.perLife == 0 {
		b.perLife = int64(lt.written.Bytes)
	}
	if int64(lt.written.Bytes) != b.perLife || 4*b.perLife > b.opts.CheckpointBytes {
		t.Fatalf("lifetime %d wrote %d journal bytes, the first %d: the test needs equal lifetimes of at most a quarter of CheckpointBytes %d", gen, lt.written.Bytes, b.perLife, b.opts.CheckpointBytes)
	}
	if limit := b.maxReplayed(lt.live); lt.replayed > limit {
		t.Fatalf("lifetime %d: Open replayed %d records, ceiling %d (threshold %d bytes, frames of %d)", gen, lt.replayed, limit, b.threshold(lt.live), b.frame)
	}
	size := journalBytes(t, b.opts.Dir)
	b.seenSize, b.seenReplayed = max(b.seenSize, size), max(b.seenReplayed, lt.replayed)
	if limit := b.maxJournalBytes(lt.live); size > limit {
		t.Fatalf("lifetime %d: journal holds %d bytes on disk, ceiling %d (CheckpointBytes %d, segments of %d)", gen, size, limit, b.opts.CheckpointBytes, b.opts.SegmentSize)
	}
}

func journalBytes(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := journal.ListSegments(filepath.Join(dir, statestore.StoreDirName, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}

// TestRestartingWriterJournalBounded runs 150 in-process lifetimes of 10
// puts each (about a tenth of CheckpointBytes): together they write many
// times the ceiling, yet after every one the journal on disk and the next
// Open's replay stay under it.
func TestRestartingWriterJournalBounded(t *testing.T) {
	t.Parallel()
	const lifetimes, puts = 150, 10
	opts := statestore.Options{Dir: t.TempDir(), Clock: clock.NewFake(t0), CheckpointBytes: 16 << 10, SegmentSize: 4 << 10}
	boundedAcross(t, opts, lifetimes, 3, func(gen int) (lifetime, error) { return runLifetime(opts, gen, puts) })
}

// boundedAcross runs n lifetimes through run, checking each against the
// ceilings. Together they must write factor times the journal ceiling, or
// the test could not tell a bounded journal from one that only grows.
func boundedAcross(t *testing.T, opts statestore.Options, n int, factor uint64, run func(gen int) (lifetime, error)) {
	t.Helper()
	b := &restartBounds{opts: opts}
	var total uint64
	for gen := range n {
		lt, err := run(gen)
		if err != nil {
			t.Fatalf("lifetime %d: %v", gen, err)
		}
		b.check(t, gen, lt)
		total += lt.written.Bytes
	}
	if limit := b.maxJournalBytes(0); total < factor*uint64(limit) {
		t.Fatalf("the lifetimes wrote only %d bytes in all, too little to show a ceiling of %d", total, limit)
	}
	t.Logf("wrote %d journal bytes in all; largest journal on disk %d bytes (ceiling %d), largest replay %d records (ceiling %d)",
		total, b.seenSize, b.maxJournalBytes(0), b.seenReplayed, b.maxReplayed(0))
}

// TestOpenCheckpointsWhenJournalIsOver: a journal left over the threshold
// by earlier processes is checkpointed right after Open, before any write;
// one under the threshold is not.
func TestOpenCheckpointsWhenJournalIsOver(t *testing.T) {
	t.Parallel()
	opts := statestore.Options{Dir: t.TempDir(), Clock: clock.NewFake(t0), CheckpointBytes: -1}
	lt, err := runLifetime(opts, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	backlog := int64(lt.written.Bytes)
	root := filepath.Join(opts.Dir, statestore.StoreDirName)
	for _, c := range []struct {
		name      string
		threshold int64
		wantImage bool
	}{
		{"under the threshold", backlog + 1, false},
		{"at the threshold", backlog, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts.CheckpointBytes = c.threshold
			s, err := statestore.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.OpenReport().Replayed; got != 100 {
				t.Fatalf("replayed %d records, want 100", got)
			}
			// Close waits for a background checkpoint Open started.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := checkpoint.List(root)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if c.wantImage {
				want = 1
			}
			if len(files) != want || (want == 1 && files[0].Index != 100) {
				t.Fatalf("journal of %d bytes, threshold %d: checkpoints %v, want %d image(s) at index 100", backlog, c.threshold, files, want)
			}
		})
	}
	s, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rep := s.OpenReport(); rep.Replayed != 0 || rep.Checkpoint.Index != 100 {
		t.Fatalf("after the checkpoint at Open, the next Open replayed %d records from image %d, want 0 from 100", rep.Replayed, rep.Checkpoint.Index)
	}
}

// restartChildOptions are the options of the writer processes: a small
// threshold and segments so that a few dozen processes outgrow them.
func restartChildOptions(dir string) statestore.Options {
	return statestore.Options{Dir: dir, CheckpointBytes: 4 << 10, SegmentSize: 1 << 10}
}

// TestRestartingWriterChild is one writer process of
// TestRestartingWriterProcessesJournalBounded; run directly it does nothing.
func TestRestartingWriterChild(t *testing.T) {
	t.Parallel()
	dir := os.Getenv(envRestartWriter)
	if dir == "" {
		t.Skip("runs only as a child process of TestRestartingWriterProcessesJournalBounded")
	}
	gen, err := strconv.Atoi(os.Getenv(envRestartWriter + "_GEN"))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := runLifetime(restartChildOptions(dir), gen, restartChildPuts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LIFETIME %d %d %d %d\n", lt.replayed, lt.written.Records, lt.written.Bytes, lt.live)
}

const restartChildPuts = 5

// TestRestartingWriterProcessesJournalBounded runs 30 real writer
// processes one after another on one store, each writing about a quarter
// of CheckpointBytes and exiting: the journal on disk and each process's
// replay stay under the ceiling.
func TestRestartingWriterProcessesJournalBounded(t *testing.T) {
	// Serial: it forks child processes, and from fork to exec a child
	// holds this process's flocks (the stores' LOCK files), which a
	// parallel test's Open would find taken.
	const processes = 30
	opts := restartChildOptions(t.TempDir())
	boundedAcross(t, opts, processes, 2, func(gen int) (lifetime, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestartingWriterChild$", "-test.count=1", "-test.v")
		// A race-enabled child otherwise sleeps a second at exit.
		cmd.Env = append(os.Environ(), envRestartWriter+"="+opts.Dir, envRestartWriter+"_GEN="+strconv.Itoa(gen),
			"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return lifetime{}, fmt.Errorf("writer process: %w\n%s", err, out)
		}
		var lt lifetime
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(l, "LIFETIME %d %d %d %d", &lt.replayed, &lt.written.Records, &lt.written.Bytes, &lt.live); err == nil {
				return lt, nil
			}
		}
		return lt, fmt.Errorf("writer process reported nothing:\n%s", out)
	})
}

// TestCheckpointSpacingFollowsWritesDuringOne: journal bytes committed
// while a background checkpoint runs space the next one by
// CheckpointLagFactor times as many bytes, even past CheckpointBytes, and
// the next one still comes once the journal has grown that far. Without
// the lag term a fast writer starts the next image as soon as one ends.
func TestCheckpointSpacingFollowsWritesDuringOne(t *testing.T) {
	t.Parallel()
	const ckptBytes = 8 << 10
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	faults := &fault.Hooks{}
	defer faults.SetDiskSync(func(path string) error {
		if _, ok := checkpoint.ParseName(filepath.Base(path)); ok {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})()
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = ckptBytes, faults })
	doc := testdoc.MediaIntent(specDocBytes, 1)
	n := 0
	put := func() {
		f.mustPut(admin, "group/cadence", fmt.Sprintf("k%02d", n%16), doc)
		n++
	}
	// Writes until the first checkpoint starts, then more while it is held
	// at its fsync: the lag.
	for started := false; !started; {
		put()
		select {
		case <-entered:
			started = true
		default:
		}
	}
	for range 40 {
		put()
	}
	close(release)
	statestore.WaitCheckpoints(f.s)
	if got := f.s.Stats().Checkpoints.Written; got != 1 {
		t.Fatalf("%d checkpoints after the held one, want 1: the next started before the journal grew %d times the lag", got, statestore.CheckpointLagFactor)
	}
	lag := statestore.CheckpointLag(f.s)
	if lag < 40*specDocBytes {
		t.Fatalf("lag %d bytes, want at least the %d bytes of the 40 puts made during the checkpoint", lag, 40*specDocBytes)
	}
	// Every put publishes a round, which is when the trigger is judged:
	// while one more frame stays under the spaced threshold nothing
	// starts...
	frame := int64(f.s.JournalStats().Bytes) / int64(n)
	for statestore.JournalAfterImage(f.s)+frame < statestore.CheckpointLagFactor*lag {
		put()
		statestore.WaitCheckpoints(f.s)
		if got := f.s.Stats().Checkpoints.Written; got != 1 {
			t.Fatalf("checkpoint %d started with %d journal bytes after the image, under %d times the lag (%d bytes)", got, statestore.JournalAfterImage(f.s), statestore.CheckpointLagFactor, lag)
		}
	}
	// ...and past it the next one comes.
	for i := 0; f.s.Stats().Checkpoints.Written == 1; i++ {
		if i > 2 {
			t.Fatalf("no checkpoint at %d journal bytes, over %d times the lag (%d bytes)", f.s.JournalStats().Bytes, statestore.CheckpointLagFactor, lag)
		}
		put()
		statestore.WaitCheckpoints(f.s)
	}
}

// TestCheckpointSyncFailure: a checkpoint whose fsync fails (the image's
// own, or its directory's after the rename) answers STORAGE naming the
// checkpoint, leaves no image or temporary behind that a later Open could
// load or the pruning could count, truncates nothing from the journal, and
// the store keeps serving; reopening starts from the previous image and
// loses nothing.
func TestCheckpointSyncFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// fails says whether the disk fsync of path fails, given the
		// store's directory.
		fails func(root, path string) bool
	}{
		{"fsync of the image file", func(root, path string) bool {
			return strings.HasPrefix(filepath.Base(path), "checkpoint-")
		}},
		{"fsync of the directory after the rename", func(root, path string) bool {
			return path == root
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			faults := &fault.Hooks{}
			f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1; o.SegmentSize = 4096; o.Faults = faults })
			root := filepath.Join(f.dir, statestore.StoreDirName)
			const ns = "group/ckpt"
			for i := range 40 {
				f.mustPut(admin, ns, fmt.Sprintf("k%02d", i%10), docN(i))
			}
			if err := f.s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			good, _ := checkpoint.List(root)
			for i := range 40 {
				f.mustPut(admin, ns, fmt.Sprintf("k%02d", 10+i%10), docN(100+i))
			}
			journalFirst := f.journalFirst()
			var injected atomic.Int64
			restore := faults.SetDiskSync(func(path string) error {
				if c.fails(root, path) {
					injected.Add(1)
					return syscall.EIO
				}
				return nil
			})
			err := f.s.Checkpoint()
			restore()
			if injected.Load() == 0 {
				t.Fatal("no fsync failed: the case tests nothing")
			}
			se := wantCode(t, err, statestore.Storage, "checkpoint")
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("STORAGE error does not wrap the EIO: %v", err)
			}
			rev := f.s.Namespace(ns).Revision
			_, idx := wholeImage(t, f.s)
			if name := checkpoint.Name(idx); !strings.Contains(se.Message, name) {
				t.Fatalf("error %q does not name the checkpoint %s", se.Message, name)
			}
			after, _ := checkpoint.List(root)
			if fmt.Sprint(after) != fmt.Sprint(good) {
				t.Fatalf("images after the failed checkpoint: %v, want only the earlier %v", after, good)
			}
			if temps, _ := filepath.Glob(filepath.Join(root, ".checkpoint-*")); len(temps) != 0 {
				t.Fatalf("temporary files left: %v", temps)
			}
			if got := f.journalFirst(); got != journalFirst {
				t.Fatalf("journal starts at %d after the failed checkpoint, was %d", got, journalFirst)
			}
			// The store keeps serving, reads and writes.
			e := f.mustPut(admin, ns, "after", docN(999))
			if e.Revision != rev+1 {
				t.Fatalf("write after the failed checkpoint got revision %d, want %d", e.Revision, rev+1)
			}
			before, _ := wholeImage(t, f.s)
			f.reopen()
			if got := f.s.OpenReport().Checkpoint; got.Index != good[0].Index || len(got.Skipped) != 0 {
				t.Fatalf("reopen started from %+v, want the earlier image at %d", got, good[0].Index)
			}
			if got, _ := wholeImage(t, f.s); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatal("state after reopen differs from the state before")
			}
			// And a later checkpoint, with the disk healthy, succeeds.
			if err := f.s.Checkpoint(); err != nil {
				t.Fatalf("checkpoint after the disk recovered: %v", err)
			}
		})
	}
}

// TestBackgroundCheckpointFailureKeepsServing: automatic checkpoints that
// keep failing on fsync never fail or delay a write, and leave no image.
func TestBackgroundCheckpointFailureKeepsServing(t *testing.T) {
	t.Parallel()
	faults := &fault.Hooks{}
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes, o.Faults = 2048, faults })
	root := filepath.Join(f.dir, statestore.StoreDirName)
	var injected atomic.Int64
	defer faults.SetDiskSync(func(path string) error {
		if strings.HasPrefix(filepath.Base(path), "checkpoint-") {
			injected.Add(1)
			return syscall.EIO
		}
		return nil
	})()
	const ns = "group/bg"
	for i := range 200 {
		f.mustPut(admin, ns, fmt.Sprintf("k%02d", i%30), docN(i))
	}
	// Close waits for a checkpoint still running, so the count is final.
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f.s = nil
	if injected.Load() == 0 {
		t.Fatal("no background checkpoint ran: the test tests nothing")
	}
	if files, _ := checkpoint.List(root); len(files) != 0 {
		t.Fatalf("images written although every fsync failed: %v", files)
	}
	f.open()
	if got := f.s.Namespace(ns).Revision; got != 200 {
		t.Fatalf("revision %d after reopen, want 200", got)
	}
}
