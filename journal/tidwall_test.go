package journal

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/internal/disk"
)

// tidwallEntries writes n entries of different sizes straight to
// tidwall/wal in dir, opened as the journal opens it, in batches of one to
// four, and returns them with the segment starts tailCycle predicts and the
// bytes it predicts for the last segment.
func tidwallEntries(t *testing.T, dir string, segSize, n int) (entries [][]byte, starts []uint64, tailBytes int64) {
	t.Helper()
	l, err := openTidwall(dir, segSize)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cycle := tailCycle{size: int64(segSize), start: 1}
	starts = []uint64{1}
	var b wal.Batch
	for idx := uint64(1); idx <= uint64(n); {
		b.Clear()
		cycle.cycled = false
		cycle.begin(idx)
		if cycle.cycled {
			starts = append(starts, cycle.start)
		}
		for range 1 + idx%4 {
			if idx > uint64(n) {
				break
			}
			// The first eight entries take 100 bytes with their prefix,
			// so a segment of 400 reaches its size exactly; then sizes
			// of 1 to 150, so both one- and two-byte prefixes occur.
			size := 99
			if idx > 8 {
				size = 1 + int(idx*37%150)
			}
			e := bytes.Repeat([]byte{byte(idx)}, size)
			entries = append(entries, e)
			b.Write(idx, e)
			cycle.cycled = false
			cycle.append(len(e), idx)
			if cycle.cycled {
				starts = append(starts, cycle.start)
			}
			idx++
		}
		if err := l.WriteBatch(&b); err != nil {
			t.Fatal(err)
		}
	}
	return entries, starts, cycle.bytes
}

// TestTidwallFormatPinned pins what the journal reads and predicts of
// tidwall/wal's files against the version in go.mod: segment names are the
// zero-padded first index (segmentName, parseSegmentName), an entry is a
// uvarint length and the bytes (entryAt, uvarintLen), and a segment is
// sealed by the entry that brings it to the segment size (tailCycle), all
// read back from files tidwall/wal wrote itself.
func TestTidwallFormatPinned(t *testing.T) {
	t.Parallel()
	const segSize = 400
	dir := t.TempDir()
	entries, starts, tailBytes := tidwallEntries(t, dir, segSize, 60)
	segs, err := ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, s := range segs {
		got = append(got, s.Start)
		if s.Name() != segmentName(s.Start) {
			t.Errorf("segment %s: name for index %d is %s", s.Name(), s.Start, segmentName(s.Start))
		}
		if idx, ok := parseSegmentName(s.Name()); !ok || idx != s.Start {
			t.Errorf("parseSegmentName(%s) = %d, %v", s.Name(), idx, ok)
		}
	}
	if !slices.Equal(got, starts) {
		t.Fatalf("tidwall/wal started segments at %v, tailCycle predicts %v", got, starts)
	}
	if last := segs[len(segs)-1]; last.Size != tailBytes {
		t.Errorf("last segment is %d bytes, tailCycle predicts %d", last.Size, tailBytes)
	}
	var read [][]byte
	for _, s := range segs {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); {
			e, size, bad := entryAt(data, off)
			if bad != nil {
				t.Fatalf("segment %s offset %d: %s", s.Name(), off, bad.reason)
			}
			if size != uvarintLen(uint64(len(e)))+len(e) {
				t.Fatalf("segment %s offset %d: entry of %d bytes takes %d", s.Name(), off, len(e), size)
			}
			read = append(read, e)
			off += size
		}
	}
	if len(read) != len(entries) {
		t.Fatalf("read %d entries back, wrote %d", len(read), len(entries))
	}
	for i := range entries {
		if !bytes.Equal(read[i], entries[i]) {
			t.Fatalf("entry %d reads back as %x, wrote %x", i+1, read[i], entries[i])
		}
	}

	// A tail already over the size (the log reopened with a smaller
	// one) is sealed before the next batch's first entry.
	l, err := openTidwall(dir, int(tailBytes)-1)
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(len(entries) + 1)
	cycle := tailCycle{size: tailBytes - 1, bytes: tailBytes, start: starts[len(starts)-1]}
	cycle.begin(next)
	if err := l.Write(next, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err = ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !cycle.cycled || segs[len(segs)-1].Start != next || cycle.start != next {
		t.Errorf("over-full tail: tidwall/wal's last segment starts at %d, tailCycle says cycled %v at %d", segs[len(segs)-1].Start, cycle.cycled, cycle.start)
	}
}

// TestFinishTruncationMatchesTidwall pins finishTruncation to what
// tidwall/wal's own open does with the markers a crash inside TruncateFront
// (a .START file) or TruncateBack (an .END file) leaves: the same files
// survive with the same bytes, and both markers at once are refused by
// both. A .TEMP file (a segment rewrite whose rename never happened)
// tidwall/wal leaves lying; finishTruncation removes it, and no segment
// changes.
func TestFinishTruncationMatchesTidwall(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	_, starts, _ := tidwallEntries(t, src, 400, 60)
	if len(starts) < 4 {
		t.Fatalf("want at least four segments, have %v", starts)
	}
	// A marker holds its segment's entries from its index on (START) or up
	// to it (END), as tidwall/wal writes it before renaming.
	mid := starts[1] + 1
	entriesOf := func(dir string, start uint64, keep func(idx uint64) bool) []byte {
		data, err := os.ReadFile(filepath.Join(dir, segmentName(start)))
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		idx := start
		for off := 0; off < len(data); idx++ {
			_, size, bad := entryAt(data, off)
			if bad != nil {
				t.Fatal(bad.reason)
			}
			if keep(idx) {
				out = append(out, data[off:off+size]...)
			}
			off += size
		}
		return out
	}
	tests := []struct {
		name    string
		markers map[string]func(dir string) []byte
		corrupt bool
	}{
		{"interrupted TruncateFront", map[string]func(string) []byte{
			segmentName(mid) + ".START": func(dir string) []byte {
				return entriesOf(dir, starts[1], func(idx uint64) bool { return idx >= mid })
			}}, false},
		{"interrupted TruncateBack", map[string]func(string) []byte{
			segmentName(starts[1]) + ".END": func(dir string) []byte {
				return entriesOf(dir, starts[1], func(idx uint64) bool { return idx <= mid })
			}}, false},
		{"both markers", map[string]func(string) []byte{
			segmentName(mid) + ".START":      func(string) []byte { return []byte{1} },
			segmentName(starts[2]) + ".END":  func(string) []byte { return []byte{1} },
			segmentName(starts[1]) + ".TEMP": func(string) []byte { return []byte{1} },
		}, true},
		{"leftover rewrite", map[string]func(string) []byte{
			segmentName(starts[2]) + ".TEMP": func(string) []byte { return []byte("half a segment") },
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := copyDir(t, src), copyDir(t, src)
			for _, dir := range []string{ours, theirs} {
				for name, content := range tt.markers {
					if err := os.WriteFile(filepath.Join(dir, name), content(dir), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			errOurs := finishTruncation(disk.FS{}, ours)
			l, errTheirs := wal.Open(theirs, &wal.Options{NoSync: true, LogFormat: wal.Binary, SegmentSize: 400})
			if errTheirs == nil {
				l.Close()
			}
			var ce *CorruptError
			if tt.corrupt {
				if !errors.As(errOurs, &ce) || !errors.Is(errTheirs, wal.ErrCorrupt) {
					t.Fatalf("finishTruncation: %v; tidwall/wal: %v; want both to refuse", errOurs, errTheirs)
				}
				return
			}
			if errOurs != nil || errTheirs != nil {
				t.Fatalf("finishTruncation: %v; tidwall/wal: %v", errOurs, errTheirs)
			}
			for name := range tt.markers {
				if filepath.Ext(name) == ".TEMP" {
					// tidwall/wal ignores it; the journal removes it.
					if err := os.Remove(filepath.Join(theirs, name)); err != nil {
						t.Fatalf("tidwall/wal removed %s itself: %v", name, err)
					}
				}
			}
			if a, b := dirContents(t, ours), dirContents(t, theirs); a != b {
				t.Errorf("finishTruncation left\n%s\ntidwall/wal left\n%s", a, b)
			}
		})
	}
}

// dirContents describes every file in dir: its name, size and checksum.
func dirContents(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s %d %x\n", e.Name(), len(data), crc32.Checksum(data, castagnoli))
	}
	return out.String()
}

// TestTailBufferPresized pins that the journal reaches tidwall/wal's tail
// buffer (v1.2.1's layout) and gives it its room before every write, so
// that appending never reallocates it: after every write, across cycles
// and after reopening, the tail's buffer is the one it had before the
// write or one the journal gave it (remembered in its spares), never one
// tidwall/wal's append made. If a tidwall/wal upgrade changes the layout,
// pre-sizing silently stops, and this test says so.
func TestTailBufferPresized(t *testing.T) {
	t.Parallel()
	const seg = 8 << 10
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, seg)
	defer func() { j.Close() }()
	base := func(b []byte) *byte { return unsafe.SliceData(b[:min(1, cap(b))]) }
	tail := func(when string) []byte {
		t.Helper()
		j.mu.Lock()
		defer j.mu.Unlock()
		p := tailBuffer(j.log)
		if p == nil {
			t.Fatalf("%s: tidwall/wal's tail buffer not found: pre-sizing no longer applies", when)
		}
		if int64(len(*p)) != j.tailBytes {
			t.Fatalf("%s: tail buffer len %d, want %d (the records)", when, len(*p), j.tailBytes)
		}
		return *p
	}
	write := func(recs []*Record) {
		t.Helper()
		before := tail("before a write")
		start := j.tailStart
		if _, err := j.Append(recs); err != nil {
			t.Fatal(err)
		}
		after := tail("after a write")
		if j.tailStart != start || len(after) == 0 || base(after) == base(before) {
			return // a new tail (checked at its next write), or no reallocation
		}
		if !slices.ContainsFunc(j.spares.bufs, func(b []byte) bool { return base(b) == base(after) }) {
			t.Fatalf("writing records %d-%d: the tail buffer (len %d cap %d) is not one the journal gave it: tidwall/wal's append reallocated it", recs[0].Revision, recs[len(recs)-1].Revision, len(after), cap(after))
		}
	}
	next := 1
	for cycles := 0; cycles < 3; cycles++ {
		start := j.tailStart
		for j.tailStart == start {
			write(records(next, 3))
			next += 3
		}
	}
	j.Close()
	j, _ = openJournal(t, dir, seg)
	for range 10 {
		write(records(next, 3))
		next += 3
	}
}

// TestTailBufferGrowsWithTheTail pins that a heap tail buffer (a
// CacheSealed journal's; a store journal's is a mapping, TestTailPagesReleased)
// is grown in steps with what its tail holds, not given a whole segment at
// once: with the default 1 MiB segments, a journal holding a few records
// keeps a buffer of minTailBuffer, and at every size the buffer is at most
// about twice what the tail holds, until it reaches tailCapacity.
func TestTailBufferGrowsWithTheTail(t *testing.T) {
	t.Parallel()
	j, _ := openJournalOpts(t, filepath.Join(t.TempDir(), "journal"), Options{CacheSealed: true})
	defer j.Close()
	limit := j.tailCapacity()
	capOf := func() (length, capacity int) {
		j.mu.Lock()
		defer j.mu.Unlock()
		p := tailBuffer(j.log)
		if p == nil {
			t.Fatal("tidwall/wal's tail buffer not found")
		}
		return len(*p), cap(*p)
	}
	next := 1
	if _, err := j.Append(records(next, 3)); err != nil {
		t.Fatal(err)
	}
	next += 3
	if _, c := capOf(); c != minTailBuffer {
		t.Fatalf("after three small records the tail buffer has cap %d, want %d (not a whole segment, %d)", c, minTailBuffer, limit)
	}
	start := j.tailStart
	for j.tailStart == start {
		l, c := capOf()
		if c > max(minTailBuffer, 2*l) || c > limit {
			t.Fatalf("tail of %d bytes has a buffer of cap %d, want at most max(%d, twice the tail) and %d", l, c, minTailBuffer, limit)
		}
		if _, err := j.Append([]*Record{{Kind: KindPut, Namespace: "ns", Key: "k", Revision: uint64(next), Schema: "s", Owner: "o", Document: make([]byte, 4<<10)}}); err != nil {
			t.Fatal(err)
		}
		next++
	}
}

// TestTailBufferReused pins that a segment change reuses the buffer of a
// tail tidwall/wal no longer holds instead of allocating a new
// segment-sized one, and never one a segment still holds. A store journal
// drops the sealed segment's in-memory copy (dropSealed), so across many
// cycles its tails share one buffer; with CacheSealed the cached segment
// keeps its own, and the tails share at most maxTailSpares. Either way the
// records of the sealed segments still read back (Read reloads a dropped
// segment from its file) and every record replays.
func TestTailBufferReused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cacheSealed bool
		maxBuffers  int
	}{
		{"store journal", false, 1},
		{"CacheSealed", true, maxTailSpares},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const seg = 8 << 10
			dir := filepath.Join(t.TempDir(), "journal")
			j, _ := openJournalOpts(t, dir, Options{SegmentSize: seg, CacheSealed: tc.cacheSealed})
			defer func() { j.Close() }()
			bases := map[*byte]bool{}
			next := 1
			for cycles := 0; cycles < 8; cycles++ {
				start := j.tailStart
				for j.tailStart == start {
					if _, err := j.Append(records(next, 5)); err != nil {
						t.Fatal(err)
					}
					next += 5
				}
				// The new tail gets its buffer with its first records.
				if _, err := j.Append(records(next, 1)); err != nil {
					t.Fatal(err)
				}
				next++
				j.mu.Lock()
				tail := tailBuffer(j.log)
				segs := reflect.ValueOf(j.log).Elem().FieldByName("segments")
				prev := segs.Index(segs.Len() - 2).Elem().FieldByName("ebuf")
				held := *(*[]byte)(unsafe.Pointer(prev.UnsafeAddr()))
				j.mu.Unlock()
				base := &(*tail)[:1][0]
				if cap(held) > 0 && &held[:1][0] == base {
					t.Fatalf("cycle %d: the tail reuses the buffer the cached segment still holds", cycles)
				}
				if !tc.cacheSealed && cap(held) > 0 {
					t.Fatalf("cycle %d: the sealed segment still holds a %d-byte buffer", cycles, cap(held))
				}
				bases[base] = true
				// A record of the segment just sealed reads back.
				got, err := j.Read(start, nil)
				if err != nil {
					t.Fatalf("cycle %d: read %d: %v", cycles, start, err)
				}
				want, _ := records(int(start), 1)[0].AppendFrame(nil)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("cycle %d: read %d = %d bytes, want the record's frame (%d bytes)", cycles, start, len(got), len(want))
				}
			}
			if len(bases) > tc.maxBuffers {
				t.Fatalf("8 cycles used %d tail buffers, want at most %d", len(bases), tc.maxBuffers)
			}
			j.Close()
			j, _ = openJournal(t, dir, seg)
			if got := replayAll(t, j); !reflect.DeepEqual(got, records(1, next-1)) {
				t.Fatal("records written across reused tail buffers do not replay")
			}
		})
	}
}
