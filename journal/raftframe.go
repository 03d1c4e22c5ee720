package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// The raft entry frame (kind 4). A journal that is hashicorp/raft's
// LogStore (replica/raftlog) holds one raft.Log per entry, the journal
// index being the raft index, framed like every record: version, kind,
// fixed-size header, variable parts, CRC-32C of everything before it. All
// integers little-endian:
//
//	 offset  size  field
//	+------+------+-------------------------------------------------+
//	|   0  |   1  | version (1)                                     |
//	|   1  |   1  | kind: 4 RAFT                                    |
//	|   2  |   8  | term                                            |
//	|  10  |   8  | commit index staged when the entry was stored   |
//	|  18  |   8  | appended at: seconds since the Unix epoch (i64) |
//	|  26  |   4  | appended at: nanoseconds, below 1e9             |
//	|  30  |   1  | raft log type                                   |
//	|  31  |   4  | extensions length E                             |
//	|  35  |   4  | data length D                                   |
//	|  39  |   E  | extensions                                      |
//	| 39+E |   D  | data                                            |
//	| end-4|   4  | CRC-32C (Castagnoli) of every byte before it    |
//	+------+------+-------------------------------------------------+
//
// The commit field is how raft's CommitTrackingLogStore is kept without a
// second fdatasync: every entry of a StoreLogs batch carries the commit
// index raft staged before it, so the batch's one sync persists both, and
// the last entry on disk names the newest persisted commit index.
// Seconds and nanoseconds (not UnixNano) so that every time.Time raft can
// hand over, the zero time included, round-trips as the same instant.

// raftHeaderSize is the fixed part of a raft frame, before E and D.
const raftHeaderSize = 1 + 1 + 8 + 8 + 8 + 4 + 1 + 4 + 4

// RaftEntry is one raft log entry as a KindRaft record holds it. Its index
// is the journal index of its record.
type RaftEntry struct {
	Term       uint64
	Commit     uint64 // the commit index staged when the entry was stored
	Type       uint8  // raft.LogType
	AppendedAt time.Time
	Extensions []byte
	Data       []byte
}

// zeroUnix is what time.Time{}.Unix() returns: the zero time is stored as
// it, and read back as the zero time (not its instant in UTC, which Equal
// would accept too, but IsZero is what raft asks).
var zeroUnix = time.Time{}.Unix()

func (e *RaftEntry) encodedSize() int {
	if e == nil {
		return 0
	}
	return raftHeaderSize + len(e.Extensions) + len(e.Data) + crcSize
}

// appendRaftFrame appends the kind-4 frame of e to dst.
func appendRaftFrame(dst []byte, e *RaftEntry) ([]byte, error) {
	if e == nil {
		return dst, frameErr("raft", "a RAFT record without its entry")
	}
	if uint64(len(e.Extensions)) > 0xFFFFFFFF || uint64(len(e.Data)) > 0xFFFFFFFF {
		return dst, frameErr("raft data length", "exceeds 4 GiB")
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(KindRaft))
	dst = binary.LittleEndian.AppendUint64(dst, e.Term)
	dst = binary.LittleEndian.AppendUint64(dst, e.Commit)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.AppendedAt.Unix()))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(e.AppendedAt.Nanosecond()))
	dst = append(dst, e.Type)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.Extensions)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.Data)))
	dst = append(dst, e.Extensions...)
	dst = append(dst, e.Data...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// parseRaft fills f.Raft from body, a kind-4 frame without its CRC (which
// Parse has checked), aliasing body.
func (f *Frame) parseRaft(body []byte, lim Limits) error {
	f.Revision, f.TimeMs, f.Namespace, f.Key = 0, 0, nil, nil
	f.Schema, f.Owner, f.Document = nil, nil, nil
	f.CreatedMs, f.UpdatedMs, f.ExpiresMs = 0, 0, 0
	if lim.MaxRaftEntry <= 0 {
		return frameErr("kind", "kind 4 (RAFT) in a journal whose limits allow no raft entry")
	}
	if len(body) < raftHeaderSize {
		return frameErr("length", "%d bytes cannot hold a RAFT header (%d)", len(body), raftHeaderSize)
	}
	e := &f.Raft
	e.Term = binary.LittleEndian.Uint64(body[2:])
	e.Commit = binary.LittleEndian.Uint64(body[10:])
	sec := int64(binary.LittleEndian.Uint64(body[18:]))
	nsec := binary.LittleEndian.Uint32(body[26:])
	if nsec >= 1e9 {
		return frameErr("appended at", "%d nanoseconds is not below one second", nsec)
	}
	if sec == zeroUnix && nsec == 0 {
		e.AppendedAt = time.Time{}
	} else {
		e.AppendedAt = time.Unix(sec, int64(nsec)).UTC()
	}
	e.Type = body[30]
	extLen := uint64(binary.LittleEndian.Uint32(body[31:]))
	dataLen := uint64(binary.LittleEndian.Uint32(body[35:]))
	if extLen+dataLen > uint64(lim.MaxRaftEntry) {
		return frameErr("raft data length", "%d bytes of extensions and data exceed the %d-byte limit", extLen+dataLen, lim.MaxRaftEntry)
	}
	p := body[raftHeaderSize:]
	if uint64(len(p)) != extLen+dataLen {
		return frameErr("length", "RAFT body is %d bytes, header declares %d", len(p), extLen+dataLen)
	}
	e.Extensions = p[:extLen:extLen]
	e.Data = p[extLen:]
	return nil
}

// plausibleRaftFrame is PlausibleFrame for kind 4: O(1), no CRC.
func plausibleRaftFrame(frame []byte, lim Limits) bool {
	if lim.MaxRaftEntry <= 0 || len(frame) < raftHeaderSize+crcSize {
		return false
	}
	extLen := uint64(binary.LittleEndian.Uint32(frame[31:]))
	dataLen := uint64(binary.LittleEndian.Uint32(frame[35:]))
	return binary.LittleEndian.Uint32(frame[26:]) < 1e9 && extLen+dataLen <= uint64(lim.MaxRaftEntry) &&
		uint64(len(frame)) == raftHeaderSize+extLen+dataLen+crcSize
}

// raftPrefixConsistent is framePrefixConsistent for kind 4: the header
// fields present in p, the written prefix of a frame declaring n bytes.
func raftPrefixConsistent(p []byte, n int, lim Limits) string {
	if lim.MaxRaftEntry <= 0 {
		return "kind 4 (RAFT) in a journal whose limits allow no raft entry"
	}
	if n < raftHeaderSize+crcSize {
		return fmt.Sprintf("a RAFT frame of %d bytes cannot hold its header", n)
	}
	if len(p) >= 30 && binary.LittleEndian.Uint32(p[26:]) >= 1e9 {
		return "appended-at nanoseconds not below one second"
	}
	if len(p) < raftHeaderSize {
		return ""
	}
	extLen := uint64(binary.LittleEndian.Uint32(p[31:]))
	dataLen := uint64(binary.LittleEndian.Uint32(p[35:]))
	if extLen+dataLen > uint64(lim.MaxRaftEntry) {
		return "raft extensions and data beyond the limits"
	}
	if want := raftHeaderSize + extLen + dataLen + crcSize; uint64(n) != want {
		return fmt.Sprintf("the RAFT header declares a %d-byte frame, the entry %d", want, n)
	}
	return ""
}
