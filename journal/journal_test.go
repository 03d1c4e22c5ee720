package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

func testRecord(i int) *Record {
	return &Record{Kind: KindPut, Namespace: "user/alice", Key: fmt.Sprintf("k%03d", i%7), Revision: uint64(i), TimeMs: int64(i),
		Schema: "keeppeek.media-intent.v1", Owner: "alice", CreatedMs: 1, UpdatedMs: int64(i),
		Document: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), i%40)))}
}

func openJournal(t *testing.T, dir string, segSize int) (*Journal, *TailCut) {
	t.Helper()
	return openJournalOpts(t, dir, Options{SegmentSize: segSize})
}

// openJournalOpts opens the journal in dir with opts, giving it seams of
// its own when opts names none, so a test may install one after Open.
func openJournalOpts(t *testing.T, dir string, opts Options) (*Journal, *TailCut) {
	t.Helper()
	if opts.seams == nil {
		opts.seams = &seams{}
	}
	j, cut, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return j, cut
}

// writeJournal creates a journal of n records in several segments and
// returns its directory and the records.
func writeJournal(t *testing.T, n, segSize int) (string, []*Record) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, segSize)
	var recs []*Record
	for i := 1; i <= n; {
		var batch []*Record
		for k := 0; k < 1+i%3 && i <= n; k++ {
			batch = append(batch, testRecord(i))
			i++
		}
		first, err := j.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		if first != uint64(len(recs)+1) {
			t.Fatalf("first index %d, want %d", first, len(recs)+1)
		}
		recs = append(recs, batch...)
	}
	// Tail tests need a final record with another record before it in the
	// same segment.
	for len(entryOffsets(t, lastSegment(t, dir).Path)) < 2 {
		r := testRecord(len(recs) + 1)
		if _, err := j.Append([]*Record{r}); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, recs
}

// crashedBeforeLastAck puts the acknowledged-floor marker where a crash
// during the final record's append would have left it: below that record,
// which was written but never acknowledged.
func crashedBeforeLastAck(t *testing.T, dir string, recs []*Record) {
	t.Helper()
	if err := SetFloor(dir, uint64(len(recs)-1)); err != nil {
		t.Fatal(err)
	}
}

func replayAll(t *testing.T, j *Journal) []*Record {
	t.Helper()
	var got []*Record
	if err := j.Replay(j.FirstIndex(), func(idx uint64, r *Record) error {
		if idx != uint64(len(got)+1) {
			return fmt.Errorf("index %d after %d records", idx, len(got))
		}
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return got
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "journal")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// entryOffsets returns the byte offset of each entry in a segment file.
func entryOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	res, _ := scan(data, DefaultLimits, func(i int, off int64, r *Record) error { offs = append(offs, off); return nil })
	if res.bad != nil {
		t.Fatalf("segment %s already damaged at %d: %s", path, res.bad.offset, res.bad.reason)
	}
	return offs
}

func lastSegment(t *testing.T, dir string) Segment {
	t.Helper()
	segs, err := ListSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	return segs[len(segs)-1]
}

func TestAppendReplayReopen(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 60, 700)
	segs, _ := ListSegments(dir)
	if len(segs) < 4 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	j, cut := openJournal(t, dir, 700)
	defer j.Close()
	if cut != nil {
		t.Fatalf("clean journal reported a cut: %v", cut)
	}
	if j.LastIndex() != 60 || j.FirstIndex() != 1 {
		t.Fatalf("range %d..%d", j.FirstIndex(), j.LastIndex())
	}
	if got := replayAll(t, j); !reflect.DeepEqual(got, recs) {
		t.Fatal("replayed records differ from appended ones")
	}
	if first, err := j.Append([]*Record{testRecord(61)}); err != nil || first != 61 {
		t.Fatalf("append after reopen: %d %v", first, err)
	}
}

// TestTornTailEveryOffset cuts the last segment at every byte inside its
// final record: open must drop exactly that record, report the cut, and
// keep every earlier record.
func TestTornTailEveryOffset(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 23, 900)
	crashedBeforeLastAck(t, dir, recs)
	last := lastSegment(t, dir)
	offs := entryOffsets(t, last.Path)
	if len(offs) < 2 {
		t.Fatalf("last segment holds %d records; the test wants at least 2", len(offs))
	}
	final := offs[len(offs)-1]
	for cutAt := final + 1; cutAt < last.Size; cutAt++ {
		d := copyDir(t, dir)
		if err := os.Truncate(filepath.Join(d, last.Name()), cutAt); err != nil {
			t.Fatal(err)
		}
		j, cut := openJournal(t, d, 900)
		if cut == nil || cut.Offset != final || cut.Index != uint64(len(recs)) || cut.Bytes != cutAt-final {
			t.Fatalf("cut at %d: report %+v, want offset %d index %d bytes %d", cutAt, cut, final, len(recs), cutAt-final)
		}
		if _, err := os.Stat(cut.SavedAs); err != nil {
			t.Fatalf("damaged segment not kept: %v", err)
		}
		if got := replayAll(t, j); !reflect.DeepEqual(got, recs[:len(recs)-1]) {
			t.Fatalf("cut at %d: replay lost more than the torn record", cutAt)
		}
		if first, err := j.Append([]*Record{testRecord(99)}); err != nil || first != uint64(len(recs)) {
			t.Fatalf("append after repair: %d %v", first, err)
		}
		j.Close()
	}
}

// TestZeroFilledTail pins how Open reads zeros at the end of the last
// segment. A zero run from an entry boundary to the end of the file is what
// pre-writing leaves (or records whose data never reached the disk): it is
// trimmed without a TailCut or a quarantine copy. Zeros that start inside
// an entry are a torn write: cut, reported, and quarantined.
func TestZeroFilledTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		damage  func(data []byte, final int64) []byte
		cut     bool // a TailCut is reported (else a silent trim)
		trimmed func(data []byte, final int64) int64
		keep    func(n int) int
	}{
		{"zeros appended after the last record", func(d []byte, _ int64) []byte { return append(d, make([]byte, 4096)...) },
			false, func([]byte, int64) int64 { return 4096 }, func(n int) int { return n }},
		{"final record zeroed", func(d []byte, final int64) []byte {
			clear(d[final:])
			return d
		}, false, func(d []byte, final int64) int64 { return int64(len(d)) - final }, func(n int) int { return n - 1 }},
		{"final record half zeroed plus zero page", func(d []byte, final int64) []byte {
			clear(d[final+int64(len(d[final:])/2):])
			return append(d, make([]byte, 512)...)
		}, true, nil, func(n int) int { return n - 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, recs := writeJournal(t, 17, 1000)
			crashedBeforeLastAck(t, dir, recs)
			last := lastSegment(t, dir)
			offs := entryOffsets(t, last.Path)
			final := offs[len(offs)-1]
			data, _ := os.ReadFile(last.Path)
			damaged := tc.damage(data, final)
			if err := os.WriteFile(last.Path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			quarantine := filepath.Join(filepath.Dir(dir), "quarantine")
			j, cut := openJournal(t, dir, 1000)
			defer j.Close()
			kept := tc.keep(len(recs))
			switch {
			case tc.cut && (cut == nil || cut.Index != uint64(kept+1)):
				t.Fatalf("cut %+v, want one at index %d", cut, kept+1)
			case !tc.cut && cut != nil:
				t.Fatalf("zero run reported as a torn tail: %v", cut)
			case !tc.cut && j.Stats().Trimmed != tc.trimmed(damaged, final):
				t.Fatalf("trimmed %d bytes, want %d", j.Stats().Trimmed, tc.trimmed(damaged, final))
			}
			if ents, _ := os.ReadDir(quarantine); (len(ents) > 0) != tc.cut {
				t.Fatalf("quarantine holds %d files, want a copy only for a torn tail", len(ents))
			}
			if got := replayAll(t, j); !reflect.DeepEqual(got, recs[:kept]) {
				t.Fatalf("replay kept %d records, want %d", len(got), kept)
			}
		})
	}
}

// TestFlippedByteInLastSegment flips bytes of every record but the final
// one of the last segment: that is corruption, not a torn tail, and Open
// must name the index and offset.
func TestFlippedByteInLastSegment(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 23, 900)
	last := lastSegment(t, dir)
	offs := entryOffsets(t, last.Path)
	for i, off := range offs[:len(offs)-1] {
		next := offs[i+1]
		for _, at := range []int64{off, off + 1, off + 5, (off + next) / 2, next - 1} {
			d := copyDir(t, dir)
			p := filepath.Join(d, last.Name())
			data, _ := os.ReadFile(p)
			data[at] ^= 0x5A
			os.WriteFile(p, data, 0o644)
			_, _, err := Open(d, Options{SegmentSize: 900})
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: want *CorruptError, got %v", at, err)
			}
			if ce.Index != last.Start+uint64(i) || ce.Offset != off || ce.Segment != last.Name() {
				t.Fatalf("flip at %d: error names index %d offset %d segment %s, want %d %d %s (%v)",
					at, ce.Index, ce.Offset, ce.Segment, last.Start+uint64(i), off, last.Name(), err)
			}
		}
	}
}

func TestFlippedByteInSealedSegment(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 40, 700)
	segs, _ := ListSegments(dir)
	sealed := segs[1]
	offs := entryOffsets(t, sealed.Path)
	for i, off := range offs {
		for _, delta := range []int64{0, 3, 12} {
			d := copyDir(t, dir)
			p := filepath.Join(d, sealed.Name())
			data, _ := os.ReadFile(p)
			data[off+delta] ^= 0x01
			os.WriteFile(p, data, 0o644)
			j, _, err := Open(d, Options{SegmentSize: 700})
			if err != nil {
				t.Fatalf("open reads only the tail, but failed: %v", err)
			}
			err = j.Replay(1, func(uint64, *Record) error { return nil })
			j.Close()
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("flip at %d: want *CorruptError, got %v", off+delta, err)
			}
			if ce.Index != sealed.Start+uint64(i) || ce.Offset != off || ce.Segment != sealed.Name() {
				t.Fatalf("flip at %d: names index %d offset %d in %s, want %d %d in %s", off+delta, ce.Index, ce.Offset, ce.Segment, sealed.Start+uint64(i), off, sealed.Name())
			}
		}
	}
	// A sealed segment cut short is corruption too, never a torn tail.
	d := copyDir(t, dir)
	os.Truncate(filepath.Join(d, sealed.Name()), sealed.Size-3)
	j, _ := openJournal(t, d, 700)
	defer j.Close()
	if err := j.Replay(1, func(uint64, *Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated sealed segment: %v", err)
	}
}

func TestMissingAndDuplicatedSegments(t *testing.T) {
	t.Parallel()
	dir, _ := writeJournal(t, 40, 700)
	segs, _ := ListSegments(dir)
	t.Run("missing middle segment", func(t *testing.T) {
		d := copyDir(t, dir)
		os.Remove(filepath.Join(d, segs[1].Name()))
		j, _ := openJournal(t, d, 700)
		defer j.Close()
		err := j.Replay(1, func(uint64, *Record) error { return nil })
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Segment != segs[0].Name() || ce.Index != segs[1].Start {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("segment duplicated under a later name", func(t *testing.T) {
		d := copyDir(t, dir)
		data, _ := os.ReadFile(segs[1].Path)
		os.WriteFile(filepath.Join(d, segmentName(segs[1].Start+1)), data, 0o644)
		_, _, err := Open(d, Options{SegmentSize: 700})
		if err == nil {
			j, _ := openJournal(t, d, 700)
			err = j.Replay(1, func(uint64, *Record) error { return nil })
			j.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestRecoverDropsFailedBatch simulates a batch whose write reached the file
// but whose fsync failed: the records must not survive recovery or reopen.
func TestRecoverDropsFailedBatch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, 1<<20)
	for i := 1; i <= 5; i++ {
		if _, err := j.Append([]*Record{testRecord(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// What a failed batch may leave: whole records and a torn one, where
	// tidwall/wal writes (at its offset, over pre-written zeros if any).
	tail := lastSegment(t, dir)
	f, _ := os.OpenFile(tail.Path, os.O_WRONLY, 0)
	var batch []byte
	for i := 6; i <= 8; i++ {
		frame, _ := testRecord(i).Encode()
		batch = binary.AppendUvarint(batch, uint64(len(frame)))
		batch = append(batch, frame...)
	}
	batch = append(batch, 0x80, 0x01, 1, 2, 3)
	j.mu.Lock()
	f.WriteAt(batch, j.tailBytes)
	f.Close()
	j.broken = errors.New("injected fsync failure")
	j.mu.Unlock()
	first, err := j.Append([]*Record{testRecord(106)})
	if err != nil || first != 6 {
		t.Fatalf("append after recovery: index %d, %v", first, err)
	}
	j.Close()
	j2, cut := openJournal(t, dir, 1<<20)
	defer j2.Close()
	if cut != nil {
		t.Fatalf("recovery left a torn tail: %v", cut)
	}
	got := replayAll(t, j2)
	if len(got) != 6 || got[5].Revision != 106 {
		t.Fatalf("after recovery: %d records, last revision %d; want 6 ending in 106", len(got), got[len(got)-1].Revision)
	}
}

func TestTruncateFront(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 50, 700)
	j, _ := openJournal(t, dir, 700)
	if err := j.TruncateFront(31); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, _ = openJournal(t, dir, 700)
	defer j.Close()
	if j.FirstIndex() != 31 || j.LastIndex() != uint64(len(recs)) {
		t.Fatalf("range %d..%d after truncation", j.FirstIndex(), j.LastIndex())
	}
	var got []*Record
	j.Replay(31, func(idx uint64, r *Record) error { got = append(got, r); return nil })
	if !reflect.DeepEqual(got, recs[30:]) {
		t.Fatalf("replay after truncation: %d records", len(got))
	}
	// Truncating everything leaves an empty journal that continues the indexes.
	next := uint64(len(recs) + 1)
	if err := j.TruncateFront(next); err != nil {
		t.Fatal(err)
	}
	if first, err := j.Append([]*Record{testRecord(51)}); err != nil || first != next {
		t.Fatalf("append after full truncation: %d %v", first, err)
	}
}

func TestFinishInterruptedTruncation(t *testing.T) {
	t.Parallel()
	dir, recs := writeJournal(t, 50, 700)
	segs, _ := ListSegments(dir)
	// A crash after tidwall/wal wrote the .START marker but before it
	// removed the old segments: open must complete the truncation.
	target := segs[2].Start + 1
	var ebuf []byte
	data, _ := os.ReadFile(segs[2].Path)
	offs := entryOffsets(t, segs[2].Path)
	ebuf = data[offs[1]:]
	os.WriteFile(filepath.Join(dir, segmentName(target)+".START"), ebuf, 0o644)
	os.WriteFile(filepath.Join(dir, segmentName(target)+".START.TEMP"), []byte("junk"), 0o644)
	j, _ := openJournal(t, dir, 700)
	defer j.Close()
	if j.FirstIndex() != target {
		t.Fatalf("first index %d, want %d", j.FirstIndex(), target)
	}
	var got []*Record
	if err := j.Replay(target, func(idx uint64, r *Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs[target-1:]) {
		t.Fatalf("replay after finishing truncation: %d records", len(got))
	}
}

// TestNewSegmentDirectoryIsSynced checks how the directory keeps up with
// tidwall/wal's segment cycling: the Append whose records are the first in
// a new segment file fsyncs the directory before it returns, and no other
// does. An Append whose last record sealed a segment (the new file is still
// empty) needs no fsync at all: tidwall/wal fsynced the sealed file as it
// cycled, so Write acknowledges its records and Sync has nothing to do.
func TestNewSegmentDirectoryIsSynced(t *testing.T) {
	t.Parallel()
	dirSyncs, fileSyncs := 0, 0
	faults := &fault.Hooks{}
	faults.SetSync(func(path string) error {
		if filepath.Base(path) != FloorFile {
			fileSyncs++
		}
		return nil
	})
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 900, Faults: faults})
	defer j.Close()
	j.opts.seams.syncSegmentDir.set(func(dir string) error { dirSyncs++; return j.fs.SyncDir(dir) })
	var want []*Record
	pending, sealedOnly := false, 0
	for i := 1; i <= 200; i++ {
		before, _ := ListSegments(dir)
		dirBefore, filesBefore := dirSyncs, fileSyncs
		batch := []*Record{testRecord(i)}
		if i%5 == 0 {
			batch = append(batch, testRecord(i), testRecord(i)) // multi-record batches cross boundaries too
		}
		first, err := j.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
		after, _ := ListSegments(dir)
		j.mu.Lock()
		tailEmpty := j.tailBytes == 0
		j.mu.Unlock()
		pending = pending || len(after) > len(before)
		if synced, needed := dirSyncs > dirBefore, pending && !tailEmpty; synced != needed {
			t.Fatalf("append %d: a new segment awaiting its directory fsync=%v, its first records written=%v, directory synced=%v", i, pending, !tailEmpty, synced)
		}
		pending = pending && tailEmpty
		if tailEmpty {
			sealedOnly++
			last := first + uint64(len(batch)) - 1
			if fileSyncs != filesBefore || j.LastIndex() != last {
				t.Fatalf("append %d ended at a seal: %d fdatasyncs, last index %d, want none and %d", i, fileSyncs-filesBefore, j.LastIndex(), last)
			}
		}
	}
	if segs, _ := ListSegments(dir); len(segs) < 10 || sealedOnly == 0 {
		t.Fatalf("%d segments, %d appends ending at a seal: the test did not exercise cycling", len(segs), sealedOnly)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openJournal(t, dir, 900)
	defer j.Close()
	if got := replayAll(t, j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay after the reopen returned %d records, want %d", len(got), len(want))
	}
}

// A journal whose every segment is gone while records were acknowledged
// (by the marker, or by a checkpoint's Options.Floor) refuses to open, names
// the missing records, and creates nothing: not the directory, not the
// empty first segment tidwall/wal would start.
func TestOpenRefusesMissingSegmentsWithoutCreatingAny(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) Options
	}{
		{"marker, no segment", func(t *testing.T, dir string) Options {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := SetFloor(dir, 12); err != nil {
				t.Fatal(err)
			}
			return Options{NoSync: true}
		}},
		{"checkpoint floor, empty directory", func(t *testing.T, dir string) Options {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return Options{NoSync: true, Floor: Floor{Index: 12, Source: "checkpoint image"}}
		}},
		{"checkpoint floor, no directory", func(t *testing.T, dir string) Options {
			return Options{NoSync: true, Floor: Floor{Index: 12, Source: "checkpoint image"}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			opts := tc.setup(t, dir)
			before, _ := os.ReadDir(dir)
			j, _, err := Open(dir, opts)
			if err == nil {
				j.Close()
				t.Fatal("Open accepted a journal with no segment below an acknowledged floor")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Index != 1 || !strings.Contains(err.Error(), "records 1..12 are missing") {
				t.Fatalf("refusal %v: want a *CorruptError at index 1 naming records 1..12", err)
			}
			after, statErr := os.ReadDir(dir)
			if len(after) != len(before) || (before == nil) != errors.Is(statErr, os.ErrNotExist) {
				t.Fatalf("a refused Open changed %s: %d entries before, %d after (%v)", dir, len(before), len(after), statErr)
			}
		})
	}
}

// TestSealAcknowledgesWholeBatchesOnly: a batch whose last record seals a
// segment is acknowledged by Write (tidwall/wal fsynced the segment), but a
// batch that continues into the next segment is not acknowledged in part:
// when the Sync covering its rest fails, none of it survives the cut-back
// or the reopen, so a batch the caller is told failed never reappears.
func TestSealAcknowledgesWholeBatchesOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 900, Faults: faults})
	defer func() { j.Close() }()
	tail := func() (uint64, int64) {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.tailStart, j.tailBytes
	}
	next, ended := uint64(1), false
	for i := 0; i < 300; i++ {
		n := 1 + i%3
		start, _ := tail()
		acked := j.LastIndex()
		mustWrite(t, j, records(int(next), n), next)
		next += uint64(n)
		switch now, bytes := tail(); {
		case now != start && bytes == 0:
			ended = true
			if j.LastIndex() != next-1 {
				t.Fatalf("a batch ending at a seal: last index %d after Write, want %d", j.LastIndex(), next-1)
			}
		case now != start && ended:
			if j.LastIndex() != acked {
				t.Fatalf("a batch continuing into the next segment moved the last index from %d to %d before its Sync", acked, j.LastIndex())
			}
			restore := faults.SetSync(func(path string) error {
				if filepath.Base(path) == FloorFile {
					return nil
				}
				return syscall.EIO
			})
			err := j.Sync(next - 1)
			restore()
			if err == nil || j.LastIndex() != acked {
				t.Fatalf("failed Sync of a batch crossing a seal: %v, last index %d, want an error and %d", err, j.LastIndex(), acked)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j, _ = openJournal(t, dir, 900)
			if got := replayAll(t, j); uint64(len(got)) != acked {
				t.Fatalf("reopen after the failed Sync holds %d records, want the %d acknowledged", len(got), acked)
			}
			return
		}
		if err := j.Sync(next - 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no batch ended at a seal and then crossed one (ended=%v)", ended)
}
