package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/internal/disk"
)

// Everything the journal knows about github.com/tidwall/wal beyond its
// exported API lives in this file, read in the source of the version
// go.mod names (v1.2.1): how it names segment files, how it encodes an
// entry, when it starts a new segment, how it finishes a truncation a crash
// interrupted, how its own fsync is switched off, and the unexported field
// holding its tail buffer. tidwall_test.go pins each of them against that
// version, so an upgrade that changes any of them fails a test instead of
// a recovery.

// segmentNameLen is the width tidwall/wal gives a segment file name: the
// zero-padded decimal index of the segment's first entry.
const segmentNameLen = 20

// segmentName is the file name tidwall/wal gives the segment whose first
// entry has index.
func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// parseSegmentName reports the first index of the segment file called
// name, and whether name is a segment file's name at all (temporaries,
// truncation markers and the journal's own files are not).
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != segmentNameLen {
		return 0, false
	}
	start, err := strconv.ParseUint(name, 10, 64)
	return start, err == nil && start != 0
}

// openTidwall opens the log in dir with the options the journal relies on.
func openTidwall(dir string, segmentSize int) (*wal.Log, error) {
	return wal.Open(dir, &wal.Options{
		// Sync fdatasyncs the tail itself, outside tidwall/wal's lock,
		// so writes continue while a sync is in flight. (tidwall/wal
		// still fsyncs a segment when it cycles away from it.)
		NoSync:           true,
		SegmentSize:      segmentSize,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 1,
		NoCopy:           true,
		AllowEmpty:       true,
		DirPerms:         0o755,
		FilePerms:        0o644,
	})
}

// entryLen reads the length prefix of the entry at the start of data:
// tidwall/wal's binary format writes each entry as a uvarint length and
// then that many bytes. w is the prefix's width, 0 when data ends inside
// it and negative when it overflows 64 bits.
func entryLen(data []byte) (n uint64, w int) { return binary.Uvarint(data) }

// entryAt parses the wal entry (uvarint length, then that many bytes) at off
// and returns the frame and the entry's total size.
func entryAt(data []byte, off int) (frame []byte, size int, bad *badSpot) {
	n, w := binary.Uvarint(data[off:])
	if w == 0 {
		return nil, 0, &badSpot{offset: int64(off), reason: "entry length prefix cut off at end of file"}
	}
	if w < 0 {
		return nil, 0, &badSpot{offset: int64(off), reason: "entry length prefix overflows"}
	}
	if n > uint64(len(data)-off-w) {
		return nil, 0, &badSpot{offset: int64(off), reason: fmt.Sprintf("entry of %d bytes runs past end of file (%d bytes left)", n, len(data)-off-w)}
	}
	if n == 0 {
		// tidwall/wal reads a zero-filled tail as a run of empty entries;
		// the journal never writes one, so it is damage, not data.
		return nil, 0, &badSpot{offset: int64(off), reason: "empty entry (zero-filled bytes)"}
	}
	return data[off+w : off+w+int(n)], w + int(n), nil
}

// uvarintLen is the width of the length prefix tidwall/wal writes for an
// entry of x bytes.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// tailCycle follows the tail segment through a batch the way tidwall/wal
// cycles it, so the journal knows which file each record lands in without
// asking the Log: a tail already over the size is cycled before the batch,
// and an entry that brings the tail to the size seals the segment right
// after itself.
type tailCycle struct {
	size   int64  // the segment size the Log was opened with
	bytes  int64  // of the tail segment
	start  uint64 // index of the tail segment's first entry
	cycled bool   // the batch started a new segment
}

// begin is the cycle at the start of a batch whose first record has index
// first.
func (c *tailCycle) begin(first uint64) {
	if c.bytes > c.size {
		c.cycled, c.bytes, c.start = true, 0, first
	}
}

// append adds the entry of a frame of frameLen bytes with index index. It
// reports whether that entry seals the segment (tidwall/wal then opens the
// next one right after it).
func (c *tailCycle) append(frameLen int, index uint64) (sealed bool) {
	c.bytes += int64(uvarintLen(uint64(frameLen)) + frameLen)
	if c.bytes >= c.size {
		c.cycled, c.bytes, c.start = true, 0, index+1
		return true
	}
	return false
}

// finishTruncation completes a TruncateFront or TruncateBack that a crash
// interrupted, with the semantics tidwall/wal gives its .START and .END
// markers, and then fsyncs the directory (which tidwall/wal never does).
// Leftover .TEMP files are removed: their rename never happened.
func finishTruncation(fsys disk.FS, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return &StorageError{Op: "open", Err: err}
	}
	var start, end string
	changed := false
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".TEMP"):
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return &StorageError{Op: "remove temporary file", Err: err}
			}
			changed = true
		case len(name) == segmentNameLen+len(".START") && strings.HasSuffix(name, ".START"):
			start = name
		case len(name) == segmentNameLen+len(".END") && strings.HasSuffix(name, ".END"):
			end = name
		}
	}
	if start != "" && end != "" {
		return &CorruptError{Segment: start, Reason: "both a .START and an .END truncation marker exist"}
	}
	segs, err := ListSegments(dir)
	if err != nil {
		return &StorageError{Op: "open", Err: err}
	}
	if start != "" {
		idx, _ := strconv.ParseUint(start[:segmentNameLen], 10, 64)
		// The marker holds every entry from idx on that its segment held:
		// all segments starting at or before idx are superseded by it.
		for _, s := range segs {
			if s.Start <= idx {
				if err := os.Remove(s.Path); err != nil {
					return &StorageError{Op: "finish truncation", Err: err}
				}
			}
		}
		if err := os.Rename(filepath.Join(dir, start), filepath.Join(dir, start[:segmentNameLen])); err != nil {
			return &StorageError{Op: "finish truncation", Err: err}
		}
		changed = true
	}
	if end != "" {
		idx, _ := strconv.ParseUint(end[:segmentNameLen], 10, 64)
		for _, s := range segs {
			if s.Start >= idx {
				if err := os.Remove(s.Path); err != nil {
					return &StorageError{Op: "finish truncation", Err: err}
				}
			}
		}
		if err := os.Rename(filepath.Join(dir, end), filepath.Join(dir, end[:segmentNameLen])); err != nil {
			return &StorageError{Op: "finish truncation", Err: err}
		}
		changed = true
	}
	if changed {
		if err := fsys.SyncDir(dir); err != nil {
			return &StorageError{Op: "finish truncation", Err: err}
		}
	}
	return nil
}

// Pre-sizing tidwall/wal's tail buffer. tidwall/wal keeps the tail segment
// in memory as one byte slice that every write extends with append, so the
// slice is reallocated and copied again and again as the segment fills:
// about five bytes allocated and copied for every byte journaled, the
// largest single cost at high write rates (tidwall/wal issue #12, pull
// request #23, unmerged). The journal gives that slice its room before
// every write (Journal.growTailLocked: in steps, up to a whole segment
// plus its largest entry), so the appends never reallocate.
//
// tidwall/wal exports no way to do this, so presizeTail reaches the
// unexported field through reflection, checking the shape it expects
// (Log.segments []*segment, segment.ebuf []byte) and doing nothing when the
// shape differs: a tidwall/wal upgrade can make pre-sizing a no-op, never a
// memory error. TestTailBufferPresized fails if it stops applying. Callers
// hold the journal's wmu, which every call into the Log also holds, so the
// Log is never used concurrently.

var byteSliceType = reflect.TypeOf([]byte(nil))

// presizeTail grows the capacity of l's tail segment buffer to at least
// capacity bytes, keeping its contents. It reports whether the buffer was
// found (and now has the capacity).
//
// The new buffer comes from spares when one is free: a buffer pre-sized for
// an earlier tail that l no longer holds (tidwall/wal keeps a sealed
// segment's buffer while the segment is in its cache, SegmentCacheSize 1,
// and drops it, ebuf = nil, when the next cycle evicts it). Allocating a
// fresh segment-sized buffer at every cycle was as many bytes of garbage as
// the journal wrote, 30-40% of the store's allocation at 127 writers.
//
// A new buffer comes from alloc (nil: the heap).
func presizeTail(l *wal.Log, capacity int, spares *tailSpares, alloc func(int) []byte) bool {
	p := tailBuffer(l)
	if p == nil {
		return false
	}
	if cap(*p) < capacity {
		nb := spares.take(l, capacity)
		switch {
		case nb != nil:
		case alloc != nil:
			nb = alloc(capacity)
		default:
			nb = make([]byte, 0, capacity)
		}
		nb = append(nb[:0], *p...)
		// The buffer replaced is the tail's own, held by nothing else now:
		// remembering it would only keep it from the collector.
		spares.forget(*p)
		*p = nb
		spares.keep(nb)
	}
	return true
}

// dropSealed makes l forget its in-memory copy of the sealed segments
// before the tail (their ebuf and epos), so a buffer presizeTail gave an
// earlier tail is free for the next one at once instead of after the next
// cycle: one tail buffer per journal instead of two. tidwall/wal keeps
// the last sealed segment's entries only to serve Reads of them, which a
// store journal never makes (its replay reads the files); a Read of one
// after this loads the file again, as for any segment out of its cache
// (a segment whose epos is empty is reloaded, never read from ebuf). A
// segment of an unexpected shape is left alone.
func dropSealed(l *wal.Log) {
	if l == nil {
		return
	}
	segs := reflect.ValueOf(l).Elem().FieldByName("segments")
	if segs.Kind() != reflect.Slice {
		return
	}
	for i := max(0, segs.Len()-recentSegments); i < segs.Len()-1; i++ {
		s := segs.Index(i)
		if s.Kind() != reflect.Pointer || s.IsNil() || s.Elem().Kind() != reflect.Struct {
			continue
		}
		buf, pos := s.Elem().FieldByName("ebuf"), s.Elem().FieldByName("epos")
		if !buf.IsValid() || buf.Type() != byteSliceType || !buf.CanAddr() ||
			!pos.IsValid() || pos.Kind() != reflect.Slice || !pos.CanAddr() {
			continue
		}
		// epos first: with it empty the segment is reloaded before any
		// Read looks at ebuf.
		reflect.NewAt(pos.Type(), unsafe.Pointer(pos.UnsafeAddr())).Elem().SetZero()
		*(*[]byte)(unsafe.Pointer(buf.UnsafeAddr())) = nil
	}
}

// tailSpares remembers the buffers presizeTail gave the last few tails, so
// one l no longer holds can serve the next tail.
type tailSpares struct {
	bufs [][]byte
}

// maxTailSpares bounds the buffers remembered: the tail's, the cached
// sealed segment's, and one free.
const maxTailSpares = 3

// recentSegments is how many segments, counted from the tail, are checked
// for a remembered buffer. Only a tail is ever given one, segments are only
// appended after it (or dropped from the front), and a reopen starts a new
// Log that holds none of them: so a buffer still held sits in one of the
// last maxTailSpares segments, and checking a few more costs nothing.
const recentSegments = 2 * maxTailSpares

// take returns a remembered buffer of at least capacity bytes that no
// segment of l holds, forgetting it, or nil.
func (sp *tailSpares) take(l *wal.Log, capacity int) []byte {
	for i, b := range sp.bufs {
		if cap(b) < capacity || heldBy(l, b) {
			continue
		}
		sp.bufs = append(sp.bufs[:i], sp.bufs[i+1:]...)
		return b
	}
	return nil
}

// forget drops b from the remembered buffers, if it is one.
func (sp *tailSpares) forget(b []byte) {
	if cap(b) == 0 {
		return
	}
	base := unsafe.SliceData(b[:1])
	sp.bufs = slices.DeleteFunc(sp.bufs, func(s []byte) bool { return unsafe.SliceData(s[:1]) == base })
}

// keep remembers b, forgetting the oldest buffer beyond maxTailSpares.
func (sp *tailSpares) keep(b []byte) {
	if len(sp.bufs) == maxTailSpares {
		sp.bufs = append(sp.bufs[:0], sp.bufs[1:]...)
	}
	sp.bufs = append(sp.bufs, b)
}

// heldBy reports whether a recent segment of l holds b's memory. It says
// true when l's shape is not the expected one, so a buffer is never reused
// on a guess.
func heldBy(l *wal.Log, b []byte) bool {
	segs := reflect.ValueOf(l).Elem().FieldByName("segments")
	if segs.Kind() != reflect.Slice {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
	hi := lo + uintptr(cap(b))
	for i := max(0, segs.Len()-recentSegments); i < segs.Len(); i++ {
		s := segs.Index(i)
		if s.Kind() != reflect.Pointer || s.IsNil() || s.Elem().Kind() != reflect.Struct {
			return true
		}
		buf := s.Elem().FieldByName("ebuf")
		if !buf.IsValid() || buf.Type() != byteSliceType || !buf.CanAddr() {
			return true
		}
		held := *(*[]byte)(unsafe.Pointer(buf.UnsafeAddr()))
		if cap(held) == 0 {
			continue
		}
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(held[:1]))); at >= lo && at < hi {
			return true
		}
	}
	return false
}

// tailBuffer returns a pointer to l's tail segment buffer, or nil when the
// Log does not have the expected shape.
func tailBuffer(l *wal.Log) *[]byte {
	if l == nil {
		return nil
	}
	segs := reflect.ValueOf(l).Elem().FieldByName("segments")
	if segs.Kind() != reflect.Slice || segs.Len() == 0 {
		return nil
	}
	last := segs.Index(segs.Len() - 1)
	if last.Kind() != reflect.Pointer || last.IsNil() || last.Elem().Kind() != reflect.Struct {
		return nil
	}
	buf := last.Elem().FieldByName("ebuf")
	if !buf.IsValid() || buf.Type() != byteSliceType || !buf.CanAddr() {
		return nil
	}
	return (*[]byte)(unsafe.Pointer(buf.UnsafeAddr()))
}

// TruncationMarkers lists the files of the journal directory dir that
// tidwall/wal leaves when a crash interrupts a truncation (.START, .END and
// .TEMP files), which Open finishes or removes (finishTruncation). Tools
// report them without knowing tidwall/wal's file names.
func TruncationMarkers(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list journal directory %s: %w", dir, err)
	}
	out := []string{}
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".START") || strings.HasSuffix(n, ".END") || strings.HasSuffix(n, ".TEMP") {
			out = append(out, n)
		}
	}
	return out, nil
}
