package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
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
	s.writeZeros.set(func(f *os.File, n, off int64) error {
		if off > 0 { // the first chunk is written before any record
			g.hold(func() { start = off })
		}
		return writeZerosAt(f, n, off)
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
	s.writeZeros.set(func(f *os.File, n, off int64) error {
		mu.Lock()
		sizes = append(sizes, int(n))
		mu.Unlock()
		return writeZerosAt(f, n, off)
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

// TestNoPrewriteKeepsTailAppendOnly: with Options.NoPrewrite no pre-writer
// runs, no zero is written, and the tail file only ever holds records.
func TestNoPrewriteKeepsTailAppendOnly(t *testing.T) {
	t.Parallel()
	var zeroWrites atomic.Int64
	s := &seams{}
	s.writeZeros.set(func(f *os.File, n, off int64) error {
		zeroWrites.Add(1)
		return writeZerosAt(f, n, off)
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

// TestWriteZerosAt: n zero bytes land at off, whatever n is against the
// shared 64 KiB block, and the bytes either side stay as they were.
func TestWriteZerosAt(t *testing.T) {
	t.Parallel()
	block := int64(len(zeros))
	for _, n := range []int64{0, 1, block - 1, block, block + 1, 3*block + 7, prewriteAhead} {
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			t.Parallel()
			const off = 100
			f, err := os.Create(filepath.Join(t.TempDir(), "tail"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			before := bytes.Repeat([]byte{0xA5}, int(off+n+100))
			if _, err := f.Write(before); err != nil {
				t.Fatal(err)
			}
			if err := writeZerosAt(f, n, off); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(before)
			clear(want[off : off+n])
			if !bytes.Equal(got, want) {
				t.Errorf("writeZerosAt(%d, %d) left %d bytes, not the expected %d with zeros at [%d, %d)", n, off, len(got), len(want), off, off+n)
			}
		})
	}
}
