package journal

import (
	"encoding/binary"
	"fmt"
)

// The torn-tail rule. Open (and every kpjournal command, through
// JudgeTail) cuts damage at the end of the last segment only when it has
// the shape a write interrupted by a crash leaves, and only above the
// floor of records known to have been acknowledged. Everything else is
// corruption: the store refuses to open, naming the index and offset.
//
// What a crash can leave after the last whole record. tidwall/wal appends
// a batch with one write; the crash can persist any prefix of it (the file
// is cut short), or persist the file's new size before its data, which then
// reads back as zeros. So a torn tail is, from the damaged entry to the end
// of the file:
//
//   - nothing but zero bytes; or
//   - one entry whose length prefix is within the frame sizes a record can
//     have (MinFrameSize to the largest frame Limits allow), whose written
//     bytes (those before the trailing run of zeros) are a consistent
//     frame header (version, kind, lengths within Limits that add up to the
//     entry's length), and which either runs past the end of the file or
//     ends inside the trailing zeros (its checksum fails because its end was
//     never written), followed by zeros only.
//
// A length prefix beyond the largest frame, a frame header no encoder
// wrote, a whole entry with non-zero bytes that fails its checksum (bit
// rot, not a torn write), anything after the damaged entry but zeros, and
// a whole valid frame anywhere after the damage are all corruption. So is
// damage at an index at or below the floor: a record the newest checkpoint
// covers, or one the ACKNOWLEDGED marker (see floor.go) says was
// acknowledged, was fsynced and cannot have been torn.
//
// The rule is conservative by design: a crash that persisted a batch's
// pages out of order (a zero page in the middle of the batch and data
// after it) is refused rather than guessed at, and kpjournal shows the
// operator exactly what lies there.

// Floor is the evidence of how far the journal was acknowledged: records
// 1..Index were acknowledged, so none of them may be cut or be missing.
type Floor struct {
	Index  uint64
	Source string // what says so: "checkpoint checkpoint-….ckpt", "marker ACKNOWLEDGED", ""
}

// Raise returns the higher of f and (index, source).
func (f Floor) Raise(index uint64, source string) Floor {
	if index > f.Index {
		return Floor{Index: index, Source: source}
	}
	return f
}

func (f Floor) String() string {
	if f.Index == 0 {
		return "no acknowledged floor"
	}
	return fmt.Sprintf("index %d acknowledged (%s)", f.Index, f.Source)
}

// JudgeTail decides whether the damage at offset off of data, the last
// segment of a journal (file name seg), whose damaged entry would have
// journal index index, is a torn tail that may be cut. It returns nil for
// a torn tail and a *CorruptError naming the index and offset otherwise.
func JudgeTail(seg string, data []byte, off int64, index uint64, floor Floor, lim Limits) error {
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Segment: seg, Offset: off, Index: index, Reason: fmt.Sprintf(format, args...)}
	}
	if off < 0 || off > int64(len(data)) {
		return corrupt("damage offset outside the segment's %d bytes", len(data))
	}
	if index <= floor.Index {
		return corrupt("damaged, but records up to index %d were acknowledged (%s): this is not a torn write", floor.Index, floor.Source)
	}
	if next := validFrameAfter(data, off+1, lim); next >= 0 {
		return corrupt("damaged, and a valid record follows at offset %d, so this is not a torn tail", next)
	}
	rest := data[off:]
	zeros := len(rest) // where the trailing run of zero bytes starts, in rest
	for zeros > 0 && rest[zeros-1] == 0 {
		zeros--
	}
	if zeros == 0 {
		return nil // zero-filled to the end of the file
	}
	n, w := entryLen(rest)
	switch {
	case w == 0:
		return nil // the length prefix itself was cut short
	case w < 0:
		return corrupt("a length prefix no write of the journal produces: not a torn write")
	case n == 0:
		return corrupt("empty entry followed by %d non-zero bytes: not a torn write", zeros)
	case n < MinFrameSize:
		return corrupt("entry length %d is below the %d-byte minimum frame", n, MinFrameSize)
	case n > uint64(maxFrameSize(lim)):
		return corrupt("entry length %d exceeds the largest frame a record can have (%d bytes)", n, maxFrameSize(lim))
	}
	end := uint64(w) + n // the entry's end, in rest
	if end <= uint64(len(rest)) && end <= uint64(zeros) {
		if end == uint64(len(rest)) {
			return corrupt("the whole final record was written and fails its checks: damage, not a torn write")
		}
		return corrupt("record ends at offset %d and %d non-zero bytes follow it: not a torn write", off+int64(end), zeros-int(end))
	}
	written := rest[w:max(uint64(w), min(uint64(zeros), end))]
	if err := framePrefixConsistent(written, int(n), lim); err != "" {
		return corrupt("torn-looking entry of %d bytes, but its header is not one the journal writes: %s", n, err)
	}
	return nil
}

// framePrefixConsistent checks the header fields present in the written
// prefix of a frame that declares n bytes, returning why not ("" if fine).
func framePrefixConsistent(p []byte, n int, lim Limits) string {
	if len(p) >= 1 && p[0] != FormatVersion {
		return fmt.Sprintf("version %d", p[0])
	}
	if len(p) < 2 {
		return ""
	}
	kind := Kind(p[1])
	if kind == KindRaft {
		return raftPrefixConsistent(p, n, lim)
	}
	if kind != KindPut && kind != KindDelete && kind != KindExpire {
		return fmt.Sprintf("kind %d", p[1])
	}
	if len(p) < headerSize {
		return ""
	}
	nsLen := int(binary.LittleEndian.Uint16(p[18:]))
	keyLen := int(binary.LittleEndian.Uint16(p[20:]))
	if nsLen > lim.MaxNamespace || keyLen > lim.MaxKey {
		return fmt.Sprintf("namespace length %d or key length %d beyond the limits", nsLen, keyLen)
	}
	base := headerSize + nsLen + keyLen
	if kind != KindPut {
		if n != base+crcSize {
			return fmt.Sprintf("a %s frame of this namespace and key is %d bytes, not %d", kind, base+crcSize, n)
		}
		return ""
	}
	if n < base+putHeaderSize+crcSize {
		return fmt.Sprintf("a PUT frame of %d bytes cannot hold its header", n)
	}
	if len(p) < base+putHeaderSize {
		return ""
	}
	q := p[base:]
	schemaLen := int(binary.LittleEndian.Uint16(q[0:]))
	ownerLen := int(binary.LittleEndian.Uint16(q[2:]))
	docLen := int(binary.LittleEndian.Uint32(q[28:]))
	if schemaLen > lim.MaxSchema || ownerLen > lim.MaxOwner || docLen > lim.MaxDocument {
		return "schema, owner or document length beyond the limits"
	}
	if want := base + putHeaderSize + schemaLen + ownerLen + docLen + crcSize; n != want {
		return fmt.Sprintf("the PUT header declares a %d-byte frame, the entry %d", want, n)
	}
	return ""
}
