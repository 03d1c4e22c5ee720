package fuzz

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fuzzcorpus"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// This file builds the real store every target is seeded from, and keeps
// the checked-in seed corpus in step with it.

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// t0 is the fake clock's start. Every lease the seed store grants ends
// after it, so a store opened at t0 purges nothing.
var t0 = time.UnixMilli(1_750_000_000_000)

// segmentSize is small so that the ~30 records of the seed store span
// several segment files.
const segmentSize = 2 << 10

// segFile is one journal segment file: the index of its first entry (its
// name) and its bytes.
type segFile struct {
	start uint64
	data  []byte
}

func (s segFile) name() string { return fmt.Sprintf("%020d", s.start) }

// recLoc is where an acknowledged record's wal entry (length prefix and
// frame) sits in the original journal.
type recLoc struct {
	seg        int    // index into realStore.segs
	name       string // segment file name
	start, end int    // entry byte range in that file
}

// realStore is everything the seed store left behind.
type realStore struct {
	segs   []segFile           // journal segments by start index
	recs   []*journal.Record   // acknowledged records; recs[i] has journal index i+1
	frames [][]byte            // recs[i] as framed on disk
	locs   []recLoc            // where recs[i] sits
	views  []*materialize.View // views[m] is the state after records 1..m
	ckpt   []byte              // checkpoint image written by Store.Checkpoint
	ckptH  checkpoint.Header   // its header
	ckptV  *materialize.View   // the view it decodes to
	docs   map[string][]byte   // documents the store accepted, by name
	lim    journal.Limits      // the store's journal decoder bounds
	ckLim  checkpoint.Limits   // the store's checkpoint decoder bounds
	check  *recovery.Checker
	byName map[string]int // segment index by file name
}

var realOnce = sync.OnceValues(buildRealStore)

// realData returns the seed store's files, built once per process.
func realData(tb testing.TB) *realStore {
	tb.Helper()
	r, err := realOnce()
	if err != nil {
		tb.Fatalf("building the seed store: %v", err)
	}
	return r
}

func buildRealStore() (_ *realStore, err error) {
	dir, err := os.MkdirTemp(scratchRoot(), "fuzz-seed-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	clk := clock.NewFake(t0)
	s, err := statestore.Open(statestore.Options{Dir: dir, Clock: clk, SegmentSize: segmentSize, CheckpointBytes: -1})
	if err != nil {
		return nil, err
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	ctx := context.Background()
	alice := statestore.Principal{ID: "alice"}
	bob := statestore.Principal{ID: "bob"}
	ops := statestore.Principal{ID: "ops", Admin: true}
	docs := map[string][]byte{}
	put := func(p statestore.Principal, ns, key string, size, seed int, ttl time.Duration) {
		if err != nil {
			return
		}
		doc := testdoc.MediaIntent(size, seed)
		docs[fmt.Sprintf("testdoc-%d-%d", size, seed)] = doc
		_, err = s.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc, TTL: ttl})
	}
	del := func(p statestore.Principal, ns, key string) {
		if err == nil {
			_, err = s.Delete(ctx, p, statestore.DeleteRequest{Namespace: ns, Key: key})
		}
	}
	// expire advances the clock and waits until the lease of ns/key has
	// been committed as an EXPIRE (by the expiry loop or by this Get).
	expire := func(d time.Duration, p statestore.Principal, ns, key string) {
		if err != nil {
			return
		}
		clk.Advance(d)
		if _, gerr := s.Get(ctx, p, ns, key); statestore.CodeOf(gerr) != statestore.NotFound {
			err = fmt.Errorf("get %s/%s after its lease: %v", ns, key, gerr)
		}
	}
	put(alice, "user/alice", "cam-1", 180, 1, 0)
	put(alice, "user/alice", "cam-2", 170, 2, 2*time.Second)
	put(ops, "group/ops", "front-door", 200, 3, 0)
	put(ops, "service/cams", "lobby", 160, 4, 3*time.Second)
	put(alice, "user/alice", "cam-1", 190, 5, 0)
	del(ops, "group/ops", "front-door")
	put(bob, "user/bob", "cam-9", 175, 7, 0)
	put(ops, "group/ops", "front-door", 165, 8, 0)
	expire(2500*time.Millisecond, alice, "user/alice", "cam-2") // t0+2.5s
	put(alice, "user/alice", "cam-3", 150, 10, 10*time.Second)
	put(ops, "service/cams", "lobby", 185, 11, 0) // replaces the leased entry: no lease left
	put(bob, "user/bob", "cam-9", 210, 12, 4*time.Second)
	del(alice, "user/alice", "cam-1")
	put(ops, "group/ops", "yard", 155, 14, 0)
	put(ops, "group/ops", "yard", 160, 15, 0)
	put(alice, "user/alice", "cam-1", 170, 16, 0)
	expire(5*time.Second, bob, "user/bob", "cam-9") // t0+7.5s
	put(bob, "user/bob", "cam-9", 150, 18, 0)
	del(ops, "service/cams", "lobby")
	put(ops, "service/cams", "lobby", 200, 20, time.Minute)
	put(ops, "group/ops", "front-door", 180, 21, 0)
	del(ops, "group/ops", "yard")
	put(alice, "user/alice", "cam-4", 160, 23, 0)
	put(alice, "user/alice", "cam-5", 150, 24, 2*time.Second)
	expire(11*time.Second, alice, "user/alice", "cam-3") // t0+18.5s: cam-5 and cam-3 in one batch
	put(alice, "user/alice", "cam-3", 170, 27, 0)
	del(bob, "user/bob", "cam-9")
	put(ops, "group/ops", "yard", 165, 29, 0)
	put(alice, "user/alice", "cam-2", 160, 30, time.Hour)
	put(alice, "user/alice", "cam-1", 200, 31, 0) // fills the third segment
	put(ops, "group/ops", "gate", 150, 32, 0)
	del(alice, "user/alice", "cam-4")
	if err != nil {
		return nil, err
	}
	if err := s.Checkpoint(); err != nil {
		return nil, err
	}
	err = s.Close()
	s = nil
	if err != nil {
		return nil, err
	}

	r := &realStore{docs: docs, byName: map[string]int{}}
	r.check, err = recovery.NewChecker(quota.Limits{}, nil)
	if err != nil {
		return nil, err
	}
	r.lim, r.ckLim = r.check.JournalLimits(), r.check.CheckpointLimits()
	root := filepath.Join(dir, statestore.StoreDirName)
	jdir := filepath.Join(root, "journal")
	segs, err := journal.ListSegments(jdir)
	if err != nil {
		return nil, err
	}
	for i, sg := range segs {
		b, err := os.ReadFile(sg.Path)
		if err != nil {
			return nil, err
		}
		r.segs = append(r.segs, segFile{start: sg.Start, data: b})
		r.byName[sg.Name()] = i
		ents, ok := parseEntries(b)
		if !ok {
			return nil, fmt.Errorf("segment %s does not parse", sg.Name())
		}
		for _, e := range ents {
			r.frames = append(r.frames, b[e[0]:e[1]][uvarintLen(b[e[0]:]):])
			r.locs = append(r.locs, recLoc{seg: i, name: sg.Name(), start: e[0], end: e[1]})
		}
	}
	err = journal.ReplayDir(jdir, 1, 0, r.lim, func(idx uint64, rec *journal.Record) error {
		if idx != uint64(len(r.recs)+1) {
			return fmt.Errorf("replayed index %d after %d records", idx, len(r.recs))
		}
		r.recs = append(r.recs, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(r.recs) != len(r.frames) {
		return nil, fmt.Errorf("%d records replayed, %d entries parsed", len(r.recs), len(r.frames))
	}
	r.views = []*materialize.View{materialize.New()}
	for i, rec := range r.recs {
		v := r.views[i].Clone()
		if err := r.check.Check(v, uint64(i+1), rec); err != nil {
			return nil, fmt.Errorf("record %d: %v", i+1, err)
		}
		if _, err := v.Apply(rec); err != nil {
			return nil, fmt.Errorf("record %d: %v", i+1, err)
		}
		r.views = append(r.views, v)
	}
	files, err := checkpoint.List(root)
	if err != nil || len(files) != 1 {
		return nil, fmt.Errorf("want one checkpoint, got %v (%v)", files, err)
	}
	if r.ckpt, err = os.ReadFile(files[0].Path); err != nil {
		return nil, err
	}
	if r.ckptH, r.ckptV, err = checkpoint.Decode(bytes.NewReader(r.ckpt), r.ckLim); err != nil {
		return nil, err
	}
	if r.ckptH.Index != uint64(len(r.recs)) {
		return nil, fmt.Errorf("checkpoint at index %d, journal holds %d records", r.ckptH.Index, len(r.recs))
	}
	if d := viewDiff(r.ckptV, r.views[len(r.recs)]); d != "" {
		return nil, fmt.Errorf("checkpoint disagrees with the journal: %s", d)
	}
	return r, nil
}

// TestSeedStore pins the shape the targets rely on: several segments, every
// record kind, and a checkpoint equal to the journal's replay.
func TestSeedStore(t *testing.T) {
	t.Parallel()
	r := realData(t)
	if n := len(r.segs); n < 3 || n > 6 {
		t.Errorf("seed journal has %d segments, want 3-6", n)
	}
	kinds := map[journal.Kind]int{}
	for _, rec := range r.recs {
		kinds[rec.Kind]++
	}
	if kinds[journal.KindPut] == 0 || kinds[journal.KindDelete] == 0 || kinds[journal.KindExpire] < 3 {
		t.Errorf("record kinds %v", kinds)
	}
	if n := len(r.locs); r.locs[n-1].seg != len(r.segs)-1 || r.locs[n-2].seg != len(r.segs)-1 {
		t.Errorf("the last segment does not hold the final two records")
	}
	t.Logf("%d records in %d segments; checkpoint %d bytes", len(r.recs), len(r.segs), len(r.ckpt))
}

// parseEntries splits a segment into wal entries ([start, end) byte
// ranges), reporting whether every byte belongs to a whole, non-empty entry.
// It checks no frame.
func parseEntries(b []byte) ([][2]int, bool) {
	var ents [][2]int
	for off := 0; off < len(b); {
		n, w := binary.Uvarint(b[off:])
		if w <= 0 || n == 0 || n > uint64(len(b)-off-w) {
			return ents, false
		}
		ents = append(ents, [2]int{off, off + w + int(n)})
		off += w + int(n)
	}
	return ents, true
}

func uvarintLen(b []byte) int {
	_, w := binary.Uvarint(b)
	return w
}

// scratchRoot is where targets put their temporary directories: tmpfs when
// there is one, since every journal and store open fsyncs.
func scratchRoot() string {
	if d := os.Getenv("FUZZ_SCRATCH"); d != "" {
		return d
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "fuzz-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

var scratchOnce = sync.OnceValue(scratchRoot)

// scratchDir makes a temporary directory removed when tb ends.
func scratchDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp(scratchOnce(), "fuzz-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// withDeadline runs fn in its own goroutine and fails the test if it has
// not returned within d: no input may make a target hang.
func withDeadline(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		t.Fatalf("%s did not finish within %v (hang)", what, d)
	}
}

// seedCorpus is every checked-in seed: target name -> file name -> values.
func seedCorpus(tb testing.TB) map[string]map[string][]any {
	return map[string]map[string][]any{
		"FuzzJournalOpen":      journalSeeds(tb),
		"FuzzRecordDecode":     recordSeeds(tb),
		"FuzzCheckpointLoad":   checkpointSeeds(tb),
		"FuzzDocumentValidate": documentSeeds(tb),
		"FuzzStoreModel":       apiSeeds(),
	}
}

// TestSeedCorpus keeps testdata/fuzz/<Target>/seed-* equal to what the seed
// store produces today: it fails when a file is missing or stale, and
// rewrites them all (removing stale seed-* files) with -update-corpus.
// Crashers the fuzzer saved there keep other names and are left alone.
func TestSeedCorpus(t *testing.T) {
	t.Parallel()
	// Seeds copied from package schema's fixtures follow that package's
	// edits; a difference there is only logged.
	report := func(name, format string, args ...any) {
		if strings.HasPrefix(name, "schema-") {
			t.Logf(format, args...)
		} else {
			t.Errorf(format, args...)
		}
	}
	for target, seeds := range seedCorpus(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateCorpus {
			old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, p := range old {
				os.Remove(p)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		names := make([]string, 0, len(seeds))
		for name := range seeds {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			path := filepath.Join(dir, "seed-"+name)
			want := fuzzcorpus.File(seeds[name]...)
			if *updateCorpus {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				report(name, "seed %s is missing or stale (%v); run go test -run TestSeedCorpus ./fuzz/ -update-corpus", path, err)
			}
		}
		if !*updateCorpus {
			have, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, p := range have {
				if name := filepath.Base(p)[len("seed-"):]; seeds[name] == nil {
					report(name, "stale seed %s; run go test -run TestSeedCorpus ./fuzz/ -update-corpus", p)
				}
			}
		}
	}
}

// addSeeds adds seeds to f in a stable order.
func addSeeds(f *testing.F, seeds map[string][]any) {
	names := make([]string, 0, len(seeds))
	for name := range seeds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f.Add(seeds[name]...)
	}
}
