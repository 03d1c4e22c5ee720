package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
)

// FormatVersion is the format version this code writes and the newest it
// reads. Bump it for any change a version-1 reader would misread.
const FormatVersion = 1

// magic opens every checkpoint file. It is not a valid start of JSON, zstd
// or a journal segment, so a file mixed up with another kind fails at once.
const magic = "KPCKPT\r\n"

// Geometry of the format; see the package documentation for the drawings.
const (
	headerSize  = 64
	trailerSize = 4
	// nsFixed and entryFixed are the fixed parts of a namespace record and
	// an entry record; the variable-length strings follow them.
	nsFixed    = 2 + 8 + 4 + 8
	entryFixed = 2 + 2 + 2 + 2 + 8 + 8 + 8 + 8 + 4

	// Header field offsets, used for decoding and for naming the offset of
	// a bad field in errors.
	offVersion    = 8
	offFlags      = 10
	offIndex      = 12
	offTime       = 20
	offNamespaces = 28
	offEntries    = 32
	offBytes      = 36
	offRawLen     = 44
	offCompLen    = 52
	offHeaderCRC  = 60
)

// castagnoli is CRC-32C, the checksum the journal uses too: hardware
// accelerated on amd64 and arm64, so checking 64 MiB costs milliseconds.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes an image. It is all a listing tool needs, and all Decode
// needs to bound the work before it touches the body.
type Header struct {
	Version    uint16
	Index      uint64 // journal index the image reflects: every record <= Index applied, none after
	TimeMs     int64  // when the image was taken, ms since the Unix epoch
	Namespaces uint32 // namespace counter records, emptied namespaces included
	Entries    uint32
	Bytes      uint64 // total value bytes (sum of len(Document))
}

// fileHeader is the whole on-disk header: Header plus the body lengths,
// which are properties of the encoding rather than of the view and so stay
// out of the exported type (keeping Header comparable with a literal).
type fileHeader struct {
	Header
	rawLen  uint64 // uncompressed body length
	compLen uint64 // compressed body length
}

// Limits bound what Decode accepts. They are checked against the header
// before the body is read and against each record before it is sliced, so
// a damaged or hostile file cannot make Decode allocate beyond them. A zero
// (or negative) field allows nothing: a caller that forgets a bound fails
// closed.
type Limits struct {
	// MaxNamespaces bounds the namespace counter records, which include
	// namespaces that are empty but keep their revision; pass a bound on
	// every namespace the store may ever have seen, not only the live ones.
	MaxNamespaces int
	MaxEntries    int   // entries in the whole image
	MaxTotalBytes int64 // value bytes in the whole image
	MaxNamespace  int   // bytes of a namespace name
	MaxKey        int   // bytes of a key
	MaxSchema     int   // bytes of a schema name
	MaxOwner      int   // bytes of an owner
	MaxDocument   int   // bytes of one document
}

// Sentinels wrapped by every *Error, so callers can tell damage from a
// newer writer from a file that is merely too big for their bounds.
var (
	// ErrCorrupt: the file is damaged, truncated or inconsistent.
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrVersion: the file was written by a newer format than this build reads.
	ErrVersion = errors.New("checkpoint format version not supported")
	// ErrLimits: the file is well formed but exceeds the caller's Limits.
	ErrLimits = errors.New("checkpoint exceeds limits")
)

// Error says which field of which file is wrong and why.
type Error struct {
	Path   string // file, when known
	Offset int64  // byte offset in the file of the bad field; -1 if unknown (inside the compressed body)
	Field  string // "magic", "version", "header crc", "entries", "key length", ...
	Reason string
	// Err is ErrCorrupt, ErrVersion or ErrLimits; for a read that failed
	// for another reason than the end of the file, it is that I/O error.
	Err error
}

func (e *Error) Error() string {
	s := "checkpoint"
	if e.Path != "" {
		s += " " + e.Path
	}
	s += ": " + e.Field + ": " + e.Reason
	if e.Offset >= 0 {
		s += fmt.Sprintf(" (file offset %d)", e.Offset)
	}
	return s
}

// Unwrap returns Err, so errors.Is(err, ErrCorrupt) and friends match.
func (e *Error) Unwrap() error { return e.Err }

func corrupt(off int64, field, format string, args ...any) *Error {
	return &Error{Offset: off, Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

func overLimit(off int64, field, format string, args ...any) *Error {
	return &Error{Offset: off, Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrLimits}
}

// appendHeader appends the 64-byte encoding of h.
func appendHeader(dst []byte, h *fileHeader) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, h.Version)
	dst = binary.LittleEndian.AppendUint16(dst, 0) // flags
	dst = binary.LittleEndian.AppendUint64(dst, h.Index)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.TimeMs))
	dst = binary.LittleEndian.AppendUint32(dst, h.Namespaces)
	dst = binary.LittleEndian.AppendUint32(dst, h.Entries)
	dst = binary.LittleEndian.AppendUint64(dst, h.Bytes)
	dst = binary.LittleEndian.AppendUint64(dst, h.rawLen)
	dst = binary.LittleEndian.AppendUint64(dst, h.compLen)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// parseHeader checks everything a header can show on its own: magic,
// version (before the CRC, because a newer version may lay out the rest
// differently), CRC, flags, and that the body lengths are possible for the
// counts. It does not apply Limits.
func parseHeader(b *[headerSize]byte) (fileHeader, error) {
	if string(b[:len(magic)]) != magic {
		return fileHeader{}, corrupt(0, "magic", "file starts with %q, not %q: not a checkpoint", b[:len(magic)], magic)
	}
	var h fileHeader
	h.Version = binary.LittleEndian.Uint16(b[offVersion:])
	switch {
	case h.Version == 0:
		return h, corrupt(offVersion, "version", "format version 0 does not exist")
	case h.Version > FormatVersion:
		return h, &Error{Offset: offVersion, Field: "version", Err: ErrVersion,
			Reason: fmt.Sprintf("format version %d is newer than the newest this build reads (%d); upgrade to read it (if no newer writer exists, the header is damaged)", h.Version, FormatVersion)}
	}
	want := binary.LittleEndian.Uint32(b[offHeaderCRC:])
	if got := crc32.Checksum(b[:offHeaderCRC], castagnoli); got != want {
		return h, corrupt(offHeaderCRC, "header crc", "stored CRC-32C %08x, computed %08x over the header", want, got)
	}
	if flags := binary.LittleEndian.Uint16(b[offFlags:]); flags != 0 {
		// The CRC matched, so the bits were written on purpose, by a
		// writer that knows a feature this one does not.
		return h, &Error{Offset: offFlags, Field: "flags", Err: ErrVersion,
			Reason: fmt.Sprintf("flags %#04x name features this build does not know", flags)}
	}
	h.Index = binary.LittleEndian.Uint64(b[offIndex:])
	h.TimeMs = int64(binary.LittleEndian.Uint64(b[offTime:]))
	h.Namespaces = binary.LittleEndian.Uint32(b[offNamespaces:])
	h.Entries = binary.LittleEndian.Uint32(b[offEntries:])
	h.Bytes = binary.LittleEndian.Uint64(b[offBytes:])
	h.rawLen = binary.LittleEndian.Uint64(b[offRawLen:])
	h.compLen = binary.LittleEndian.Uint64(b[offCompLen:])

	// The smallest body the counts allow: every string empty.
	minRaw := satAdd(satAdd(satMul(uint64(h.Namespaces), nsFixed), satMul(uint64(h.Entries), entryFixed)), h.Bytes)
	if h.rawLen < minRaw {
		return h, corrupt(offRawLen, "body length", "%d uncompressed bytes cannot hold %d namespace records, %d entries and %d value bytes (at least %d)",
			h.rawLen, h.Namespaces, h.Entries, h.Bytes, minRaw)
	}
	if maxComp := maxCompressed(h.rawLen); h.compLen > maxComp {
		return h, corrupt(offCompLen, "compressed length", "%d bytes is more than zstd needs for a %d-byte body (at most %d)", h.compLen, h.rawLen, maxComp)
	}
	return h, nil
}

// checkLimits applies lim to a parsed header. It runs before any byte of
// the body is read, so a header declaring a billion entries costs nothing.
func checkLimits(h *fileHeader, lim Limits) error {
	if uint64(h.Namespaces) > nonNeg(lim.MaxNamespaces) {
		return overLimit(offNamespaces, "namespaces", "%d namespace records exceed the limit of %d", h.Namespaces, nonNeg(lim.MaxNamespaces))
	}
	if uint64(h.Entries) > nonNeg(lim.MaxEntries) {
		return overLimit(offEntries, "entries", "%d entries exceed the limit of %d", h.Entries, nonNeg(lim.MaxEntries))
	}
	if h.Bytes > nonNeg(lim.MaxTotalBytes) {
		return overLimit(offBytes, "bytes", "%d value bytes exceed the limit of %d", h.Bytes, nonNeg(lim.MaxTotalBytes))
	}
	if maxDocs := satMul(uint64(h.Entries), nonNeg(lim.MaxDocument)); h.Bytes > maxDocs {
		return overLimit(offBytes, "bytes", "%d value bytes in %d entries need a document over the %d-byte limit", h.Bytes, h.Entries, nonNeg(lim.MaxDocument))
	}
	maxRaw := bodyBound(&h.Header, lim)
	if h.rawLen > maxRaw {
		return overLimit(offRawLen, "body length", "%d uncompressed bytes exceed the %d that %d namespace records, %d entries and %d value bytes can take within the limits",
			h.rawLen, maxRaw, h.Namespaces, h.Entries, h.Bytes)
	}
	// One buffer must hold the body (plus the decoder's slack); on a
	// 32-bit build that is the tighter bound.
	if h.rawLen > uint64(math.MaxInt-decodeSlack) || h.compLen > uint64(math.MaxInt-trailerSize) {
		return overLimit(offRawLen, "body length", "%d bytes do not fit in memory on this platform", h.rawLen)
	}
	return nil
}

// bodyBound is the largest uncompressed body the header's counts can need
// when every string is as long as lim allows.
func bodyBound(h *Header, lim Limits) uint64 {
	nsRec := satAdd(nsFixed, nonNeg(lim.MaxNamespace))
	entRec := satAdd(satAdd(satAdd(satAdd(entryFixed, nonNeg(lim.MaxNamespace)), nonNeg(lim.MaxKey)), nonNeg(lim.MaxSchema)), nonNeg(lim.MaxOwner))
	return satAdd(satAdd(satMul(uint64(h.Namespaces), nsRec), satMul(uint64(h.Entries), entRec)), h.Bytes)
}

// maxCompressed bounds the zstd encoding of n bytes: incompressible data
// is stored in raw blocks of at most 128 KiB with a 3-byte header each,
// plus a frame header (at most 18 bytes) and a 4-byte checksum. n/1024 +
// 64 covers that with room to spare while still refusing a compressed
// length that could only mean damage.
func maxCompressed(n uint64) uint64 { return satAdd(satAdd(n, n/1024), 64) }

func nonNeg[T int | int64](v T) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// satAdd and satMul saturate instead of wrapping, so a bound computed from
// hostile counts and huge limits can only grow, never wrap to something
// small that a bad length would pass.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// ReadHeader reads and checks only the header: magic, version, header CRC
// and that the body lengths are possible for the counts. It reads exactly
// 64 bytes, so it suits listing and stat tools; it neither applies Limits
// nor verifies the body.
func ReadHeader(r io.Reader) (Header, error) {
	var b [headerSize]byte
	if err := readFull(r, b[:], 0, "header"); err != nil {
		return Header{}, err
	}
	h, err := parseHeader(&b)
	return h.Header, err
}

// readFull fills b from r. A short read is corruption (the file ends inside
// field at offset off+n); any other failure is reported as the I/O error it
// is, because a disk that cannot be read says nothing about the file.
func readFull(r io.Reader, b []byte, off int64, field string) error {
	n, err := io.ReadFull(r, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return corrupt(off+int64(n), field, "file ends after %d of the %d bytes of the %s (truncated)", n, len(b), field)
	default:
		return &Error{Offset: off + int64(n), Field: field, Reason: "read failed: " + err.Error(), Err: err}
	}
}
