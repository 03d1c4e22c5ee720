package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// waitPrewriteIdle blocks until the pre-writer finished a step after which
// it has nothing more to do, and returns the journal's stats then. j must
// have seams (openJournalOpts gives it some).
func waitPrewriteIdle(t *testing.T, j *Journal) Stats {
	t.Helper()
	if j.opts.seams == nil {
		t.Fatal("waitPrewriteIdle needs a journal opened with seams")
	}
	idle := make(chan struct{}, 1)
	defer j.opts.seams.prewriteStepped.set(func(more bool) {
		if !more {
			select {
			case idle <- struct{}{}:
			default:
			}
		}
	})()
	j.mu.Lock()
	j.pre.end = min(j.pre.end, j.pre.synced) // nothing half done: a step must run
	j.mu.Unlock()
	j.mu.Lock()
	j.kickPrewriterForTest()
	j.mu.Unlock()
	<-idle
	return j.Stats()
}

// kickPrewriterForTest wakes the pre-writer whatever is left.
func (j *Journal) kickPrewriterForTest() {
	select {
	case j.pre.kick <- struct{}{}:
	default:
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPrewriteOverwritesInsteadOfAppending pins the point of pre-writing:
// once the background has prepared the tail, records land inside the file's
// existing size (their fdatasync carries no size change), Stats reports the
// space left, and Close trims the zeros so the closed files hold records
// only and the next open has nothing to trim.
func TestPrewriteOverwritesInsteadOfAppending(t *testing.T) {
	t.Parallel()
	const seg = 512 << 10
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, seg)
	if _, err := j.Append(records(1, 3)); err != nil {
		t.Fatal(err)
	}
	st := waitPrewriteIdle(t, j)
	tail := lastSegment(t, dir).Path
	size := fileSize(t, tail)
	if size != seg || st.Prewritten != seg-j.tailBytes {
		t.Fatalf("after pre-writing: tail file %d bytes (want %d), Prewritten %d (want %d)", size, seg, st.Prewritten, seg-j.tailBytes)
	}
	before := j.tailBytes
	if _, err := j.Append(records(4, 20)); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, tail); got != size {
		t.Fatalf("appending into pre-written space changed the file size from %d to %d", size, got)
	}
	if got := j.Stats().Prewritten; got != st.Prewritten-(j.tailBytes-before) {
		t.Fatalf("Prewritten %d after filling %d bytes of %d", got, j.tailBytes-before, st.Prewritten)
	}
	records := j.tailBytes
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, tail); got != records {
		t.Fatalf("closed tail holds %d bytes, want its %d bytes of records", got, records)
	}
	j, cut := openJournal(t, dir, seg)
	defer j.Close()
	if cut != nil || j.Stats().Trimmed != 0 {
		t.Fatalf("reopen after a clean close: cut %v, trimmed %d", cut, j.Stats().Trimmed)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, recordsFrom(1, 23)) {
		t.Fatalf("replay returned %d records, want 23", len(got))
	}
}

func recordsFrom(from, n int) []*Record { return records(from, n) }

// TestSealedSegmentsHoldRecordsOnly writes through many segment cycles with
// the pre-writer running and checks that every sealed segment ends exactly
// at its last record: pre-writing never passes the segment size, so the
// entry that seals a segment covers every zero.
func TestSealedSegmentsHoldRecordsOnly(t *testing.T) {
	t.Parallel()
	const seg = 4 << 10
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, seg)
	defer j.Close()
	n := 0
	for i := 0; i < 60; i++ {
		if _, err := j.Append(records(n+1, 1+i%4)); err != nil {
			t.Fatal(err)
		}
		n += 1 + i%4
		if i%7 == 0 {
			waitPrewriteIdle(t, j)
		}
	}
	segs, err := ListSegments(dir)
	if err != nil || len(segs) < 4 {
		t.Fatalf("want several segments, got %d (%v)", len(segs), err)
	}
	for _, s := range segs[:len(segs)-1] {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := scan(data, DefaultLimits, nil)
		if res.bad != nil || res.zeros != 0 || res.end != int64(len(data)) {
			t.Fatalf("sealed segment %s: %d bytes, records end at %d, %d zero bytes, bad %v", s.Name(), len(data), res.end, res.zeros, res.bad)
		}
	}
	if err := ReplayDir(dir, 1, uint64(n), DefaultLimits, func(uint64, *Record) error { return nil }); err != nil {
		t.Fatalf("replay of the live journal: %v", err)
	}
}

// TestCrashStatesOfPrewriting copies a live journal's files at moments a
// crash could freeze them and opens the copy: with the tail pre-written (a
// kill between pre-writes), with a chunk only partly written (a kill during
// pre-writing, or a trim that shortened the zeros but not yet to the
// records), and with a record written over zeros whose data never reached
// the disk. Every acknowledged record must be there; zeros are trimmed
// without a TailCut or a quarantine copy; zeros where the floor says
// records were acknowledged refuse to open and change nothing.
func TestCrashStatesOfPrewriting(t *testing.T) {
	t.Parallel()
	const seg = 256 << 10
	tests := []struct {
		name    string
		damage  func(data []byte, recordsEnd, final int64) []byte
		keep    int  // records the reopened journal holds, of 12
		refuse  bool // the floor is 12: Open must refuse
		trimmed bool
	}{
		{"pre-written tail", func(d []byte, _, _ int64) []byte { return d }, 12, false, true},
		{"pre-write cut mid-chunk", func(d []byte, end, _ int64) []byte { return d[:end+4097] }, 12, false, true},
		{"trim interrupted", func(d []byte, end, _ int64) []byte { return d[:end+1] }, 12, false, true},
		{"already trimmed", func(d []byte, end, _ int64) []byte { return d[:end] }, 12, false, false},
		{"unacknowledged record lost over zeros", func(d []byte, end, final int64) []byte {
			clear(d[final:end])
			return d
		}, 11, false, true},
		{"acknowledged record lost over zeros", func(d []byte, end, final int64) []byte {
			clear(d[final:end])
			return d
		}, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := filepath.Join(t.TempDir(), "live")
			j, _ := openJournal(t, live, seg)
			if _, err := j.Append(records(1, 12)); err != nil {
				t.Fatal(err)
			}
			waitPrewriteIdle(t, j)
			src := lastSegment(t, live)
			data, err := os.ReadFile(src.Path)
			if err != nil {
				t.Fatal(err)
			}
			end := j.tailBytes
			offs := entryOffsets(t, src.Path)
			j.Close()
			if int64(len(data)) <= end {
				t.Fatalf("live tail holds %d bytes, no pre-written space after %d", len(data), end)
			}
			crashed := filepath.Join(t.TempDir(), "crashed", "journal")
			if err := os.MkdirAll(crashed, 0o755); err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(data, end, offs[len(offs)-1])
			path := filepath.Join(crashed, src.Name())
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := SetFloor(crashed, uint64(tc.keep)); err != nil {
				t.Fatal(err)
			}
			if tc.refuse {
				if err := SetFloor(crashed, 12); err != nil {
					t.Fatal(err)
				}
				_, _, err := Open(crashed, Options{SegmentSize: seg})
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Index != 12 {
					t.Fatalf("open over zeros where record 12 was acknowledged: %v, want corruption at index 12", err)
				}
				if got, _ := os.ReadFile(path); !reflect.DeepEqual(got, damaged) {
					t.Fatal("a refused open changed the segment")
				}
				return
			}
			j, cut := openJournal(t, crashed, seg)
			defer j.Close()
			if cut != nil {
				t.Fatalf("zeros reported as a torn tail: %v", cut)
			}
			if got := j.Stats().Trimmed; (got > 0) != tc.trimmed {
				t.Fatalf("trimmed %d bytes, want trimmed=%v", got, tc.trimmed)
			}
			if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(crashed), "quarantine")); len(ents) != 0 {
				t.Fatalf("quarantine holds %d files after a zero trim", len(ents))
			}
			if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, tc.keep)) {
				t.Fatalf("replay returned %d records, want %d", len(got), tc.keep)
			}
			if _, err := j.Append(records(tc.keep+1, 1)); err != nil {
				t.Fatalf("append after the trim: %v", err)
			}
		})
	}
}

// TestSealedSegmentEndingInZerosIsCorrupt: pre-writing never leaves zeros
// in a sealed segment, so zeros there are damage, named by segment and
// index, never trimmed.
func TestSealedSegmentEndingInZerosIsCorrupt(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 40, 1000)
	segs, _ := ListSegments(dir)
	if len(segs) < 2 {
		t.Fatal("want at least two segments")
	}
	first := segs[0]
	data, _ := os.ReadFile(first.Path)
	if err := os.WriteFile(first.Path, append(data, make([]byte, 300)...), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ReplayDir(dir, 1, uint64(len(recs)), DefaultLimits, func(uint64, *Record) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != first.Name() || ce.Index != segs[1].Start {
		t.Fatalf("replay over a sealed segment ending in zeros: %v, want corruption in %s at index %d", err, first.Name(), segs[1].Start)
	}
}

// TestPrewriteSyncFailureRecovers: a failed fdatasync of pre-written zeros
// may have cost dirty pages of records in the same file, so the journal
// treats it as a failed commit: the next write recovers (cut back to the
// last acknowledged record, reopen) and every acknowledged record stays.
func TestPrewriteSyncFailureRecovers(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 512<<10)
	if _, err := j.Append(records(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// The reopened journal's pre-writer starts at once, and its sync fails.
	faults := &fault.Hooks{}
	restore := faults.SetPrewriteSync(func(string) error { return syscall.EIO })
	j, _ = openJournalOpts(t, dir, Options{SegmentSize: 512 << 10, Faults: faults})
	defer j.Close()
	st := waitPrewriteIdle(t, j)
	restore()
	if st.PrewriteFailures != 1 || st.Prewritten != 0 {
		t.Fatalf("after one failed pre-write sync: PrewriteFailures %d, Prewritten %d", st.PrewriteFailures, st.Prewritten)
	}
	if _, err := j.Append(records(6, 2)); err != nil {
		t.Fatalf("append after a failed pre-write sync: %v", err)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, 7)) {
		t.Fatalf("replay returned %d records, want 7", len(got))
	}
	if st := waitPrewriteIdle(t, j); st.Prewritten == 0 {
		t.Fatal("pre-writing did not resume after the recovery")
	}
}

// TestPrewriterRestsUntilNewSegmentSynced: the write that opens a new
// segment does not wake the pre-writer, nor does any write before that
// segment's first sync returns; that sync does. (A journal opened without
// pre-writing gets a kick channel nobody drains, so every wake-up stays
// visible.)
func TestPrewriterRestsUntilNewSegmentSynced(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _, err := Open(dir, Options{SegmentSize: 4096, NoPrewrite: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	kicks := make(chan struct{}, 1)
	j.mu.Lock()
	j.pre.kick = kicks
	j.mu.Unlock()
	kicked := func() bool {
		select {
		case <-kicks:
			return true
		default:
			return false
		}
	}
	next := uint64(1)
	write := func() (cycled bool) {
		segs, _ := ListSegments(dir)
		mustWrite(t, j, []*Record{testRecord(int(next))}, next)
		next++
		after, _ := ListSegments(dir)
		return len(after) > len(segs)
	}
	if write(); !kicked() {
		t.Fatal("a write inside the segment did not wake the pre-writer")
	}
	for !write() {
		if !kicked() {
			t.Fatal("a write inside the segment did not wake the pre-writer")
		}
	}
	if kicked() {
		t.Fatal("the write that opened a new segment woke the pre-writer")
	}
	if write() || kicked() {
		t.Fatal("a write before the new segment's first sync woke the pre-writer")
	}
	if err := j.Sync(next - 1); err != nil {
		t.Fatal(err)
	}
	if !kicked() {
		t.Fatal("the new segment's first sync did not wake the pre-writer")
	}
}

// TestNewSegmentMarkerOffCommitPath: the acknowledged-floor marker that a
// new segment's first sync raises is written in the background: that Sync
// returns while the marker's fdatasync is held, and the marker then holds
// the index the sync acknowledged (only ever an acknowledged one).
func TestNewSegmentMarkerOffCommitPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _, err := Open(dir, Options{SegmentSize: 4096, NoPrewrite: true, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// Removed before Close, whose marker sync would otherwise wait here.
	defer faults.SetSync(func(path string) error {
		if filepath.Base(path) == FloorFile {
			entered <- struct{}{}
			<-release
		}
		return nil
	})()
	next := uint64(1)
	for {
		segs, _ := ListSegments(dir)
		mustWrite(t, j, []*Record{testRecord(int(next))}, next)
		after, _ := ListSegments(dir)
		if len(after) > len(segs) {
			break
		}
		if err := j.Sync(next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	// The batch that sealed the old segment is durable already (tidwall/wal
	// fsynced it); the sync covering the new segment's first record raises
	// the marker.
	next++
	mustWrite(t, j, []*Record{testRecord(int(next))}, next)
	synced := make(chan error, 1)
	go func() { synced <- j.Sync(next) }()
	<-entered                        // the marker's fdatasync is held...
	if err := <-synced; err != nil { // ...and the commit's Sync returns regardless
		t.Fatal(err)
	}
	if j.LastIndex() != next {
		t.Fatalf("last index %d, want %d", j.LastIndex(), next)
	}
	close(release)
	j.floorWG.Wait()
	fl, err := ReadFloor(dir)
	if err != nil || fl.Index != next {
		t.Fatalf("marker %+v (%v) after the background raise, want index %d", fl, err, next)
	}
}

// TestWritesBelowZerosBeingWrittenGoOn: the pre-writer writes its zeros
// without the lock every Write takes, so a batch whose records stay below
// them is written and synced while that write(2) is under way; a batch that
// would reach them waits for it to end (zeros must never land on a record),
// and everything written reads back after a reopen.
func TestWritesBelowZerosBeingWrittenGoOn(t *testing.T) {
	t.Parallel()
	const seg = 4 << 20
	g := newGate()
	var start int64
	s := &seams{}
	// Before Open: the pre-writer starts with it.
	s.writeZeros.set(func(f *os.File, zeros []byte, off int64) error {
		if off > 0 { // the first chunk is written before any record
			g.hold(func() { start = off })
		}
		return writeZerosAt(f, zeros, off)
	})
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: seg, seams: s})
	defer j.Close()
	defer g.open() // before Close, which waits for the pre-writer
	<-g.entered
	if start != prewriteChunk {
		t.Fatalf("second chunk of zeros starts at %d, want %d", start, prewriteChunk)
	}

	// Below the zeros being written: goes on (this Append would hang if the
	// zero write held the lock).
	if _, err := j.Append(records(1, 3)); err != nil {
		t.Fatal(err)
	}
	// A batch reaching them waits.
	var big []*Record
	for n := 4; j.tailBytes+batchSize(big) <= start; n++ {
		r := testRecord(n)
		r.Document = bytes.Repeat([]byte("y"), 4000)
		big = append(big, r)
	}
	done := make(chan error, 1)
	go func() {
		_, err := j.Append(big)
		done <- err
	}()
	untilBlockedIn(t, "journal.(*Journal).waitPrewriteBelow(", "sync.Cond.Wait", done, "a batch reaching the zeros being written did not wait for them")
	g.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := append(records(1, 3), big...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openJournal(t, dir, seg)
	defer j.Close()
	if got := replayAll(t, j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay after the reopen returned %d records, want %d", len(got), len(want))
	}
}

// batchSize is the bytes recs take in a segment.
func batchSize(recs []*Record) int64 {
	var n int64
	for _, r := range recs {
		b, err := r.AppendFrame(nil)
		if err != nil {
			panic(err)
		}
		n += int64(uvarintLen(uint64(len(b))) + len(b))
	}
	return n
}

// TestPrewriteChunkFollowsTheCommitRate: zeros are written in chunks of
// prewriteChunk while batches are small (a lone writer's latency is bounded
// by what one chunk adds), and of prewriteRounds batches, up to
// prewriteAhead, once batches are large, so a fast writer's commits meet a
// size change once per stretch of 16 batches instead of every few.
func TestPrewriteChunkFollowsTheCommitRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		batch int
		want  int64
	}{
		{0, prewriteChunk},
		{2 << 10, prewriteChunk},
		{16 << 10, prewriteChunk},
		{32 << 10, 512 << 10},
		{100 << 10, prewriteAhead},
		{8 << 20, prewriteAhead},
	} {
		if got := prewriteChunkFor(c.batch); got != c.want {
			t.Errorf("prewriteChunkFor(%d) = %d, want %d", c.batch, got, c.want)
		}
	}

	var mu sync.Mutex
	var sizes []int
	s := &seams{}
	s.writeZeros.set(func(f *os.File, zeros []byte, off int64) error {
		mu.Lock()
		sizes = append(sizes, len(zeros))
		mu.Unlock()
		return writeZerosAt(f, zeros, off)
	})
	taken := func() []int {
		mu.Lock()
		defer mu.Unlock()
		s := sizes
		sizes = nil
		return s
	}
	const seg = 8 << 20
	j, _ := openJournalOpts(t, filepath.Join(t.TempDir(), "journal"), Options{SegmentSize: seg, seams: s})
	defer j.Close()
	waitPrewriteIdle(t, j)
	taken()

	// writeUntil writes batches of n records of size-byte documents until
	// the pre-writer has been kicked (less than half of prewriteAhead
	// left), then waits for it to finish and returns its zero writes.
	next := uint64(1)
	writeUntil := func(n, size int) []int {
		t.Helper()
		for start := j.tailBytes; j.tailBytes-start < prewriteAhead/2+1; {
			batch := make([]*Record, n)
			for i := range batch {
				batch[i] = testRecord(int(next) + i)
				batch[i].Document = bytes.Repeat([]byte("z"), size)
			}
			if _, err := j.Write(batch, next); err != nil {
				t.Fatal(err)
			}
			next += uint64(n)
		}
		if err := j.Sync(next - 1); err != nil {
			t.Fatal(err)
		}
		waitPrewriteIdle(t, j)
		return taken()
	}
	small := writeUntil(1, 2000)
	if len(small) == 0 || slices.Max(small) != prewriteChunk {
		t.Fatalf("with 2 KB batches the zero writes were %v bytes, want chunks of %d", small, prewriteChunk)
	}
	large := writeUntil(25, 4000)
	if len(large) == 0 || slices.Max(large) <= prewriteChunk {
		t.Fatalf("with 100 KB batches the zero writes were %v bytes, want one larger than %d", large, prewriteChunk)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, _ := openJournal(t, j.Dir(), seg)
	defer j2.Close()
	if got := replayAll(t, j2); uint64(len(got)) != next-1 {
		t.Fatalf("replay after the reopen returned %d records, want %d", len(got), next-1)
	}
}

// TestPrewriteWriteFailureRests: a zero write that fails (a full disk, say)
// costs no record: pre-writing stops for that segment, whatever wakes the
// pre-writer afterwards, commits append as tidwall/wal alone would, and
// the next segment is pre-written again.
func TestPrewriteWriteFailureRests(t *testing.T) {
	t.Parallel()
	const seg = 16 << 10
	var (
		mu     sync.Mutex
		writes = map[string]int{} // zero writes tried, by segment file
		full   = true
	)
	s := &seams{}
	s.writeZeros.set(func(f *os.File, zeros []byte, off int64) error {
		mu.Lock()
		defer mu.Unlock()
		writes[filepath.Base(f.Name())]++
		if full {
			return syscall.ENOSPC
		}
		return writeZerosAt(f, zeros, off)
	})
	tried := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return writes[name]
	}
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: seg, seams: s})
	defer j.Close()
	first := lastSegment(t, dir)
	if st := waitPrewriteIdle(t, j); st.PrewriteFailures != 1 || st.Prewritten != 0 {
		t.Fatalf("after a failed zero write: PrewriteFailures %d, Prewritten %d; want 1 and 0", st.PrewriteFailures, st.Prewritten)
	}
	next := 1
	for range 3 {
		if _, err := j.Append(records(next, 5)); err != nil {
			t.Fatalf("append after a failed zero write: %v", err)
		}
		next += 5
		waitPrewriteIdle(t, j)
	}
	if n := tried(first.Name()); n != 1 {
		t.Fatalf("%d zero writes tried on the segment where one failed, want that one only", n)
	}
	j.mu.Lock()
	recordBytes := j.tailBytes
	j.mu.Unlock()
	if size := fileSize(t, first.Path); size != recordBytes {
		t.Fatalf("tail file is %d bytes, want its %d bytes of records only", size, recordBytes)
	}

	mu.Lock()
	full = false
	mu.Unlock()
	for lastSegment(t, dir).Start == first.Start {
		if _, err := j.Append(records(next, 5)); err != nil {
			t.Fatal(err)
		}
		next += 5
	}
	if st := waitPrewriteIdle(t, j); st.Prewritten == 0 || tried(lastSegment(t, dir).Name()) == 0 {
		t.Fatalf("the next segment was not pre-written: Prewritten %d", st.Prewritten)
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, next-1)) {
		t.Fatalf("replay returned %d records, want %d", len(got), next-1)
	}
}

// TestNoPrewriteKeepsTailAppendOnly: with Options.NoPrewrite no pre-writer
// runs, no zero is written, and the tail file only ever holds records.
func TestNoPrewriteKeepsTailAppendOnly(t *testing.T) {
	t.Parallel()
	var zeroWrites atomic.Int64
	s := &seams{}
	s.writeZeros.set(func(f *os.File, zeros []byte, off int64) error {
		zeroWrites.Add(1)
		return writeZerosAt(f, zeros, off)
	})
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 4096, NoPrewrite: true, seams: s})
	defer j.Close()
	if j.pre.stop != nil {
		t.Fatal("a pre-writer was started under NoPrewrite")
	}
	for i := 1; i <= 60; i += 3 {
		if _, err := j.Append(records(i, 3)); err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		recordBytes := j.tailBytes
		j.mu.Unlock()
		if size := fileSize(t, lastSegment(t, dir).Path); size != recordBytes || j.Stats().Prewritten != 0 {
			t.Fatalf("after record %d: tail file %d bytes for %d bytes of records, Prewritten %d", i+2, size, recordBytes, j.Stats().Prewritten)
		}
	}
	if n := zeroWrites.Load(); n != 0 {
		t.Fatalf("%d zero writes under NoPrewrite", n)
	}
}
