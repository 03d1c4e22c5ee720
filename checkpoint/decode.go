package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/keeppeek/statestore/materialize"
)

// maxWindow is the largest zstd window Decode accepts. Our encoder uses
// encoderWindow; the headroom lets a later writer raise its window without
// a format change, while a frame demanding more is refused as damage.
const maxWindow = 8 << 20

// decodeSlack is extra capacity given to the decompression buffer: the
// zstd decoder over-allocates this much when it sizes a buffer itself, and
// giving it the room up front keeps it from reallocating the whole body.
const decodeSlack = 64

// decoders holds zstd decoders for reuse. Each decodes synchronously
// (concurrency 1: DecodeAll of one frame cannot be parallelised, and no
// goroutine outlives a call) into a buffer it may not grow (cap limit), so
// the caller's allocation is the bound.
var decoders = sync.Pool{New: func() any {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxWindow(maxWindow),
	)
	if err != nil {
		panic("checkpoint: zstd decoder options: " + err.Error())
	}
	return dec
}}

// inBufs holds buffers for the compressed body and trailer as read from
// the file; they are garbage once decompressed, so they are reused.
var inBufs = sync.Pool{New: func() any { return new([]byte) }}

// Decode reads an image from r and rebuilds its view. In order it checks
// the magic, the version (a newer version fails with ErrVersion), the header
// CRC, the header's counts and lengths against lim (ErrLimits, before any
// byte of the body is read), the trailer CRC over the compressed body, then
// decompresses into a buffer of exactly the declared length, checks every
// record's lengths against lim and the bytes left before slicing, checks
// that the records add up to the header's counts, and finally builds the
// view with materialize.Restore. It reads nothing after the trailer except
// to make sure nothing is there. Every failure is an *Error.
func Decode(r io.Reader, lim Limits) (Header, *materialize.View, error) {
	return decode(r, -1, lim)
}

// decode is Decode for a source of known size (size >= 0), so a truncated
// or overlong file is refused before the body is allocated.
func decode(r io.Reader, size int64, lim Limits) (Header, *materialize.View, error) {
	var hb [headerSize]byte
	if err := readFull(r, hb[:], 0, "header"); err != nil {
		return Header{}, nil, err
	}
	fh, err := parseHeader(&hb)
	h := fh.Header
	if err != nil {
		return h, nil, err
	}
	if err := checkLimits(&fh, lim); err != nil {
		return h, nil, err
	}
	end := int64(headerSize) + int64(fh.compLen) + trailerSize // checkLimits keeps this in range
	if size >= 0 && size != end {
		if size < end {
			return h, nil, corrupt(size, "body", "file is %d bytes, the header declares %d (truncated)", size, end)
		}
		return h, nil, corrupt(end, "trailing data", "file is %d bytes, the image ends at %d", size, end)
	}

	bp := inBufs.Get().(*[]byte)
	defer inBufs.Put(bp)
	n := int(fh.compLen) + trailerSize
	var in []byte
	var got int
	if size < 0 {
		// A stream of unknown size (a backup being restored) may be
		// shorter than its header claims: grow the buffer with the bytes
		// that arrive instead of trusting a CRC-valid header's length.
		in, err = io.ReadAll(io.LimitReader(r, int64(n)))
		got = len(in)
		if err == nil && got < n {
			err = io.ErrUnexpectedEOF
		}
	} else {
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		in = (*bp)[:n]
		got, err = io.ReadFull(r, in)
	}
	if err != nil {
		field := "body"
		if uint64(got) >= fh.compLen {
			field = "trailer"
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return h, nil, corrupt(headerSize+int64(got), field, "file ends after %d of the %d compressed body and trailer bytes (truncated)", got, n)
		}
		return h, nil, &Error{Offset: headerSize + int64(got), Field: field, Reason: "read failed: " + err.Error(), Err: err}
	}
	var one [1]byte
	if got, err := io.ReadFull(r, one[:]); got != 0 {
		return h, nil, corrupt(end, "trailing data", "bytes follow the trailer")
	} else if !errors.Is(err, io.EOF) {
		return h, nil, &Error{Offset: end, Field: "trailing data", Reason: "read failed: " + err.Error(), Err: err}
	}
	comp := in[:fh.compLen]
	want := binary.LittleEndian.Uint32(in[fh.compLen:])
	if got := crc32.Checksum(comp, castagnoli); got != want {
		return h, nil, corrupt(headerSize+int64(fh.compLen), "body crc", "stored CRC-32C %08x, computed %08x over the %d compressed body bytes", want, got, fh.compLen)
	}

	if err := checkFrame(comp); err != nil {
		return h, nil, err
	}
	raw, err := decompress(comp, fh.rawLen)
	if err != nil {
		return h, nil, err
	}
	v, err := parseBody(raw, &h, lim)
	if err != nil {
		return h, nil, err
	}
	return h, v, nil
}

// checkFrame requires the compressed body to be what the encoder writes:
// exactly one zstd frame, not skippable, without a dictionary, carrying its
// content checksum, and nothing after it. Without this the body CRC would be
// the only guard of a body, and a CRC is easy to recompute: an empty body,
// a skippable frame or a frame without a checksum would decompress to a
// self-consistent image of some other view (FuzzCheckpointLoad built the
// first from the real image in seconds). With it, changing the decompressed
// body also means forging its xxhash64.
func checkFrame(comp []byte) error {
	var zh zstd.Header
	if err := zh.Decode(comp); err != nil {
		return corrupt(headerSize, "body frame", "the body does not start with a zstd frame header: %v", err)
	}
	switch {
	case zh.Skippable:
		return corrupt(headerSize, "body frame", "the body is a skippable zstd frame, which holds no content")
	case zh.DictionaryID != 0:
		return corrupt(headerSize, "body frame", "the zstd frame names dictionary %d; images use none", zh.DictionaryID)
	case !zh.HasCheckSum:
		return corrupt(headerSize, "body frame", "the zstd frame carries no content checksum; images always do")
	}
	// Walk the block headers (3 bytes each: last-block bit, type, size) to
	// find where the frame ends.
	pos := zh.HeaderSize
	for {
		if len(comp)-pos < 3 {
			return corrupt(headerSize+int64(pos), "body frame", "the zstd frame ends inside a block header at body byte %d of %d", pos, len(comp))
		}
		bh := uint32(comp[pos]) | uint32(comp[pos+1])<<8 | uint32(comp[pos+2])<<16
		last, typ, size := bh&1 == 1, (bh>>1)&3, int(bh>>3)
		if typ == 1 { // RLE: one byte repeated size times
			size = 1
		}
		if typ == 3 {
			return corrupt(headerSize+int64(pos), "body frame", "reserved zstd block type at body byte %d", pos)
		}
		pos += 3
		if len(comp)-pos < size {
			return corrupt(headerSize+int64(pos), "body frame", "a zstd block of %d bytes at body byte %d runs past the body's %d bytes", size, pos, len(comp))
		}
		pos += size
		if last {
			break
		}
	}
	if end := pos + 4; end != len(comp) { // the content checksum closes the frame
		if end > len(comp) {
			return corrupt(headerSize+int64(pos), "body frame", "the zstd frame's content checksum at body byte %d runs past the body's %d bytes", pos, len(comp))
		}
		return corrupt(headerSize+int64(end), "body frame", "%d bytes follow the zstd frame, which ends at body byte %d; images hold one frame", len(comp)-end, end)
	}
	return nil
}

// decompress inflates comp into a new buffer of exactly rawLen bytes (plus
// the decoder's slack). The decoder may not grow that buffer (cap limit: it
// stops within one 128 KiB block of the capacity and refuses a frame whose
// declared content size exceeds it), so even a frame crafted to pass the
// CRC cannot make it allocate or work much beyond the header's declared
// length, which checkLimits bounded. The memory option is the same bound
// for the decoder's own checks; it cannot go below maxWindow because the
// decoder also caps the window with it, and in DecodeAll the window is the
// output buffer itself, so a window larger than a tiny body costs nothing.
func decompress(comp []byte, rawLen uint64) ([]byte, error) {
	dec := decoders.Get().(*zstd.Decoder)
	defer decoders.Put(dec)
	if err := dec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(max(rawLen, maxWindow))); err != nil {
		return nil, corrupt(headerSize, "body", "zstd decoder: %v", err)
	}
	raw, err := dec.DecodeAll(comp, make([]byte, 0, int(rawLen)+decodeSlack))
	if err != nil {
		return nil, corrupt(headerSize, "body", "zstd: %v", err)
	}
	if uint64(len(raw)) != rawLen {
		return nil, corrupt(offRawLen, "body length", "body decompresses to %d bytes, the header declares %d", len(raw), rawLen)
	}
	return raw, nil
}

// nsState is a namespace record and the tally of its entries as decoded.
type nsState struct {
	name       string
	rev        uint64
	entries    uint64
	bytes      uint64
	gotEntries uint64
	gotBytes   uint64
}

// parseBody decodes the uncompressed body in one pass. len(raw) equals the
// header's body length, which bounds every allocation here: the entry array
// and the key buffer are at most a small multiple of bytes already present.
func parseBody(raw []byte, h *Header, lim Limits) (*materialize.View, error) {
	maxNS, maxKey := int(nonNeg(lim.MaxNamespace)), int(nonNeg(lim.MaxKey))
	maxSchema, maxOwner, maxDoc := int(nonNeg(lim.MaxSchema)), int(nonNeg(lim.MaxOwner)), nonNeg(lim.MaxDocument)

	nss := make([]nsState, h.Namespaces)
	byName := make(map[string]int, len(nss))
	var sumEntries, sumBytes uint64
	pos := 0
	for i := range nss {
		rest := raw[pos:]
		if len(rest) < nsFixed {
			return nil, corrupt(-1, "namespace record", "record %d of %d: body ends at offset %d, inside the record", i+1, len(nss), len(raw))
		}
		nl := int(binary.LittleEndian.Uint16(rest))
		if nl > maxNS {
			return nil, overLimit(-1, "namespace length", "namespace record %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, nl, maxNS)
		}
		if len(rest) < nsFixed+nl {
			return nil, corrupt(-1, "namespace record", "record %d of %d (body offset %d) runs past the end of the body", i+1, len(nss), pos)
		}
		nameB := rest[2 : 2+nl]
		if i > 0 && string(nameB) <= nss[i-1].name {
			return nil, corrupt(-1, "namespace order", "namespace record %d (body offset %d) %q does not sort after %q", i+1, pos, nameB, nss[i-1].name)
		}
		n := &nss[i]
		n.name = string(nameB)
		n.rev = binary.LittleEndian.Uint64(rest[2+nl:])
		n.entries = uint64(binary.LittleEndian.Uint32(rest[10+nl:]))
		n.bytes = binary.LittleEndian.Uint64(rest[14+nl:])
		if n.rev == 0 {
			return nil, corrupt(-1, "namespace revision", "namespace %q (body offset %d) has revision 0; a counter record exists only once a record advanced it", n.name, pos)
		}
		sumEntries = satAdd(sumEntries, n.entries)
		sumBytes = satAdd(sumBytes, n.bytes)
		byName[n.name] = i
		pos += nsFixed + nl
	}
	// Checked here, before any entry, so a body whose counters cannot add
	// up is refused without decoding a document.
	if sumEntries != uint64(h.Entries) || sumBytes != h.Bytes {
		return nil, corrupt(-1, "namespace counters", "namespace records count %d entries / %d bytes, the header %d / %d", sumEntries, sumBytes, h.Entries, h.Bytes)
	}

	// One array for every entry and one buffer for every key keep the
	// allocation count independent of the number of entries.
	ents := make([]materialize.Entry, h.Entries)
	ptrs := make([]*materialize.Entry, h.Entries)
	keyEnds := make([]int, h.Entries)
	keyBuf := make([]byte, 0, 32*len(ents))
	// Schemas and owners repeat across entries: intern them.
	intern := make(map[string]string)
	var schema, owner string
	cur := -1
	var prevKey []byte
	var docBytes uint64
	for i := range ents {
		rest := raw[pos:]
		if len(rest) < entryFixed {
			return nil, corrupt(-1, "entry record", "entry %d of %d: body ends at offset %d, inside the record (the header counts more entries than the body holds)", i+1, len(ents), len(raw))
		}
		nl := int(binary.LittleEndian.Uint16(rest[0:]))
		kl := int(binary.LittleEndian.Uint16(rest[2:]))
		sl := int(binary.LittleEndian.Uint16(rest[4:]))
		ol := int(binary.LittleEndian.Uint16(rest[6:]))
		dl := uint64(binary.LittleEndian.Uint32(rest[40:]))
		switch {
		case nl > maxNS:
			return nil, overLimit(-1, "namespace length", "entry %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, nl, maxNS)
		case kl > maxKey:
			return nil, overLimit(-1, "key length", "entry %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, kl, maxKey)
		case sl > maxSchema:
			return nil, overLimit(-1, "schema length", "entry %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, sl, maxSchema)
		case ol > maxOwner:
			return nil, overLimit(-1, "owner length", "entry %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, ol, maxOwner)
		case dl > maxDoc:
			return nil, overLimit(-1, "document length", "entry %d (body offset %d): %d bytes exceed the %d-byte limit", i+1, pos, dl, maxDoc)
		}
		need := entryFixed + nl + kl + sl + ol + int(dl)
		if len(rest) < need {
			return nil, corrupt(-1, "entry record", "entry %d of %d (body offset %d) runs past the end of the body", i+1, len(ents), pos)
		}
		p := entryFixed
		nsB := rest[p : p+nl]
		p += nl
		keyB := rest[p : p+kl]
		p += kl
		schemaB := rest[p : p+sl]
		p += sl
		ownerB := rest[p : p+ol]
		p += ol

		// Strict (namespace, key) order: canonical, and no duplicates.
		if cur < 0 || string(nsB) != nss[cur].name {
			idx, ok := byName[string(nsB)]
			if !ok {
				return nil, corrupt(-1, "entry namespace", "entry %d (body offset %d, key %q) is in namespace %q, which has no counter record", i+1, pos, keyB, nsB)
			}
			if idx < cur {
				return nil, corrupt(-1, "entry order", "entry %d (body offset %d): namespace %q after %q", i+1, pos, nsB, nss[cur].name)
			}
			cur = idx
		} else if bytes.Compare(keyB, prevKey) <= 0 {
			return nil, corrupt(-1, "entry order", "entry %d (body offset %d): key %q in namespace %q does not sort after %q", i+1, pos, keyB, nsB, prevKey)
		}
		prevKey = keyB
		ns := &nss[cur]

		e := &ents[i]
		e.Revision = binary.LittleEndian.Uint64(rest[8:])
		if e.Revision == 0 || e.Revision > ns.rev {
			return nil, corrupt(-1, "entry revision", "entry %d (body offset %d, key %q in %q): revision %d outside the namespace's 1..%d", i+1, pos, keyB, ns.name, e.Revision, ns.rev)
		}
		docBytes += dl
		if docBytes > h.Bytes {
			return nil, corrupt(-1, "document length", "entry %d (body offset %d): documents so far hold %d bytes, the header counts %d in all", i+1, pos, docBytes, h.Bytes)
		}
		ns.gotEntries++
		ns.gotBytes += dl

		if string(schemaB) != schema {
			schema = internString(intern, schemaB)
		}
		if string(ownerB) != owner {
			owner = internString(intern, ownerB)
		}
		e.Namespace, e.Schema, e.Owner = ns.name, schema, owner
		e.CreatedMs = int64(binary.LittleEndian.Uint64(rest[16:]))
		e.UpdatedMs = int64(binary.LittleEndian.Uint64(rest[24:]))
		e.ExpiresMs = int64(binary.LittleEndian.Uint64(rest[32:]))
		// Capacity-limited, so an append by a careless reader copies
		// instead of overwriting the next record.
		e.Document = rest[p : p+int(dl) : p+int(dl)]
		keyBuf = append(keyBuf, keyB...)
		keyEnds[i] = len(keyBuf)
		ptrs[i] = e
		pos += need
	}
	if pos != len(raw) {
		return nil, corrupt(-1, "body length", "%d bytes follow the last record the header counts (body offset %d)", len(raw)-pos, pos)
	}
	if docBytes != h.Bytes {
		return nil, corrupt(offBytes, "bytes", "documents hold %d bytes, the header counts %d", docBytes, h.Bytes)
	}
	counters := make(map[string]materialize.Namespace, len(nss))
	for i := range nss {
		n := &nss[i]
		if n.gotEntries != n.entries || n.gotBytes != n.bytes {
			return nil, corrupt(-1, "namespace counters", "namespace %q counts %d entries / %d bytes, its entries hold %d / %d", n.name, n.entries, n.bytes, n.gotEntries, n.gotBytes)
		}
		counters[n.name] = materialize.Namespace{Revision: n.rev, Entries: int(n.entries), Bytes: int64(n.bytes)}
	}
	keys := string(keyBuf) // one allocation for every key
	start := 0
	for i := range ents {
		ents[i].Key = keys[start:keyEnds[i]]
		start = keyEnds[i]
	}
	v, err := materialize.Restore(counters, ptrs)
	if err != nil {
		return nil, corrupt(-1, "view", "%v", err)
	}
	return v, nil
}

func internString(m map[string]string, b []byte) string {
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	m[s] = s
	return s
}
