package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/keeppeek/statestore/materialize"
)

// encoderWindow is the zstd window the encoder uses. Documents are small
// and alike, so almost all the redundancy is within a few hundred KiB; a
// window larger than this buys little ratio for a lot of encoder memory
// (measured against 1 MiB: the same size for 64 MiB of media intents, 5%
// larger for 9 MiB, the same for a view smaller than the window, while the
// encoder's history buffer, twice the window, is kept between calls).
// The decoder refuses frames declaring a larger window (maxWindow).
const encoderWindow = 512 << 10

// newEncoder builds a zstd encoder with the options every image is written
// with.
func newEncoder() *zstd.Encoder { return newEncoderMem(true) }

// newEncoderMem is newEncoder with the lower-memory option as given
// (TestLowerEncoderMemSameBytes compares the two).
func newEncoderMem(lowerMem bool) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		// The window goes before the level: a level given first, with no
		// window yet, also sets 64 KiB blocks, and then every 64 KiB pays
		// for a block's entropy tables (measured: 128 KiB blocks encode
		// faster and a few percent smaller).
		zstd.WithWindowSize(encoderWindow),
		// Fastest: a checkpoint is taken while the store serves, and
		// decode speed, which bounds open time, barely depends on level.
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		// Fixed options, so the output depends only on the input: encoding
		// the same view twice yields identical bytes on any machine. One
		// goroutine: a checkpoint runs beside a serving store, and on a
		// small machine parallel compression would take the cores the
		// commit path needs (measured: no gain with another load running).
		zstd.WithEncoderConcurrency(1),
		// The content checksum covers the decompressed body, which the
		// trailer CRC (over the compressed bytes) cannot.
		zstd.WithEncoderCRC(true),
		// Always a whole frame, even for an empty view.
		zstd.WithZeroFrames(true),
		// The history is then the window plus one block (640 KiB) instead
		// of at least 1 MiB, and the block buffers start small and grow to
		// what the images need: the state is kept between checkpoints, so
		// this is resident in every store's process. Matches still reach
		// the whole window, so the bytes written are the same
		// (TestLowerEncoderMemSameBytes).
		zstd.WithLowerEncoderMem(lowerMem),
	)
	if err != nil {
		panic("checkpoint: zstd encoder options: " + err.Error())
	}
	return enc
}

// encState is what one Encode needs besides the view: the encoder (its
// history, match table and block buffers come to about 1.2 MiB) and the
// buffers the image is gathered in. Nothing of it outlives the call. A
// state kept for the next checkpoint stays live between them, and the
// collector's heap goal doubles what is live: in the specification's
// serial process that was 1.1 MiB of a 2 MiB live heap and about 2 MiB of
// resident memory for good, against about half a millisecond to build the
// encoder again once per checkpoint (every DefaultCheckpointBytes of
// journal, hundreds of writes apart).
type encState struct {
	enc *zstd.Encoder
	// comp collects the whole image: the header, written first, carries
	// the compressed length, so the body must be held until it is known.
	comp    bytes.Buffer
	scratch []byte // records gathered for the encoder
	nss     []nsRec
}

// nsRec is a namespace's counters as the view states them and as its
// entries add up while they are encoded.
type nsRec struct {
	name string
	materialize.Namespace
	gotEntries int
	gotBytes   int64
}

// lastImageLen is the length of the last image encoded. Images taken one
// after another differ little, so growing the next image's buffer to a bit
// more than that up front replaces the doubling (and copying) a large
// image would otherwise go through.
var lastImageLen atomic.Int64

func newEncState() *encState {
	return &encState{enc: newEncoder(), scratch: make([]byte, 0, scratchSize)}
}

// scratchSize is how much record metadata Encode gathers before handing it
// to the encoder, so the encoder sees few large writes, not many tiny ones.
// Documents of directDoc bytes or more are not gathered.
const (
	scratchSize = 64 << 10
	directDoc   = 1 << 10
)

// Encode writes the image of v at journal index index, taken at timeMs, to
// w in a single Write: header, zstd-compressed body, trailer CRC. It takes
// no lock: v must be an immutable snapshot (a published view or a clone
// nobody mutates), which is what lets the store checkpoint while it keeps
// serving.
//
// Encode refuses (writing nothing) a view it could not encode faithfully or
// that Decode would reject: a string or count too long for its field, a
// namespace with revision 0, counters that disagree with the entries. Such
// an image would let the journal drop records that no checkpoint holds.
func Encode(w io.Writer, v *materialize.View, index uint64, timeMs int64) (Header, error) {
	st := newEncState()
	nss := st.nss
	var nsErr error
	v.Namespaces(func(name string, n materialize.Namespace) bool {
		switch {
		case len(name) > math.MaxUint16:
			nsErr = fmt.Errorf("checkpoint: encode: namespace %.40q... is %d bytes, the format holds at most %d", name, len(name), math.MaxUint16)
		case n.Revision == 0:
			nsErr = fmt.Errorf("checkpoint: encode: namespace %q has revision 0", name)
		case n.Entries < 0 || uint64(n.Entries) > math.MaxUint32 || n.Bytes < 0:
			nsErr = fmt.Errorf("checkpoint: encode: namespace %q counts %d entries and %d bytes", name, n.Entries, n.Bytes)
		}
		nss = append(nss, nsRec{name: name, Namespace: n})
		return nsErr == nil
	})
	if nsErr != nil {
		return Header{}, nsErr
	}
	entries, totalBytes, _ := v.Totals()
	if uint64(len(nss)) > math.MaxUint32 || entries < 0 || uint64(entries) > math.MaxUint32 || totalBytes < 0 {
		return Header{}, fmt.Errorf("checkpoint: encode: %d namespaces, %d entries and %d bytes do not fit the format", len(nss), entries, totalBytes)
	}
	h := fileHeader{Header: Header{Version: FormatVersion, Index: index, TimeMs: timeMs,
		Namespaces: uint32(len(nss)), Entries: uint32(entries), Bytes: uint64(totalBytes)}}

	// The header goes in front of the compressed body once its lengths
	// are known, so the whole image reaches w in one Write (one write(2)
	// for a file, not three).
	comp := &st.comp
	last := int(lastImageLen.Load())
	comp.Grow(last + last/8)
	var blank [headerSize]byte
	comp.Write(blank[:])
	enc := st.enc
	enc.Reset(comp)

	scratch := st.scratch[:0]
	var raw uint64
	write := func(p []byte) error {
		raw += uint64(len(p))
		_, err := enc.Write(p)
		return err
	}
	for _, n := range nss {
		scratch = binary.LittleEndian.AppendUint16(scratch, uint16(len(n.name)))
		scratch = append(scratch, n.name...)
		scratch = binary.LittleEndian.AppendUint64(scratch, n.Revision)
		scratch = binary.LittleEndian.AppendUint32(scratch, uint32(n.Entries))
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(n.Bytes))
		if len(scratch) >= scratchSize/2 {
			if err := write(scratch); err != nil {
				return Header{}, err
			}
			scratch = scratch[:0]
		}
	}

	// Entries come in (namespace, key) order, and so do the namespace
	// records, so one cursor pairs each entry with its namespace's counters.
	var (
		cur      = -1
		count    int
		bytesSum int64
		encErr   error
	)
	v.All(func(e *materialize.Entry) bool {
		for cur < len(nss) && (cur < 0 || nss[cur].name < e.Namespace) {
			cur++
		}
		if cur >= len(nss) || nss[cur].name != e.Namespace {
			encErr = fmt.Errorf("checkpoint: encode: entry %q in namespace %q, which has no revision counter", e.Key, e.Namespace)
			return false
		}
		ns := &nss[cur]
		switch {
		case len(e.Namespace) > math.MaxUint16 || len(e.Key) > math.MaxUint16 || len(e.Schema) > math.MaxUint16 || len(e.Owner) > math.MaxUint16:
			encErr = fmt.Errorf("checkpoint: encode: entry %q in namespace %q has a string field over %d bytes", e.Key, e.Namespace, math.MaxUint16)
		case uint64(len(e.Document)) > math.MaxUint32:
			encErr = fmt.Errorf("checkpoint: encode: entry %q in namespace %q has a %d-byte document, the format holds at most %d", e.Key, e.Namespace, len(e.Document), uint32(math.MaxUint32))
		case e.Revision == 0 || e.Revision > ns.Revision:
			encErr = fmt.Errorf("checkpoint: encode: entry %q in namespace %q has revision %d outside 1..%d", e.Key, e.Namespace, e.Revision, ns.Revision)
		}
		if encErr != nil {
			return false
		}
		ns.gotEntries++
		ns.gotBytes += int64(len(e.Document))
		count++
		bytesSum += int64(len(e.Document))

		if len(scratch) >= scratchSize/2 {
			if encErr = write(scratch); encErr != nil {
				return false
			}
			scratch = scratch[:0]
		}

		scratch = binary.LittleEndian.AppendUint16(scratch, uint16(len(e.Namespace)))
		scratch = binary.LittleEndian.AppendUint16(scratch, uint16(len(e.Key)))
		scratch = binary.LittleEndian.AppendUint16(scratch, uint16(len(e.Schema)))
		scratch = binary.LittleEndian.AppendUint16(scratch, uint16(len(e.Owner)))
		scratch = binary.LittleEndian.AppendUint64(scratch, e.Revision)
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(e.CreatedMs))
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(e.UpdatedMs))
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(e.ExpiresMs))
		scratch = binary.LittleEndian.AppendUint32(scratch, uint32(len(e.Document)))
		scratch = append(scratch, e.Namespace...)
		scratch = append(scratch, e.Key...)
		scratch = append(scratch, e.Schema...)
		scratch = append(scratch, e.Owner...)
		// Small documents ride along in scratch. A larger one goes straight
		// to the encoder, which copies it into its block buffer anyway:
		// gathering it first would copy every byte once more (measured:
		// 2-3% of an encode of 2 KiB documents).
		if len(e.Document) < directDoc && len(scratch)+len(e.Document) <= scratchSize {
			scratch = append(scratch, e.Document...)
			return true
		}
		if encErr = write(scratch); encErr == nil {
			encErr = write(e.Document)
		}
		scratch = scratch[:0]
		return encErr == nil
	})
	if encErr != nil {
		return Header{}, encErr
	}
	if err := write(scratch); err != nil {
		return Header{}, err
	}
	if err := enc.Close(); err != nil {
		return Header{}, fmt.Errorf("checkpoint: encode: zstd: %w", err)
	}

	if count != entries || bytesSum != totalBytes {
		return Header{}, fmt.Errorf("checkpoint: encode: view totals say %d entries / %d bytes, its entries hold %d / %d", entries, totalBytes, count, bytesSum)
	}
	for _, n := range nss {
		if n.gotEntries != n.Entries || n.gotBytes != n.Bytes {
			return Header{}, fmt.Errorf("checkpoint: encode: namespace %q counts %d entries / %d bytes, its entries hold %d / %d", n.name, n.Entries, n.Bytes, n.gotEntries, n.gotBytes)
		}
	}
	h.rawLen = raw
	h.compLen = uint64(comp.Len() - headerSize)

	img := comp.Bytes()
	appendHeader(img[:0], &h) // in place: img has the room
	comp.Write(binary.LittleEndian.AppendUint32(comp.AvailableBuffer(), crc32.Checksum(img[headerSize:], castagnoli)))
	lastImageLen.Store(int64(comp.Len()))
	if _, err := w.Write(comp.Bytes()); err != nil {
		return Header{}, fmt.Errorf("checkpoint: write image: %w", err)
	}
	return h.Header, nil
}
