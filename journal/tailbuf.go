package journal

import (
	"reflect"
	"unsafe"

	"github.com/tidwall/wal"
)

// Pre-sizing tidwall/wal's tail buffer. tidwall/wal keeps the tail segment
// in memory as one byte slice that every write extends with append, so the
// slice is reallocated and copied again and again as the segment fills:
// about five bytes allocated and copied for every byte journaled, the
// largest single cost at high write rates (tidwall/wal issue #12, pull
// request #23, unmerged). The journal gives that slice, once per tail
// segment, the capacity of a whole segment plus its largest entry, so the
// appends never reallocate.
//
// tidwall/wal exports no way to do this, so presizeTail reaches the
// unexported field through reflection, checking the shape it expects
// (Log.segments []*segment, segment.ebuf []byte) and doing nothing when the
// shape differs: a tidwall/wal upgrade can make pre-sizing a no-op, never a
// memory error. TestTailBufferPresized fails if it stops applying. Callers
// hold the journal's mu, which every call into the Log also holds, so the
// Log is never used concurrently.

var byteSliceType = reflect.TypeOf([]byte(nil))

// presizeTail grows the capacity of l's tail segment buffer to at least
// capacity bytes, keeping its contents. It reports whether the buffer was
// found (and now has the capacity).
func presizeTail(l *wal.Log, capacity int) bool {
	p := tailBuffer(l)
	if p == nil {
		return false
	}
	if cap(*p) < capacity {
		nb := make([]byte, len(*p), capacity)
		copy(nb, *p)
		*p = nb
	}
	return true
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
