package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/keeppeek/statestore/journal"
)

// frame is one record frame parsed in place: every byte slice aliases the
// segment's bytes, so parsing allocates nothing. It follows the layout in
// the journal package documentation and accepts exactly what journal.Decode
// accepts (frame_test.go pins that); journal.Decode stays the source of the
// reason when a frame is refused.
type frame struct {
	kind      journal.Kind
	revision  uint64
	timeMs    int64
	namespace []byte
	key       []byte
	// PUT only.
	schema    []byte
	owner     []byte
	createdMs int64
	updatedMs int64
	expiresMs int64
	document  []byte
}

// Frame geometry, from journal/doc.go.
const (
	frameHeader    = 1 + 1 + 8 + 8 + 2 + 2 // version, kind, revision, time, namespace length, key length
	framePutHeader = 2 + 2 + 8 + 8 + 8 + 4 // schema, owner lengths; created, updated, expires; document length
	frameCRC       = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parseFrame fills f from b and reports whether b is a valid frame within
// lim. On false, f holds garbage and journal.Decode says why.
func parseFrame(b []byte, lim journal.Limits, f *frame) bool {
	if len(b) < journal.MinFrameSize {
		return false
	}
	body := b[:len(b)-frameCRC]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return false
	}
	return parseFields(b, lim, f)
}

// parseFields is parseFrame without the checksum, for a frame parseFrame
// already accepted.
func parseFields(b []byte, lim journal.Limits, f *frame) bool {
	if len(b) < journal.MinFrameSize {
		return false
	}
	body := b[:len(b)-frameCRC]
	if body[0] != journal.FormatVersion {
		return false
	}
	f.kind = journal.Kind(body[1])
	if f.kind != journal.KindPut && f.kind != journal.KindDelete && f.kind != journal.KindExpire {
		return false
	}
	f.revision = binary.LittleEndian.Uint64(body[2:])
	f.timeMs = int64(binary.LittleEndian.Uint64(body[10:]))
	nsLen := int(binary.LittleEndian.Uint16(body[18:]))
	keyLen := int(binary.LittleEndian.Uint16(body[20:]))
	if nsLen > lim.MaxNamespace || keyLen > lim.MaxKey {
		return false
	}
	p := body[frameHeader:]
	if len(p) < nsLen+keyLen {
		return false
	}
	f.namespace = p[:nsLen:nsLen]
	f.key = p[nsLen : nsLen+keyLen : nsLen+keyLen]
	p = p[nsLen+keyLen:]
	if f.kind != journal.KindPut {
		f.schema, f.owner, f.document = nil, nil, nil
		f.createdMs, f.updatedMs, f.expiresMs = 0, 0, 0
		return len(p) == 0
	}
	if len(p) < framePutHeader {
		return false
	}
	schemaLen := int(binary.LittleEndian.Uint16(p[0:]))
	ownerLen := int(binary.LittleEndian.Uint16(p[2:]))
	f.createdMs = int64(binary.LittleEndian.Uint64(p[4:]))
	f.updatedMs = int64(binary.LittleEndian.Uint64(p[12:]))
	f.expiresMs = int64(binary.LittleEndian.Uint64(p[20:]))
	docLen := uint64(binary.LittleEndian.Uint32(p[28:]))
	if schemaLen > lim.MaxSchema || ownerLen > lim.MaxOwner || docLen > uint64(lim.MaxDocument) {
		return false
	}
	p = p[framePutHeader:]
	if uint64(len(p)) != uint64(schemaLen+ownerLen)+docLen {
		return false
	}
	f.schema = p[:schemaLen:schemaLen]
	f.owner = p[schemaLen : schemaLen+ownerLen : schemaLen+ownerLen]
	f.document = p[schemaLen+ownerLen:]
	return true
}

// record copies f into a journal.Record that owns its memory, for code
// that keeps records (a materialize.View keeps documents).
func (f *frame) record() *journal.Record {
	return &journal.Record{
		Kind: f.kind, Namespace: string(f.namespace), Key: string(f.key), Revision: f.revision, TimeMs: f.timeMs,
		Schema: string(f.schema), Owner: string(f.owner), CreatedMs: f.createdMs, UpdatedMs: f.updatedMs,
		ExpiresMs: f.expiresMs, Document: append([]byte(nil), f.document...),
	}
}

// frameReason is why journal.Decode refuses b.
func frameReason(b []byte, lim journal.Limits) string {
	if _, err := journal.Decode(b, lim); err != nil {
		return err.Error()
	}
	return "record frame refused" // parseFrame and journal.Decode disagree; frame_test.go rules this out
}

// frameAt delimits the journal entry at off (a uvarint length, then that
// many bytes) the way tidwall/wal reads it and returns its frame and total
// size. When the entry cannot be delimited, b is nil and reason says why.
func frameAt(data []byte, off int) (b []byte, size int, reason string) {
	n, w := binary.Uvarint(data[off:])
	switch {
	case w == 0:
		return nil, 0, "entry length prefix cut off at end of file"
	case w < 0:
		return nil, 0, "entry length prefix overflows"
	case n > uint64(len(data)-off-w):
		return nil, 0, fmt.Sprintf("entry of %d bytes runs past end of file (%d bytes left)", n, len(data)-off-w)
	case n == 0:
		// tidwall/wal reads zero-filled bytes as a run of empty entries;
		// the journal never writes one.
		return nil, 0, "empty entry (zero-filled bytes)"
	}
	return data[off+w : off+w+int(n)], w + int(n), ""
}

// validFrameAt reports whether a whole, valid entry starts at off.
func validFrameAt(data []byte, off int, lim journal.Limits, scratch *frame) bool {
	n, w := binary.Uvarint(data[off:])
	if w <= 0 || n < journal.MinFrameSize || n > uint64(len(data)-off-w) {
		return false
	}
	b := data[off+w : off+w+int(n)]
	return journal.PlausibleFrame(b, lim) && parseFrame(b, lim, scratch)
}

// nextValidFrame is the first offset at or after from where a whole, valid
// entry starts, or -1. Every byte offset is tried, as the journal does
// before it cuts a tail: a damaged length prefix misaligns the entries, and
// following it blindly would hide the good records behind the damage.
func nextValidFrame(data []byte, from int, lim journal.Limits) int {
	return int(journal.NextFrame(data, int64(from), lim))
}
