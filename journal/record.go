package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/keeppeek/statestore/quota"
)

// Kind is the type of a journal record.
type Kind uint8

// Record kinds. The values are on disk: never renumber them.
const (
	KindPut    Kind = 1 // a complete document replaced or created
	KindDelete Kind = 2 // a key removed by a client
	KindExpire Kind = 3 // a key removed because its lease lapsed
	// KindRaft is one hashicorp/raft log entry (raftframe.go): the frame
	// of a journal that is raft's LogStore (replica/raftlog). A journal
	// read with Limits.MaxRaftEntry 0, as the store's is, refuses it.
	KindRaft Kind = 4
)

// String names the kind as the wire protocol does.
func (k Kind) String() string {
	switch k {
	case KindPut:
		return "PUT"
	case KindDelete:
		return "DELETE"
	case KindExpire:
		return "EXPIRE"
	case KindRaft:
		return "RAFT"
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// FormatVersion is the frame version this code writes and the newest it reads.
const FormatVersion = 1

// Frame geometry. See the package documentation for the drawing.
const (
	headerSize    = 1 + 1 + 8 + 8 + 2 + 2 // version, kind, revision, time, ns len, key len
	putHeaderSize = 2 + 2 + 8 + 8 + 8 + 4 // schema len, owner len, created, updated, expires, doc len
	crcSize       = 4
	// MinFrameSize is the smallest valid frame: a DELETE of a one-byte key
	// in a one-byte namespace would be larger; anything shorter is garbage.
	MinFrameSize = headerSize + crcSize
)

// castagnoli is CRC-32C: hardware-accelerated on amd64 and arm64, and a
// stronger code than IEEE for the short frames the journal writes.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one committed mutation. Every record carries the namespace
// revision it produces, so replay can check continuity record by record.
type Record struct {
	Kind      Kind
	Namespace string
	Key       string
	Revision  uint64 // namespace revision this record produces (previous + 1)
	TimeMs    int64  // wall-clock ms at commit

	// PUT only.
	Schema    string
	Owner     string
	CreatedMs int64
	UpdatedMs int64
	ExpiresMs int64 // 0: no lease
	Document  []byte

	// Raft is the entry of a KindRaft record (and nil for every other
	// kind); the fields above stay zero.
	Raft *RaftEntry
}

// Limits bound what the decoder accepts before it copies anything, so a
// corrupted length can never make it allocate or read beyond them.
type Limits struct {
	MaxNamespace int // bytes
	MaxKey       int // bytes
	MaxSchema    int // bytes
	MaxOwner     int // bytes
	MaxDocument  int // bytes
	// MaxRaftEntry bounds a KindRaft frame's data and extensions together
	// (bytes). 0, as in DefaultLimits, refuses the kind: a store journal
	// never holds raft entries, and a torn-tail judgement made with store
	// limits keeps its tight bound on a frame's length.
	MaxRaftEntry int
}

// DefaultLimits matches the store's defaults (quota.Default).
var DefaultLimits = Limits{MaxNamespace: quota.DefaultNamespaceBytes, MaxKey: quota.DefaultKeyBytes,
	MaxSchema: quota.SchemaNameBytes, MaxOwner: quota.OwnerBytes, MaxDocument: quota.DefaultDocumentBytes}

// ErrFrame is wrapped by every frame decoding failure.
var ErrFrame = errors.New("invalid record frame")

// FrameError says why a frame failed to decode.
type FrameError struct {
	Field  string // what was wrong: "crc", "version", "kind", "namespace length", ...
	Reason string
}

func (e *FrameError) Error() string { return fmt.Sprintf("record %s: %s", e.Field, e.Reason) }

// Unwrap lets errors.Is(err, ErrFrame) match.
func (e *FrameError) Unwrap() error { return ErrFrame }

func frameErr(field, format string, args ...any) error {
	return &FrameError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// EncodedSize is the frame size of r, so batches can be sized without encoding.
func (r *Record) EncodedSize() int {
	if r.Kind == KindRaft {
		return r.Raft.encodedSize()
	}
	n := headerSize + len(r.Namespace) + len(r.Key) + crcSize
	if r.Kind == KindPut {
		n += putHeaderSize + len(r.Schema) + len(r.Owner) + len(r.Document)
	}
	return n
}

// AppendFrame appends the framed encoding of r to dst. It refuses fields
// whose length cannot be represented, never truncating silently.
func (r *Record) AppendFrame(dst []byte) ([]byte, error) {
	if len(r.Namespace) > 0xFFFF || len(r.Key) > 0xFFFF || len(r.Schema) > 0xFFFF || len(r.Owner) > 0xFFFF {
		return dst, frameErr("length", "a string field exceeds 65535 bytes")
	}
	if uint64(len(r.Document)) > 0xFFFFFFFF {
		return dst, frameErr("document length", "exceeds 4 GiB")
	}
	if r.Kind == KindRaft {
		return appendRaftFrame(dst, r.Raft)
	}
	if r.Kind != KindPut && r.Kind != KindDelete && r.Kind != KindExpire {
		return dst, frameErr("kind", "unknown kind %d", r.Kind)
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(r.Kind))
	dst = binary.LittleEndian.AppendUint64(dst, r.Revision)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.TimeMs))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Namespace)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Key)))
	dst = append(dst, r.Namespace...)
	dst = append(dst, r.Key...)
	if r.Kind == KindPut {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Schema)))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Owner)))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.CreatedMs))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.UpdatedMs))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.ExpiresMs))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Document)))
		dst = append(dst, r.Schema...)
		dst = append(dst, r.Owner...)
		dst = append(dst, r.Document...)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// Encode returns the framed encoding of r.
func (r *Record) Encode() ([]byte, error) {
	return r.AppendFrame(make([]byte, 0, r.EncodedSize()))
}

// Decode parses one frame. It checks the checksum first, then every length
// against lim before slicing, so metadata is validated before the document
// is touched. Strings are copied; Document is copied too, so the result
// never aliases frame. [Frame.Parse] reads a frame in place instead.
func Decode(frame []byte, lim Limits) (*Record, error) {
	var f Frame
	if err := f.Parse(frame, lim); err != nil {
		return nil, err
	}
	return f.Record(), nil
}

// maxFrameSize is the largest frame any record within lim encodes to.
func maxFrameSize(lim Limits) int {
	n := headerSize + lim.MaxNamespace + lim.MaxKey + putHeaderSize + lim.MaxSchema + lim.MaxOwner + lim.MaxDocument + crcSize
	if lim.MaxRaftEntry > 0 {
		n = max(n, raftHeaderSize+lim.MaxRaftEntry+crcSize)
	}
	return n
}

// PlausibleFrame reports whether frame's own length fields are within lim
// and add up to its size, without computing the CRC. Searching damaged
// bytes for a valid frame calls it at every offset, so it must cost O(1):
// only a frame that passes is worth a CRC over up to maxFrameSize bytes.
func PlausibleFrame(frame []byte, lim Limits) bool {
	if len(frame) < MinFrameSize || len(frame) > maxFrameSize(lim) || frame[0] != FormatVersion {
		return false
	}
	kind := Kind(frame[1])
	if kind == KindRaft {
		return plausibleRaftFrame(frame, lim)
	}
	nsLen := int(binary.LittleEndian.Uint16(frame[18:]))
	keyLen := int(binary.LittleEndian.Uint16(frame[20:]))
	if nsLen > lim.MaxNamespace || keyLen > lim.MaxKey {
		return false
	}
	base := headerSize + nsLen + keyLen
	switch kind {
	case KindDelete, KindExpire:
		return len(frame) == base+crcSize
	case KindPut:
		if len(frame) < base+putHeaderSize+crcSize {
			return false
		}
		p := frame[base:]
		schemaLen := int(binary.LittleEndian.Uint16(p[0:]))
		ownerLen := int(binary.LittleEndian.Uint16(p[2:]))
		docLen := int(binary.LittleEndian.Uint32(p[28:]))
		return schemaLen <= lim.MaxSchema && ownerLen <= lim.MaxOwner && docLen <= lim.MaxDocument &&
			len(frame) == base+putHeaderSize+schemaLen+ownerLen+docLen+crcSize
	}
	return false
}
