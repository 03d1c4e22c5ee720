package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"runtime"
	"testing"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/materialize"
)

// ckptLimits bound FuzzCheckpointLoad: the store's string and document
// bounds, with image-wide counts small enough that the allocation ceiling
// below means something (the store's own allow images of gigabytes).
func ckptLimits(r *realStore) checkpoint.Limits {
	l := r.ckLim
	l.MaxNamespaces, l.MaxEntries, l.MaxTotalBytes = 64, 256, 1<<20
	return l
}

// allocCeiling is a generous bound on what one Decode may allocate under
// lim, whatever the input: the largest body the limits allow, once as
// compressed input and once decompressed (each with zstd's worst-case
// overhead), a kilobyte per record for the entry arrays and the view's
// trees, and 4 MiB for a fresh zstd decoder and noise.
func allocCeiling(lim checkpoint.Limits) uint64 {
	nsRec := uint64(22 + lim.MaxNamespace)
	entRec := uint64(44 + lim.MaxNamespace + lim.MaxKey + lim.MaxSchema + lim.MaxOwner)
	maxRaw := uint64(lim.MaxNamespaces)*nsRec + uint64(lim.MaxEntries)*entRec + uint64(lim.MaxTotalBytes)
	maxComp := maxRaw + maxRaw/1024 + 64 + 4
	return 2*maxComp + 2*maxRaw + 1024*uint64(lim.MaxNamespaces+lim.MaxEntries) + 4<<20
}

// FuzzCheckpointLoad mutates a real checkpoint image, written by the seed
// store's Store.Checkpoint.
//
// img is the image (mutated freely by the fuzzer), ops a program of
// structured mutations applied on top (flip, cut, insert, zero, set a byte,
// overwrite a 32- or 64-bit field, append, and "fix": recompute both CRC-32C
// values, optionally after setting the header's compressed length to match
// the file, so mutations also reach the checks behind the checksums).
//
// Properties:
//
//  1. checkpoint.Decode and checkpoint.ReadFile never panic, agree with each
//     other, and refuse only with a *checkpoint.Error matching ErrCorrupt,
//     ErrVersion or ErrLimits.
//  2. A successful decode is the original image: both CRC-32C values verify
//     (recomputed here), and the view equals the store's view entry by
//     entry (namespace counters, totals, leases); the header's counts equal
//     the original's, and its index and time do too unless the mutation
//     rewrote those header bytes (and the header CRC with them). Without a
//     recomputed checksum a differing image decodes only by a CRC-32C
//     collision; with one, the zstd frame's content checksum still guards
//     the body, so a different view is a finding either way.
//  3. Decode allocates at most allocCeiling(limits) bytes, measured with
//     runtime.MemStats, whatever the header claims.
func FuzzCheckpointLoad(f *testing.F) {
	addSeeds(f, checkpointSeeds(f))
	// Inputs run one at a time: property 3 reads runtime.MemStats, which
	// counts the allocations of the whole process.
	f.Fuzz(func(t *testing.T, img []byte, ops []byte) {
		r := realData(t)
		checkCheckpoint(t, r, mutateImage(img, ops))
	})
}

const (
	ckOffIndex   = 12
	ckOffTime    = 20
	ckOffCounts  = 28
	ckOffCompLen = 52
	ckHeaderCRC  = 60
	ckHeaderSize = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Image mutations: 6 bytes each, like the journal's.
const (
	ckFlip = iota
	ckCut
	ckInsert
	ckZero
	ckSetByte
	ckPut64 // little-endian uint64 at off: arg, or 1<<(arg&63) when arg's top bit is set
	ckPut32
	ckAppend
	ckFix    // recompute the trailer CRC (last 4 bytes) and the header CRC
	ckFixLen // set the compressed length to fit the file, then ckFix
	ckNumOps
)

func mutateImage(img, ops []byte) []byte {
	m := bytes.Clone(img)
	for ; len(ops) >= 6; ops = ops[6:] {
		code := ops[0] % ckNumOps
		off := int(binary.LittleEndian.Uint16(ops[2:])) % (len(m) + 1)
		arg := binary.LittleEndian.Uint16(ops[4:])
		switch code {
		case ckFlip:
			if off < len(m) {
				m[off] ^= byte(arg) | 1
			}
		case ckCut:
			m = m[:off]
		case ckInsert:
			if len(m) < 1<<20 {
				m = append(m[:off], append(make([]byte, int(arg%64)+1), m[off:]...)...)
			}
		case ckZero:
			clear(m[off:min(len(m), off+int(arg%256)+1)])
		case ckSetByte:
			if off < len(m) {
				m[off] = byte(arg)
			}
		case ckPut64:
			v := uint64(arg)
			if arg&0x8000 != 0 {
				v = 1 << (arg & 63)
			}
			if off+8 <= len(m) {
				binary.LittleEndian.PutUint64(m[off:], v)
			}
		case ckPut32:
			if off+4 <= len(m) {
				binary.LittleEndian.PutUint32(m[off:], uint32(arg)|uint32(ops[1])<<16)
			}
		case ckAppend:
			if len(m) < 1<<20 {
				m = append(m, bytes.Repeat([]byte{byte(arg >> 8)}, int(arg%64)+1)...)
			}
		case ckFixLen, ckFix:
			if len(m) < ckHeaderSize+4 {
				continue
			}
			if code == ckFixLen {
				binary.LittleEndian.PutUint64(m[ckOffCompLen:], uint64(len(m)-ckHeaderSize-4))
			}
			binary.LittleEndian.PutUint32(m[len(m)-4:], crc32.Checksum(m[ckHeaderSize:len(m)-4], castagnoli))
			binary.LittleEndian.PutUint32(m[ckHeaderCRC:], crc32.Checksum(m[:ckHeaderCRC], castagnoli))
		}
	}
	return m
}

// crcsVerify recomputes both checksums of an image independently of the
// decoder.
func crcsVerify(m []byte) bool {
	if len(m) < ckHeaderSize+4 {
		return false
	}
	if crc32.Checksum(m[:ckHeaderCRC], castagnoli) != binary.LittleEndian.Uint32(m[ckHeaderCRC:]) {
		return false
	}
	compLen := binary.LittleEndian.Uint64(m[ckOffCompLen:])
	if compLen != uint64(len(m)-ckHeaderSize-4) {
		return false
	}
	return crc32.Checksum(m[ckHeaderSize:len(m)-4], castagnoli) == binary.LittleEndian.Uint32(m[len(m)-4:])
}

func checkCheckpoint(t *testing.T, r *realStore, m []byte) {
	lim := ckptLimits(r)
	h, v, err := decodeMeasured(t, m, lim)
	checkCkptErr(t, "Decode", v, err)

	f, ferr := os.CreateTemp(scratchOnce(), "fuzz-ckpt-")
	if ferr != nil {
		t.Fatal(ferr)
	}
	defer os.Remove(f.Name())
	if _, ferr = f.Write(m); ferr == nil {
		ferr = f.Close()
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	fh, fv, fileErr := checkpoint.ReadFile(f.Name(), lim)
	checkCkptErr(t, "ReadFile", fv, fileErr)
	if (err == nil) != (fileErr == nil) {
		t.Fatalf("property 1: Decode error %v, ReadFile error %v", err, fileErr)
	}
	if err != nil {
		return
	}
	if fh != h {
		t.Fatalf("property 1: Decode header %+v, ReadFile header %+v", h, fh)
	}
	if d := viewDiff(fv, v); d != "" {
		t.Fatalf("property 1: ReadFile and Decode views differ: %s", d)
	}

	// Property 2.
	if !crcsVerify(m) {
		t.Fatalf("property 2: an image whose CRC-32C values do not verify decoded")
	}
	if d := viewDiff(v, r.ckptV); d != "" {
		t.Fatalf("property 2: a mutated image decoded to another view: %s", d)
	}
	want := r.ckptH
	if !bytes.Equal(m[ckOffIndex:ckOffIndex+8], r.ckpt[ckOffIndex:ckOffIndex+8]) {
		want.Index = h.Index
	}
	if !bytes.Equal(m[ckOffTime:ckOffTime+8], r.ckpt[ckOffTime:ckOffTime+8]) {
		want.TimeMs = h.TimeMs
	}
	if h != want {
		t.Fatalf("property 2: header %+v, want %+v", h, want)
	}
}

func checkCkptErr(t *testing.T, what string, v *materialize.View, err error) {
	if err == nil {
		if v == nil {
			t.Fatalf("property 1: %s returned neither a view nor an error", what)
		}
		return
	}
	var ce *checkpoint.Error
	if !errors.As(err, &ce) || !(errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrVersion) || errors.Is(err, checkpoint.ErrLimits)) {
		t.Fatalf("property 1: %s refused with %T: %v", what, err, err)
	}
	if v != nil {
		t.Fatalf("property 1: %s returned a view with error %v", what, err)
	}
}

// decodeMeasured runs checkpoint.Decode and checks property 3.
func decodeMeasured(t *testing.T, m []byte, lim checkpoint.Limits) (checkpoint.Header, *materialize.View, error) {
	var before, after runtime.MemStats
	rd := bytes.NewReader(m)
	runtime.ReadMemStats(&before)
	h, v, err := checkpoint.Decode(rd, lim)
	runtime.ReadMemStats(&after)
	if got, ceiling := after.TotalAlloc-before.TotalAlloc, allocCeiling(lim); got > ceiling {
		t.Fatalf("property 3: Decode of a %d-byte image allocated %d bytes, over the ceiling %d for limits %+v (error %v)",
			len(m), got, ceiling, lim, err)
	}
	return h, v, err
}

// checkpointSeeds are the real image, plain and with mutations aimed at each
// part of it.
func checkpointSeeds(tb testing.TB) map[string][]any {
	r := realData(tb)
	img := r.ckpt
	n := uint16(len(img))
	cat := func(ops ...[]byte) []byte { return bytes.Join(ops, nil) }
	return map[string][]any{
		"intact":          {img, []byte{}},
		"flip-header":     {img, op(ckFlip, 0, ckOffCounts+4, 0x02)},
		"flip-body":       {img, op(ckFlip, 0, n/2, 0x10)},
		"flip-trailer":    {img, op(ckFlip, 0, n-2, 0x01)},
		"cut-body":        {img, op(ckCut, 0, n-40, 0)},
		"trailing-bytes":  {img, op(ckAppend, 0, 0, 3)},
		"index-fixed":     {img, cat(op(ckPut64, 0, ckOffIndex, 99), op(ckFix, 0, 0, 0))},
		"entries-fixed":   {img, cat(op(ckPut32, 0, ckOffCounts+4, 3), op(ckFix, 0, 0, 0))},
		"rawlen-huge":     {img, cat(op(ckPut64, 0, 44, 0x8000|40), op(ckFix, 0, 0, 0))},
		"body-flip-fixed": {img, cat(op(ckFlip, 0, n/2, 0x04), op(ckFix, 0, 0, 0))},
		"body-cut-fixed":  {img, cat(op(ckCut, 0, n-20, 0), op(ckFixLen, 0, 0, 0))},
		// Counts, value bytes and body length zeroed, the body cut to
		// nothing, both CRCs fixed: an image of an empty view with no zstd
		// frame at all (a CI run found it; Decode once accepted it).
		"empty-body-fixed": {img, cat(op(ckZero, 0, ckOffCounts, 23), op(ckCut, 0, ckHeaderSize+4, 0), op(ckFixLen, 0, 0, 0))},
	}
}

// TestCheckpointAllocCeiling shows the ceiling is not vacuous: a header
// claiming the largest body the limits allow is refused without allocating
// anything like it, and the real image decodes well under it.
func TestCheckpointAllocCeiling(t *testing.T) {
	// Serial: runtime.MemStats counts the allocations of the whole process.
	r := realData(t)
	lim := ckptLimits(r)
	var before, after runtime.MemStats
	for i := 0; i < 3; i++ { // warm the decoder pool
		checkpoint.Decode(bytes.NewReader(r.ckpt), lim)
	}
	runtime.ReadMemStats(&before)
	if _, _, err := checkpoint.Decode(bytes.NewReader(r.ckpt), lim); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	t.Logf("real image: %d bytes, Decode allocated %d bytes; ceiling %d", len(r.ckpt), after.TotalAlloc-before.TotalAlloc, allocCeiling(lim))

	// The largest header the limits admit, over the real (short) body.
	m := bytes.Clone(r.ckpt)
	nsRec := uint64(22 + lim.MaxNamespace)
	entRec := uint64(44 + lim.MaxNamespace + lim.MaxKey + lim.MaxSchema + lim.MaxOwner)
	rawLen := uint64(lim.MaxNamespaces)*nsRec + uint64(lim.MaxEntries)*entRec + uint64(lim.MaxTotalBytes)
	binary.LittleEndian.PutUint32(m[ckOffCounts:], uint32(lim.MaxNamespaces))
	binary.LittleEndian.PutUint32(m[ckOffCounts+4:], uint32(lim.MaxEntries))
	binary.LittleEndian.PutUint64(m[ckOffCounts+8:], uint64(lim.MaxTotalBytes))
	binary.LittleEndian.PutUint64(m[ckOffCounts+16:], rawLen)
	binary.LittleEndian.PutUint64(m[ckOffCompLen:], rawLen+rawLen/1024+64)
	binary.LittleEndian.PutUint32(m[ckHeaderCRC:], crc32.Checksum(m[:ckHeaderCRC], castagnoli))
	runtime.ReadMemStats(&before)
	_, _, err := checkpoint.Decode(bytes.NewReader(m), lim)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("a %d-byte image claiming a %d-byte body: %v", len(m), rawLen, err)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("header claiming a %d-byte body over a %d-byte file: Decode allocated %d bytes before refusing (%v)", rawLen, len(m), got, err)
	if got > allocCeiling(lim) {
		t.Fatalf("allocated %d, over the ceiling %d", got, allocCeiling(lim))
	}
}
