package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Frame is one record frame read in place: its byte slices alias the bytes
// it was parsed from, so reading a journal this way allocates nothing per
// record. It is what [Decode] reads, field for field; [Frame.Record] copies
// it out.
type Frame struct {
	Kind      Kind
	Revision  uint64
	TimeMs    int64
	Namespace []byte
	Key       []byte

	// PUT only.
	Schema    []byte
	Owner     []byte
	CreatedMs int64
	UpdatedMs int64
	ExpiresMs int64
	Document  []byte

	// Raft is a KindRaft frame's entry; its Extensions and Data alias the
	// frame too. Zero for every other kind.
	Raft RaftEntry
}

// Parse fills f from frame, checking the checksum first and then every
// length against lim before slicing, so metadata is validated before the
// document is touched. A refusal is a *FrameError naming the field; f then
// holds garbage.
func (f *Frame) Parse(frame []byte, lim Limits) error {
	if len(frame) < MinFrameSize {
		return frameErr("length", "%d bytes is shorter than the %d-byte minimum frame", len(frame), MinFrameSize)
	}
	body := frame[:len(frame)-crcSize]
	want := binary.LittleEndian.Uint32(frame[len(frame)-crcSize:])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return frameErr("crc", "stored CRC-32C %08x, computed %08x", want, got)
	}
	if body[0] != FormatVersion {
		return frameErr("version", "frame version %d, this build reads %d", body[0], FormatVersion)
	}
	f.Kind = Kind(body[1])
	f.Raft = RaftEntry{}
	if f.Kind == KindRaft {
		return f.parseRaft(body, lim)
	}
	if f.Kind != KindPut && f.Kind != KindDelete && f.Kind != KindExpire {
		return frameErr("kind", "unknown kind %d", body[1])
	}
	f.Revision = binary.LittleEndian.Uint64(body[2:])
	f.TimeMs = int64(binary.LittleEndian.Uint64(body[10:]))
	nsLen := int(binary.LittleEndian.Uint16(body[18:]))
	keyLen := int(binary.LittleEndian.Uint16(body[20:]))
	if nsLen > lim.MaxNamespace {
		return frameErr("namespace length", "%d bytes exceeds the %d-byte limit", nsLen, lim.MaxNamespace)
	}
	if keyLen > lim.MaxKey {
		return frameErr("key length", "%d bytes exceeds the %d-byte limit", keyLen, lim.MaxKey)
	}
	p := body[headerSize:]
	if len(p) < nsLen+keyLen {
		return frameErr("length", "namespace and key run past the frame end")
	}
	// Full slice expressions: a caller appending to a field must not
	// overwrite the next one.
	f.Namespace = p[:nsLen:nsLen]
	f.Key = p[nsLen : nsLen+keyLen : nsLen+keyLen]
	p = p[nsLen+keyLen:]
	if f.Kind != KindPut {
		f.Schema, f.Owner, f.Document = nil, nil, nil
		f.CreatedMs, f.UpdatedMs, f.ExpiresMs = 0, 0, 0
		if len(p) != 0 {
			return frameErr("length", "%d trailing bytes after a %s record", len(p), f.Kind)
		}
		return nil
	}
	if len(p) < putHeaderSize {
		return frameErr("length", "PUT header runs past the frame end")
	}
	schemaLen := int(binary.LittleEndian.Uint16(p[0:]))
	ownerLen := int(binary.LittleEndian.Uint16(p[2:]))
	f.CreatedMs = int64(binary.LittleEndian.Uint64(p[4:]))
	f.UpdatedMs = int64(binary.LittleEndian.Uint64(p[12:]))
	f.ExpiresMs = int64(binary.LittleEndian.Uint64(p[20:]))
	docLen := uint64(binary.LittleEndian.Uint32(p[28:]))
	if schemaLen > lim.MaxSchema {
		return frameErr("schema length", "%d bytes exceeds the %d-byte limit", schemaLen, lim.MaxSchema)
	}
	if ownerLen > lim.MaxOwner {
		return frameErr("owner length", "%d bytes exceeds the %d-byte limit", ownerLen, lim.MaxOwner)
	}
	if docLen > uint64(lim.MaxDocument) {
		return frameErr("document length", "%d bytes exceeds the %d-byte limit", docLen, lim.MaxDocument)
	}
	p = p[putHeaderSize:]
	if uint64(len(p)) != uint64(schemaLen+ownerLen)+docLen {
		return frameErr("length", "PUT body is %d bytes, header declares %d", len(p), uint64(schemaLen+ownerLen)+docLen)
	}
	f.Schema = p[:schemaLen:schemaLen]
	f.Owner = p[schemaLen : schemaLen+ownerLen : schemaLen+ownerLen]
	f.Document = p[schemaLen+ownerLen:]
	return nil
}

// Record copies f into a Record that owns its memory.
func (f *Frame) Record() *Record {
	if f.Kind == KindRaft {
		e := f.Raft
		e.Extensions = bytes.Clone(e.Extensions)
		e.Data = bytes.Clone(e.Data)
		return &Record{Kind: KindRaft, Raft: &e}
	}
	r := &Record{Kind: f.Kind, Namespace: string(f.Namespace), Key: string(f.Key), Revision: f.Revision, TimeMs: f.TimeMs}
	if f.Kind == KindPut {
		r.Schema, r.Owner = string(f.Schema), string(f.Owner)
		r.CreatedMs, r.UpdatedMs, r.ExpiresMs = f.CreatedMs, f.UpdatedMs, f.ExpiresMs
		r.Document = append([]byte(nil), f.Document...)
	}
	return r
}

// DamageMode says what a [Scanner] does at an entry it cannot read.
type DamageMode int

const (
	// StopAtDamage ends the scan at the first entry that does not parse,
	// as replay does: nothing after damage is trusted.
	StopAtDamage DamageMode = iota
	// SkipDamage reports the damage and goes on, the way a tool that
	// must list every problem reads a journal (as etcd-dump-logs reads
	// etcd's). An entry whose frame is damaged but whose length prefix
	// leads to a whole valid entry (a flipped payload byte) is one
	// damaged record, and indexes stay exact. An entry that cannot be
	// delimited (a damaged length prefix, zero-filled bytes, a cut) makes
	// the scan try every following byte offset for the next valid record,
	// as Open does before it cuts a tail, and resume there with indexes
	// unknown for the rest of the data.
	SkipDamage
)

// Damage is an entry of a segment that does not hold a valid record.
type Damage struct {
	// Index is the journal index the damaged entry would have; 0 when it
	// is unknown (after damage that misaligned the entries).
	Index  uint64
	Offset int64 // of the entry's length prefix in the segment
	Reason string
	// Last is set when no valid record follows in the segment (with
	// SkipDamage; StopAtDamage does not look). Damage in the last
	// segment that is Last may be a torn tail: JudgeTail decides.
	Last bool
	// Prewritten is set when the entry and everything after it to the end
	// of the data is zero bytes: how the journal's pre-written space reads
	// (see PrewrittenFrom). Open trims it from the last segment without
	// calling it damage; anywhere else it is damage like any other.
	Prewritten bool
}

// Scanner reads the records of one segment's bytes in place, entry by
// entry. Call Next until it returns false; after each true, exactly one of
// Frame and Damage is non-nil. Everything it returns aliases the data.
type Scanner struct {
	data  []byte
	lim   Limits
	mode  DamageMode
	off   int    // where the next entry starts
	next  uint64 // index of the next entry, while known
	known bool
	done  bool

	at      int64 // offset of what Next found
	index   uint64
	raw     []byte
	frame   Frame
	damage  Damage
	found   found
	records int
}

// found is what the last call of Next found.
type found uint8

const (
	foundNothing found = iota
	foundFrame
	foundDamage
)

// NewScanner scans data, a segment whose first entry has index start,
// within lim (zero: DefaultLimits).
func NewScanner(data []byte, start uint64, lim Limits, mode DamageMode) *Scanner {
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	return &Scanner{data: data, lim: lim, mode: mode, next: start, known: true}
}

// Next moves to the next record or damage and reports whether there was
// one.
func (s *Scanner) Next() bool {
	s.found = foundNothing
	if s.done || s.off >= len(s.data) {
		s.done = true
		return false
	}
	off := s.off
	s.at, s.index = int64(off), s.indexNow()
	b, size, bad := entryAt(s.data, off)
	if bad == nil {
		err := s.frame.Parse(b, s.lim)
		if err == nil {
			s.raw, s.found = b, foundFrame
			s.records++
			s.advance(off + size)
			return true
		}
		bad = &badSpot{offset: int64(off), reason: err.Error()}
		// Delimited but invalid. If the entry after it is whole, the
		// length prefix was right: one damaged record, still aligned.
		if end := off + size; s.mode == SkipDamage && (end == len(s.data) || s.validEntryAt(end)) {
			s.damage = Damage{Index: s.index, Offset: int64(off), Reason: bad.reason, Last: end == len(s.data)}
			s.found = foundDamage
			s.advance(end)
			return true
		}
	}
	s.damage = Damage{Index: s.index, Offset: int64(off), Reason: bad.reason}
	s.found = foundDamage
	if PrewrittenFrom(s.data, int64(off)) {
		s.damage.Last, s.damage.Prewritten = true, true
		s.damage.Reason = fmt.Sprintf("%d zero bytes after the last record (the journal's pre-written space)", len(s.data)-off)
		s.done = true
		return true
	}
	if s.mode == StopAtDamage {
		s.done = true
		return true
	}
	resume := validFrameAfter(s.data, int64(off+1), s.lim)
	if resume < 0 {
		s.damage.Last = true
		if rest := len(s.data) - off; rest > 1 {
			s.damage.Reason += fmt.Sprintf("; no valid record in the %d bytes to the end of the segment", rest)
		}
		s.done = true
		return true
	}
	s.damage.Reason += fmt.Sprintf("; next valid record at offset %d (%d bytes skipped, indexes after it unknown)", resume, resume-int64(off))
	s.known = false
	s.off = int(resume)
	return true
}

func (s *Scanner) indexNow() uint64 {
	if s.known {
		return s.next
	}
	return 0
}

func (s *Scanner) advance(to int) {
	s.off = to
	s.next++
}

// validEntryAt reports whether a whole entry holding a valid frame starts
// at off, with the O(1) structural test before the checksum.
func (s *Scanner) validEntryAt(off int) bool {
	n, w := entryLen(s.data[off:])
	if w <= 0 || n < MinFrameSize || n > uint64(len(s.data)-off-w) {
		return false
	}
	b := s.data[off+w : off+w+int(n)]
	var f Frame
	return PlausibleFrame(b, s.lim) && f.Parse(b, s.lim) == nil
}

// Frame is the record Next found, or nil when it found damage. It is
// overwritten by the next call.
func (s *Scanner) Frame() *Frame {
	if s.found != foundFrame {
		return nil
	}
	return &s.frame
}

// Raw is the bytes of the frame Next found (nil for damage): they end
// the entry, so the frame is data[End()-len(Raw()):End()].
func (s *Scanner) Raw() []byte {
	if s.found != foundFrame {
		return nil
	}
	return s.raw
}

// End is the offset just past the entry of the record Next found.
func (s *Scanner) End() int64 { return int64(s.off) }

// Damage is the damage Next found, or nil when it found a record.
func (s *Scanner) Damage() *Damage {
	if s.found != foundDamage {
		return nil
	}
	return &s.damage
}

// Index is the journal index of what Next found; 0 when it is unknown.
func (s *Scanner) Index() uint64 { return s.index }

// Offset is the segment offset of the entry Next found.
func (s *Scanner) Offset() int64 { return s.at }

// Records counts the valid records found so far.
func (s *Scanner) Records() int { return s.records }

// NextIndex is the index after the last entry scanned, and whether it is
// known: once the scan is over, where the next segment must start.
func (s *Scanner) NextIndex() (uint64, bool) { return s.next, s.known }
