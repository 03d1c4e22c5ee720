// Package checkpoint writes and reads checkpoint images: the whole
// materialized view (namespace revision counters, entries, entry and byte
// counters) as it stood at one journal index, compressed with zstd
// (github.com/klauspost/compress/zstd).
//
// A checkpoint bounds replay (open loads the newest image and replays only
// the journal records after its index) and lets the journal drop the
// records it covers. An online backup is the same image. Because the journal
// front may be truncated once an image is durable, an image that cannot be
// read back would lose data, so Encode refuses a view whose counters
// disagree with its entries instead of writing an image Decode would reject.
//
// # File format
//
// All integers are little-endian. A file is a fixed 64-byte header, the
// compressed body and a 4-byte trailer:
//
//	 offset  size  field
//	+------+------+-----------------------------------------------------------+
//	|   0  |   8  | magic "KPCKPT\r\n" (CR LF catches text-mode mangling)      |
//	|   8  |   2  | format version (1); never moves, so any later version can |
//	|      |      | be recognised and refused before its header is parsed     |
//	|  10  |   2  | flags: 0 (a set bit is a feature this build lacks)        |
//	|  12  |   8  | journal index: every record <= index applied, none after  |
//	|  20  |   8  | time taken, ms since the Unix epoch (signed)              |
//	|  28  |   4  | namespace counter records in the body                     |
//	|  32  |   4  | entries in the body                                       |
//	|  36  |   8  | value bytes: sum of the entries' document lengths         |
//	|  44  |   8  | body length, uncompressed                                 |
//	|  52  |   8  | body length, compressed (C)                               |
//	|  60  |   4  | CRC-32C (Castagnoli) of bytes 0..59                       |
//	+------+------+-----------------------------------------------------------+
//	|  64  |   C  | body: one zstd frame (with its xxhash content checksum)  |
//	+------+------+-----------------------------------------------------------+
//	| 64+C |   4  | CRC-32C of the C compressed body bytes                   |
//	+------+------+-----------------------------------------------------------+
//
// Nothing follows the trailer. The trailer CRC covers the compressed bytes
// so that damage is found before any byte reaches the decompressor; the zstd
// frame's own content checksum then covers the decompressed body.
//
// The uncompressed body is first every namespace counter record, in
// strictly ascending name order (namespaces whose last entry went away are
// included: their revision counters must survive):
//
//	+------+------+-------------------------------------------+
//	|   0  |   2  | name length N                             |
//	|   2  |   N  | namespace name                            |
//	|  2+N |   8  | namespace revision (>= 1)                 |
//	| 10+N |   4  | entries in the namespace                  |
//	| 14+N |   8  | value bytes in the namespace              |
//	+------+------+-------------------------------------------+
//
// then every entry, in strictly ascending (namespace, key) order:
//
//	+------+------+-------------------------------------------+
//	|   0  |   2  | namespace length N                        |
//	|   2  |   2  | key length K                              |
//	|   4  |   2  | schema length S                           |
//	|   6  |   2  | owner length O                            |
//	|   8  |   8  | revision (1 ..= the namespace's revision) |
//	|  16  |   8  | created ms                                |
//	|  24  |   8  | updated ms                                |
//	|  32  |   8  | expires ms (0: no lease)                  |
//	|  40  |   4  | document length D                         |
//	|  44  |   N  | namespace (must have a counter record)    |
//	|  ... |   K  | key                                       |
//	|  ... |   S  | schema name                               |
//	|  ... |   O  | owner                                     |
//	|  ... |   D  | document                                  |
//	+------+------+-------------------------------------------+
//
// # Invariants
//
//  1. Canonical: the order of records is fixed by the view, and the zstd
//     encoder runs with fixed options, so encoding the same view at the same
//     index and time twice gives identical bytes, even after an Encode that
//     failed half-way; no encoder outlives its Encode. Decode enforces the
//     order, which also rules out duplicate namespaces and entries.
//     Code: Encode, newEncoder, newEncState, parseBody.
//     Tests: TestRoundTrip, TestConcurrentEncode,
//     TestEncodeAfterFailureIsCanonical, TestSeedCorpus, TestInconsistentBody.
//  2. Bounded before allocated: Decode checks the header's counts and body
//     lengths against Limits before it reads the body, and refuses a
//     compressed length larger than zstd could ever need for the declared
//     uncompressed length. Decompression writes into one buffer of the
//     declared length, which the decoder may not grow (it stops within one
//     128 KiB block of it and fails), and every
//     per-record length is checked against Limits and against the bytes left
//     before anything is sliced. A hostile header can make Decode allocate
//     no more than Limits allow.
//     Code: checkLimits, bodyBound, maxCompressed, decompress, parseBody.
//     Tests: TestLimitsBeforeBody, TestDecompressionBounded,
//     TestCorruptHeader, FuzzDecode.
//  3. Exact: the compressed body is exactly one zstd frame carrying its
//     content checksum (so a recomputed body CRC cannot pass off an empty
//     or unchecksummed body as another view), the body holds exactly the
//     records the header counts, the documents add up to the header's byte
//     count, every namespace's counters
//     equal its entries, and every entry's revision lies in 1 ..= its
//     namespace's revision; materialize.Restore checks the last two again
//     when it builds the view.
//     Code: checkFrame, parseBody, materialize.Restore.
//     Tests: TestInconsistentBody, TestTrailingGarbage, FuzzDecodeBody,
//     fuzz.FuzzCheckpointLoad.
//  4. Typed failures: every refusal is an *Error naming the field, wrapping
//     ErrCorrupt (damaged or inconsistent bytes), ErrVersion (written by a
//     newer format) or ErrLimits (valid, but beyond the caller's bounds).
//     Code: Error, corrupt, overLimit, ErrCorrupt, ErrVersion, ErrLimits.
//     Tests: TestCorruptHeader, TestTruncated, TestFlippedByte,
//     TestErrorText.
//  5. Atomic files: WriteFile goes through disk.WriteAtomic, so a crash
//     leaves the previous file or the complete new one, and List ignores the
//     temporaries a crash can leave behind. A WriteFile that fails leaves no
//     image at its path, even when only the final directory fsync failed
//     (the renamed image is removed): an image is on disk only if every
//     fsync that makes it durable succeeded.
//     Code: WriteFileFS, List, disk.FS.WriteAtomic.
//     Tests: TestWriteFile, TestWriteFileFsyncFailureLeavesNoImage, TestList.
//
// Decoded entries share storage: every Document is a capacity-limited slice
// of one buffer holding the decompressed body, and the entries themselves
// live in one array. That keeps Decode to a handful of allocations; the
// price is that the buffer stays in memory until the last decoded entry is
// replaced.
package checkpoint
