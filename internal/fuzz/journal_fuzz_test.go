package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// FuzzJournalOpen opens mutated copies of a real journal directory.
//
// Input: dir is a journal directory serialized as a container (for each
// file: 8-byte start index, 4-byte length, bytes; the file is named after
// its start index as tidwall/wal names segments), seeded with the seed
// store's 3-6 segments and mutated freely by the fuzzer; ops is a program
// of structured mutations applied on top (see mutateDir: flip a byte, cut a
// segment, insert zeros, duplicate, drop, rename or swap segments, append
// bytes, copy a whole entry elsewhere, cut at an entry boundary).
// Truncation markers (.START/.END/.TEMP) are out of scope: they are
// tidwall/wal's own crash protocol and legitimately rewrite the directory.
//
// For each input the directory is written out and opened twice, each under
// a deadline (no input may hang): journal.Open + Replay(FirstIndex), and
// statestore.Open on a store holding that journal (fake clock at t0, so no
// lease is due). Properties, with R_1..R_n the seed store's acknowledged
// records:
//
//  1. Nothing panics or hangs; Open fails only with *CorruptError or
//     *StorageError, never with tidwall/wal's ErrCorrupt leaking through
//     (the journal validates and repairs before tidwall/wal parses).
//  2. A successful Replay delivers exactly the indexes FirstIndex..LastIndex.
//  3. "Accepted" means what the store needs: Open and Replay succeed, the
//     journal starts at index 1, and every record passes the store's
//     recovery.Checker (namespace revision previous+1, DELETE/EXPIRE of a
//     present key, identifiers, schema, bounds). An accepted replay must be
//     exactly R_1..R_m for some m <= n: same records, same revisions. A
//     frame does not carry its journal index, so a whole segment copied
//     under another name or a valid frame copied elsewhere replays without
//     error at the journal level; it is the namespace revisions that refuse
//     it, which is why acceptance includes the checker. Forging a CRC-32C
//     by mutation is negligible, so any other accepted sequence is a bug,
//     with one exception the files alone cannot rule out: records that
//     skip ahead to later originals whose namespaces the skipped records
//     never touched (a dropped segment and a later frame copied into the
//     end of the one before it) still carry consecutive revisions. A real
//     store refuses that journal through its acknowledged floor (the
//     ACKNOWLEDGED marker, a checkpoint's index), which these directories
//     do not hold; so an accepted replay may, from the first difference on,
//     consist only of byte-identical copies of later originals, in order,
//     none of which is then counted as intact-but-missing below.
//  4. Only damaged records may go missing: every record in R_m+1..R_n must
//     have been touched by the mutation (its entry's bytes are not intact at
//     their offset in the same-named file). A missing record whose bytes are
//     intact, with its segment still there, is lost acknowledged data.
//  5. A tail cut is honest: it is in the last segment, the quarantined copy
//     equals the file as found, the bytes before the cut parse as
//     cut.Index-start whole records, and no whole valid frame starts at any
//     offset after the cut (checked here by brute force, independently of
//     the journal's own scan).
//     5b. A cut discards at most one entry's worth of non-zero bytes: from
//     the cut to the last non-zero byte of the segment is no longer than
//     the largest entry a record can make (a crash tears one write; it does
//     not turn fsynced records into noise).
//  6. Torn tails are repaired: if the mutation touched only the last
//     segment from the final record's entry on, and what it left there is
//     what an interrupted write leaves (a prefix of the final entry's bytes,
//     or all of them, followed by nothing but zeros), the journal must be
//     accepted, with m = n if the final record is intact and m = n-1
//     otherwise. The unmutated directory is accepted with m = n.
//  7. The store agrees: statestore.Open succeeds exactly when the journal is
//     accepted, replays the same m records, reports the same tail cut, and
//     serves exactly the state of R_1..R_m (compared entry by entry, with
//     namespace counters, totals and leases, through an online backup).
func FuzzJournalOpen(f *testing.F) {
	addSeeds(f, journalSeeds(f))
	f.Fuzz(func(t *testing.T, dir []byte, ops []byte) {
		t.Parallel()
		r := realData(t)
		files := mutateDir(decodeDir(dir), ops)
		checkJournalDir(t, r, files)
	})
}

// Container limits keep one input cheap to write out.
const (
	maxFiles     = 24
	maxDirBytes  = 1 << 20
	openDeadline = 30 * time.Second
)

// encodeDir serializes segment files as the FuzzJournalOpen container.
func encodeDir(files []segFile) []byte {
	var b []byte
	for _, f := range files {
		b = binary.LittleEndian.AppendUint64(b, f.start)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f.data)))
		b = append(b, f.data...)
	}
	return b
}

// decodeDir parses a container leniently: a length running past the end
// takes what is there, a partial header ends it, a later file of the same
// name replaces an earlier one. The result is sorted by start and never
// aliases b.
func decodeDir(b []byte) []segFile {
	byStart := map[uint64][]byte{}
	total := 0
	for len(b) >= 12 && len(byStart) < maxFiles {
		start := binary.LittleEndian.Uint64(b)
		n := int(binary.LittleEndian.Uint32(b[8:]))
		b = b[12:]
		n = min(n, len(b), maxDirBytes-total)
		byStart[start] = bytes.Clone(b[:n])
		total += n
		b = b[n:]
	}
	return sortFiles(byStart)
}

func sortFiles(m map[uint64][]byte) []segFile {
	files := make([]segFile, 0, len(m))
	for s, d := range m {
		if d == nil {
			d = []byte{}
		}
		files = append(files, segFile{start: s, data: d})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].start < files[j].start })
	return files
}

// Structured mutations: each is 6 bytes, op, sel, off (uint16), arg
// (uint16). sel picks a file (modulo their number, in start order), off an
// offset in it (modulo its length + 1).
const (
	opFlip       = iota // data[off] ^= low byte of arg | 1
	opCut               // data = data[:off]
	opInsert            // insert arg%64+1 zero bytes at off
	opDuplicate         // copy the file under start + int16(arg)
	opDrop              // remove the file
	opAppend            // append arg%64+1 bytes of value arg>>8
	opZero              // zero arg%256+1 bytes from off
	opRename            // move the file to start + int16(arg)
	opCopyEntry         // append whole entry #off of sel to file #arg
	opCutAtEntry        // cut sel after its first off%(entries+1) entries
	opSwap              // swap the bytes of sel and file #arg
	opSetByte           // data[off] = low byte of arg
	numOps
)

func op(code, sel byte, off, arg uint16) []byte {
	return []byte{code, sel, byte(off), byte(off >> 8), byte(arg), byte(arg >> 8)}
}

// mutateDir applies the structured mutations in ops to files.
func mutateDir(files []segFile, ops []byte) []segFile {
	m := map[uint64][]byte{}
	for _, f := range files {
		m[f.start] = f.data
	}
	size := func() int {
		n := 0
		for _, d := range m {
			n += len(d)
		}
		return n
	}
	for ; len(ops) >= 6; ops = ops[6:] {
		if len(m) == 0 {
			break
		}
		cur := sortFiles(m)
		code := ops[0] % numOps
		f := cur[int(ops[1])%len(cur)]
		off := int(binary.LittleEndian.Uint16(ops[2:])) % (len(f.data) + 1)
		arg := binary.LittleEndian.Uint16(ops[4:])
		other := cur[int(arg)%len(cur)]
		d := bytes.Clone(f.data)
		switch code {
		case opFlip:
			if off < len(d) {
				d[off] ^= byte(arg) | 1
			}
		case opCut:
			d = d[:off]
		case opInsert:
			if size() < maxDirBytes {
				d = append(d[:off], append(make([]byte, int(arg%64)+1), d[off:]...)...)
			}
		case opDuplicate, opRename:
			to := f.start + uint64(int64(int16(arg)))
			if to == 0 || to == f.start || (code == opDuplicate && size()+len(d) > maxDirBytes) || (code == opDuplicate && len(m) >= maxFiles) {
				continue
			}
			if code == opRename {
				delete(m, f.start)
			}
			m[to] = d
			continue
		case opDrop:
			delete(m, f.start)
			continue
		case opAppend:
			if size() < maxDirBytes {
				d = append(d, bytes.Repeat([]byte{byte(arg >> 8)}, int(arg%64)+1)...)
			}
		case opZero:
			clear(d[off:min(len(d), off+int(arg%256)+1)])
		case opCopyEntry:
			ents, _ := parseEntries(f.data)
			if len(ents) == 0 || size() >= maxDirBytes {
				continue
			}
			e := ents[off%len(ents)]
			m[other.start] = append(bytes.Clone(m[other.start]), f.data[e[0]:e[1]]...)
			continue
		case opCutAtEntry:
			ents, _ := parseEntries(d)
			if k := off % (len(ents) + 1); k == 0 {
				d = d[:0]
			} else {
				d = d[:ents[k-1][1]]
			}
		case opSwap:
			m[f.start], m[other.start] = m[other.start], m[f.start]
			continue
		case opSetByte:
			if off < len(d) {
				d[off] = byte(arg)
			}
		}
		m[f.start] = d
	}
	return sortFiles(m)
}

// writeDir writes files into dir (created).
func writeDir(dir string, files []segFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name()), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// journalOutcome is what journal.Open + Replay made of a directory.
type journalOutcome struct {
	openErr, replayErr error
	cut                *journal.TailCut
	savedCopy          []byte // the quarantined copy, when cut
	cutFileSize        int64  // size of the cut segment after Open
	first, last        uint64
	recs               []*journal.Record
	accepted           bool              // see property 3
	refusal            error             // why not accepted
	view               *materialize.View // the accepted records applied, when accepted
}

func openJournalDir(r *realStore, dir string) (*journalOutcome, error) {
	o := &journalOutcome{}
	// No background pre-writer: the properties look at the files as Open
	// left them (what Open itself trims and cuts is the same either way),
	// and zeros written behind Open's back would race those reads.
	j, cut, err := journal.Open(dir, journal.Options{SegmentSize: segmentSize, Limits: r.lim, NoPrewrite: true})
	if err != nil {
		o.openErr, o.refusal = err, err
		return o, nil
	}
	defer j.Close()
	o.cut = cut
	if cut != nil {
		if o.savedCopy, err = os.ReadFile(cut.SavedAs); err != nil {
			return nil, fmt.Errorf("tail cut %v: reading the quarantined copy: %v", cut, err)
		}
		fi, err := os.Stat(filepath.Join(dir, cut.Segment))
		if err != nil {
			return nil, fmt.Errorf("tail cut %v: %v", cut, err)
		}
		o.cutFileSize = fi.Size()
	}
	o.first, o.last = j.FirstIndex(), j.LastIndex()
	next := o.first
	o.replayErr = j.Replay(o.first, func(idx uint64, rec *journal.Record) error {
		if idx != next {
			return fmt.Errorf("%w: replay delivered index %d, expected %d", errIndexGap, idx, next)
		}
		next++
		o.recs = append(o.recs, rec)
		return nil
	})
	if o.replayErr != nil {
		o.refusal = o.replayErr
		if errors.Is(o.replayErr, errIndexGap) {
			return nil, fmt.Errorf("property 2: %v", o.replayErr)
		}
		return o, nil
	}
	if got := uint64(len(o.recs)); o.last+1 != o.first+got {
		return nil, fmt.Errorf("property 2: replay from %d delivered %d records, LastIndex is %d", o.first, got, o.last)
	}
	if o.first != 1 {
		o.refusal = fmt.Errorf("journal starts at index %d and no checkpoint covers the records before it", o.first)
		return o, nil
	}
	v := materialize.New()
	for i, rec := range o.recs {
		if err := r.check.Check(v, uint64(i+1), rec); err != nil {
			o.refusal = fmt.Errorf("record %d: %v", i+1, err)
			return o, nil
		}
		if _, err := v.Apply(rec); err != nil {
			o.refusal = fmt.Errorf("record %d: %v", i+1, err)
			return o, nil
		}
	}
	o.accepted, o.view = true, v
	return o, nil
}

// storeOutcome is what statestore.Open made of a store holding the journal.
type storeOutcome struct {
	err      error
	replayed int
	cut      *journal.TailCut
	view     *materialize.View
}

func openStoreDir(r *realStore, dir string) (*storeOutcome, error) {
	o := &storeOutcome{}
	s, err := statestore.Open(statestore.Options{Dir: dir, Clock: clock.NewFake(t0), SegmentSize: segmentSize, CheckpointBytes: -1, NoPrewrite: true})
	if err != nil {
		o.err = err
		return o, nil
	}
	defer s.Close()
	rep := s.OpenReport()
	o.replayed, o.cut = rep.Replayed, rep.TailCut
	if rep.Expired != 0 {
		return nil, fmt.Errorf("store purged %d leases at t0", rep.Expired)
	}
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		return nil, fmt.Errorf("backup: %v", err)
	}
	if _, o.view, err = checkpoint.Decode(&buf, r.ckLim); err != nil {
		return nil, fmt.Errorf("decoding the backup: %v", err)
	}
	return o, nil
}

// checkJournalDir runs properties 1-7 on one mutated directory.
func checkJournalDir(t *testing.T, r *realStore, files []segFile) {
	base := scratchDir(t)
	jdir := filepath.Join(base, "j", "journal")
	sdir := filepath.Join(base, "s")
	if err := writeDir(jdir, files); err != nil {
		t.Fatal(err)
	}
	if err := writeDir(filepath.Join(sdir, statestore.StoreDirName, "journal"), files); err != nil {
		t.Fatal(err)
	}
	var jo *journalOutcome
	withDeadline(t, openDeadline, "journal.Open + Replay", func() (err error) {
		jo, err = openJournalDir(r, jdir)
		return err
	})
	var so *storeOutcome
	withDeadline(t, openDeadline, "statestore.Open", func() (err error) {
		so, err = openStoreDir(r, sdir)
		return err
	})
	if err := judgeJournal(r, files, jo, so); err != nil {
		t.Fatalf("%v\n%s", err, describeDir(r, files))
	}
}

func judgeJournal(r *realStore, files []segFile, jo *journalOutcome, so *storeOutcome) error {
	n := len(r.recs)
	// Property 1.
	if err := jo.openErr; err != nil {
		var ce *journal.CorruptError
		var se *journal.StorageError
		if !errors.As(err, &ce) && !errors.As(err, &se) {
			return fmt.Errorf("property 1: Open failed with %T: %v", err, err)
		}
		if errors.Is(err, wal.ErrCorrupt) {
			return fmt.Errorf("property 1: damage reached tidwall/wal (the journal's own checks missed it): %v", err)
		}
	}
	if err := jo.replayErr; err != nil {
		var ce *journal.CorruptError
		var se *journal.StorageError
		if !errors.As(err, &ce) && !errors.As(err, &se) {
			return fmt.Errorf("property 1: Replay failed with %T: %v", err, err)
		}
	}
	// Property 5.
	if c := jo.cut; c != nil {
		if err := judgeCut(r, files, c, jo); err != nil {
			return fmt.Errorf("property 5: %v", err)
		}
	}
	m := -1
	want := func() *materialize.View { return r.views[m] } // the state the store must serve
	if jo.accepted {
		// Property 3.
		m = len(jo.recs)
		if m > n {
			return fmt.Errorf("property 3: accepted %d records, only %d were acknowledged", m, n)
		}
		prefix := m
		for i, rec := range jo.recs {
			if d := recordDiff(rec, r.recs[i]); d != "" {
				if !laterCopies(r, jo.recs[i:], i) {
					return fmt.Errorf("property 3: accepted replay differs from the acknowledged sequence at index %d: %s", i+1, d)
				}
				prefix = i
				want = func() *materialize.View { return jo.view }
				break
			}
		}
		// Property 4 (over the records past the identical prefix).
		for i := prefix; i < n && prefix == m; i++ {
			if intact(r, files, i) {
				return fmt.Errorf("property 4: record %d (%s offset %d) is intact but missing from an accepted replay of %d records (tail cut: %v)",
					i+1, r.locs[i].name, r.locs[i].start, m, jo.cut)
			}
		}
	}
	// Property 6.
	if want, ok := tailOnly(r, files); ok {
		if !jo.accepted {
			return fmt.Errorf("property 6: only the torn tail changed (expect %d records), but the journal was refused: %v", want, jo.refusal)
		}
		if m != want {
			return fmt.Errorf("property 6: only the torn tail changed, expected %d records, accepted %d", want, m)
		}
	}
	// Property 7.
	switch {
	case jo.accepted && so.err != nil:
		return fmt.Errorf("property 7: journal accepted with %d records, but the store refused to open: %v", m, so.err)
	case !jo.accepted && so.err == nil:
		return fmt.Errorf("property 7: the store opened (%d records replayed) a journal that is refused: %v", so.replayed, jo.refusal)
	case so.err != nil:
		if !errors.Is(so.err, statestore.ErrUnavailable) {
			return fmt.Errorf("property 7: store refused with a non-UNAVAILABLE error: %v", so.err)
		}
	default:
		if so.replayed != m {
			return fmt.Errorf("property 7: store replayed %d records, journal %d", so.replayed, m)
		}
		if (so.cut == nil) != (jo.cut == nil) || (so.cut != nil && (so.cut.Offset != jo.cut.Offset || so.cut.Index != jo.cut.Index)) {
			return fmt.Errorf("property 7: store tail cut %v, journal %v", so.cut, jo.cut)
		}
		if d := viewDiff(so.view, want()); d != "" {
			return fmt.Errorf("property 7: store state differs from R_1..R_%d: %s", m, d)
		}
	}
	return nil
}

// laterCopies reports whether recs, accepted at indexes from+1 on, are
// copies of originals after index from, in order (see property 3).
func laterCopies(r *realStore, recs []*journal.Record, from int) bool {
	j := from + 1
	for _, rec := range recs {
		for j < len(r.recs) && recordDiff(rec, r.recs[j]) != "" {
			j++
		}
		if j == len(r.recs) {
			return false
		}
		j++
	}
	return true
}

// judgeCut checks property 5 for the tail cut Open reported.
func judgeCut(r *realStore, files []segFile, c *journal.TailCut, jo *journalOutcome) error {
	var last *segFile
	for i := range files {
		if files[i].start != 0 {
			last = &files[i]
		}
	}
	if last == nil || c.Segment != last.name() {
		return fmt.Errorf("cut %v is not in the last segment", c)
	}
	if !bytes.Equal(jo.savedCopy, last.data) {
		return fmt.Errorf("cut %v: the quarantined copy (%d bytes) is not the segment as found (%d bytes)", c, len(jo.savedCopy), len(last.data))
	}
	count, bad := seqParse(last.data, r.lim)
	if bad < 0 {
		return fmt.Errorf("cut %v of a segment whose every entry is valid", c)
	}
	if int64(bad) != c.Offset || c.Index != last.start+uint64(count) || c.Bytes != int64(len(last.data)-bad) {
		return fmt.Errorf("cut %v: the first bad entry is at offset %d after %d records", c, bad, count)
	}
	if jo.cutFileSize != c.Offset {
		return fmt.Errorf("cut %v: segment is %d bytes after Open", c, jo.cutFileSize)
	}
	if off := validFrameFrom(last.data, bad+1, r.lim); off >= 0 {
		return fmt.Errorf("cut %v although a whole valid frame starts at offset %d after it", c, off)
	}
	// Property 5b.
	nz := len(last.data)
	for nz > bad && last.data[nz-1] == 0 {
		nz--
	}
	if lim := r.lim; nz-bad > binary.MaxVarintLen64+22+lim.MaxNamespace+lim.MaxKey+32+lim.MaxSchema+lim.MaxOwner+lim.MaxDocument+4 {
		return fmt.Errorf("cut %v discarded %d non-zero bytes, more than one entry can hold", c, nz-bad)
	}
	return nil
}

// validFrameAt reports whether a whole wal entry holding a valid frame
// starts at off.
func validFrameAt(data []byte, off int, lim journal.Limits) (size int, ok bool) {
	n, w := binary.Uvarint(data[off:])
	if w <= 0 || n == 0 || n > uint64(len(data)-off-w) {
		return 0, false
	}
	if _, err := journal.Decode(data[off+w:off+w+int(n)], lim); err != nil {
		return 0, false
	}
	return w + int(n), true
}

// validFrameFrom returns the first offset >= from where a valid entry
// starts, or -1. Brute force over every offset.
func validFrameFrom(data []byte, from int, lim journal.Limits) int {
	for off := from; off < len(data); off++ {
		if _, ok := validFrameAt(data, off, lim); ok {
			return off
		}
	}
	return -1
}

// seqParse reads valid entries from the start and returns how many, and the
// offset of the first entry that is not valid (-1 if none).
func seqParse(data []byte, lim journal.Limits) (count, bad int) {
	off := 0
	for off < len(data) {
		size, ok := validFrameAt(data, off, lim)
		if !ok {
			return count, off
		}
		off += size
		count++
	}
	return count, -1
}

// intact reports whether record i's entry bytes are unchanged at their
// offset in the file of the same name.
func intact(r *realStore, files []segFile, i int) bool {
	loc := r.locs[i]
	orig := r.segs[loc.seg]
	for _, f := range files {
		if f.start == orig.start {
			return len(f.data) >= loc.end && bytes.Equal(f.data[loc.start:loc.end], orig.data[loc.start:loc.end])
		}
	}
	return false
}

// tailOnly reports whether files differ from the original only in the last
// segment from the final record's entry on, with no valid frame anywhere in
// the changed bytes, and if so how many records a correct journal keeps.
func tailOnly(r *realStore, files []segFile) (int, bool) {
	if len(files) != len(r.segs) {
		return 0, false
	}
	lastSeg := len(r.segs) - 1
	for i, f := range files {
		if f.start != r.segs[i].start {
			return 0, false
		}
		if i < lastSeg && !bytes.Equal(f.data, r.segs[i].data) {
			return 0, false
		}
	}
	n := len(r.recs)
	orig, got := r.segs[lastSeg].data, files[lastSeg].data
	tailStart, want := len(orig), n
	var final []byte
	if loc := r.locs[n-1]; loc.seg == lastSeg {
		tailStart, final = loc.start, orig[loc.start:loc.end]
	}
	if len(got) < tailStart || !bytes.Equal(got[:tailStart], orig[:tailStart]) {
		return 0, false
	}
	// The crash model: the tail is a prefix of the final entry (all of it
	// when it is intact), then zeros only.
	tail := got[tailStart:]
	nz := len(tail)
	for nz > 0 && tail[nz-1] == 0 {
		nz--
	}
	switch {
	case final != nil && bytes.HasPrefix(tail, final) && nz <= len(final):
	case nz <= len(final) && bytes.Equal(tail[:nz], final[:nz]):
		want = n - 1
	default:
		return 0, false
	}
	return want, true
}

// describeDir summarizes a mutated directory against the original, for
// failure messages.
func describeDir(r *realStore, files []segFile) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "original: %d records in segments", len(r.recs))
	for _, s := range r.segs {
		fmt.Fprintf(&b, " %d(%d bytes)", s.start, len(s.data))
	}
	fmt.Fprintf(&b, "\nmutated:")
	for _, f := range files {
		same := "new"
		if i, ok := r.byName[f.name()]; ok {
			o := r.segs[i].data
			p := 0
			for p < len(o) && p < len(f.data) && o[p] == f.data[p] {
				p++
			}
			same = fmt.Sprintf("first difference at %d", p)
			if p == len(o) && p == len(f.data) {
				same = "unchanged"
			}
		}
		fmt.Fprintf(&b, " %d(%d bytes, %s)", f.start, len(f.data), same)
	}
	return b.String()
}

// journalSeeds are FuzzJournalOpen's seeds: the real directory, plain and
// with a structured mutation of each kind aimed at interesting places.
func journalSeeds(tb testing.TB) map[string][]any {
	r := realData(tb)
	dir := encodeDir(r.segs)
	last := byte(len(r.segs) - 1)
	n := len(r.recs)
	fin := r.locs[n-1]
	prev := r.locs[n-2]
	mid := r.locs[n/3]
	o16 := func(v int) uint16 { return uint16(v) }
	seeds := map[string][]any{
		"intact":           {dir, []byte{}},
		"torn-final":       {dir, op(opCut, last, o16(fin.start+fin.end)/2, 0)},
		"flip-final":       {dir, op(opFlip, last, o16(fin.end-3), 0x40)},
		"zero-tail":        {dir, op(opAppend, last, 0, 40)},
		"garbage-tail":     {dir, op(opAppend, last, 0, 0xA5<<8|17)},
		"flip-before-last": {dir, op(opFlip, byte(prev.seg), o16(prev.start+30), 0x01)},
		"flip-middle":      {dir, op(opFlip, byte(mid.seg), o16(mid.start+1), 0x80)},
		"zeros-in-tail":    {dir, op(opInsert, last, o16(prev.start), 7)},
		"cut-at-entry":     {dir, op(opCutAtEntry, last, 1, 0)},
		"drop-middle":      {dir, op(opDrop, 1, 0, 0)},
		"drop-last":        {dir, op(opDrop, last, 0, 0)},
		"dup-first-as-new": {dir, op(opDuplicate, 0, 0, uint16(n+1-int(r.segs[0].start)))},
		"rename-last":      {dir, op(opRename, last, 0, 1)},
		"copy-entry-tail":  {dir, op(opCopyEntry, 0, 2, uint16(last))},
		"swap-first-two":   {dir, op(opSwap, 0, 0, 1)},
	}
	return seeds
}

// TestJournalMutations pins the outcome of the seed mutations, so a
// regression shows as a plain test failure, not only as a fuzz finding.
func TestJournalMutations(t *testing.T) {
	t.Parallel()
	r := realData(t)
	n := len(r.recs)
	want := map[string]int{ // accepted record count; -1 refused
		"intact": n, "torn-final": n - 1, "flip-final": -1, "zero-tail": n, "garbage-tail": -1,
		"flip-before-last": -1, "flip-middle": -1, "zeros-in-tail": -1, "drop-middle": -1,
		"drop-last": int(r.segs[len(r.segs)-1].start) - 1, "cut-at-entry": int(r.segs[len(r.segs)-1].start), "dup-first-as-new": -1, "rename-last": -1,
		"copy-entry-tail": -1, "swap-first-two": -1,
	}
	for name, args := range journalSeeds(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := mutateDir(decodeDir(args[0].([]byte)), args[1].([]byte))
			checkJournalDir(t, r, files)
			w, ok := want[name]
			if !ok {
				return
			}
			jdir := filepath.Join(scratchDir(t), "journal")
			if err := writeDir(jdir, files); err != nil {
				t.Fatal(err)
			}
			jo, err := openJournalDir(r, jdir)
			if err != nil {
				t.Fatal(err)
			}
			got := -1
			if jo.accepted {
				got = len(jo.recs)
			}
			t.Logf("accepted %d records (-1: refused: %v); tail cut %v", got, jo.refusal, jo.cut)
			if got != w {
				t.Fatalf("accepted %d records (-1: refused: %v), want %d", got, jo.refusal, w)
			}
		})
	}
}

var errIndexGap = errors.New("index gap")

// TestTailScanLinear: a damaged tail whose bytes repeat a plausible-looking
// entry prefix with a large length (here 512 KiB, version 1, kind PUT at
// every fifth byte) once made journal.Open quadratic in the tail's size
// (~2.4 s for a 1 MiB tail, ~10 s for 2 MiB), because the torn-tail search
// computed a CRC over each candidate's declared length. Found while
// building FuzzJournalOpen; fixed in the journal (PlausibleFrame judges a
// candidate by its length fields first). A 2 MiB tail must open well within
// a second.
func TestTailScanLinear(t *testing.T) {
	// Serial: timing on two cores; it holds Open to a wall-clock bound.
	r := realData(t)
	files := append([]segFile(nil), r.segs...)
	last := &files[len(files)-1]
	last.data = append(bytes.Clone(last.data), bytes.Repeat([]byte{0x80, 0x80, 0x20, 0x01, 0x01}, (2<<20)/5)...)
	dir := filepath.Join(scratchDir(t), "journal")
	if err := writeDir(dir, files); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err := journal.Open(dir, journal.Options{SegmentSize: segmentSize, Limits: r.lim})
	took := time.Since(start)
	// A 512 KiB length is beyond the largest frame: not a torn write.
	var ce *journal.CorruptError
	if !errors.As(err, &ce) || ce.Index != uint64(len(r.recs)+1) {
		t.Fatalf("open: %v, want a *CorruptError at index %d", err, len(r.recs)+1)
	}
	if took > time.Second {
		t.Fatalf("Open with a 2 MiB damaged tail took %v", took)
	}
}
