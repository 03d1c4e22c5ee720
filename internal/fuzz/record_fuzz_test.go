package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/keeppeek/statestore/journal"
)

// wideLimits admit every length a frame can encode, so that a record built
// from fuzz input always round-trips.
var wideLimits = journal.Limits{MaxNamespace: 0xFFFF, MaxKey: 0xFFFF, MaxSchema: 0xFFFF, MaxOwner: 0xFFFF, MaxDocument: 1 << 24}

// FuzzRecordDecode fuzzes one journal frame.
//
// Properties, for frame decoded with the store's limits:
//
//  1. journal.Decode never panics; a refusal is a *journal.FrameError
//     matching journal.ErrFrame, with no record.
//  2. Whatever decodes is canonical: AppendFrame of the record reproduces
//     the input byte for byte, EncodedSize equals its length, every length
//     is within the limits, and the record does not alias the input
//     (overwriting the input afterwards changes nothing). It also passes
//     journal.PlausibleFrame, the CRC-free pre-check of the torn-tail search
//     (a frame that decodes but looks implausible would be missed there, and
//     acknowledged records behind damage cut off).
//
// and for a record built from the same bytes (kind, revision, times, and the
// bytes split into namespace, key, schema, owner and document by cuts):
//
//  3. AppendFrame refuses exactly the unknown kinds (and over-long fields)
//     with a FrameError, and otherwise encodes EncodedSize bytes that decode
//     (with limits wide enough for any length) to the same record: decode
//     (encode(r)) == r. With the store's limits, decoding succeeds, and
//     PlausibleFrame says yes, exactly when every length is within them.
//  4. Every single-bit flip of an encoded frame is refused (CRC-32C detects
//     all 1-bit errors), and so is every proper prefix (the lengths in the
//     header must account for the frame exactly).
func FuzzRecordDecode(f *testing.F) {
	addSeeds(f, recordSeeds(f))
	f.Fuzz(func(t *testing.T, frame []byte, kind byte, rev uint64, ms int64, cuts uint64) {
		t.Parallel()
		r := realData(t)
		checkFrame(t, frame, r.lim)
		checkBuiltRecord(t, frame, kind, rev, ms, cuts, r.lim)
	})
}

func checkFrame(t *testing.T, frame []byte, lim journal.Limits) {
	in := bytes.Clone(frame)
	rec, err := journal.Decode(in, lim)
	if err != nil {
		var fe *journal.FrameError
		if !errors.As(err, &fe) || !errors.Is(err, journal.ErrFrame) || rec != nil {
			t.Fatalf("property 1: Decode refused with %T %v (record %v)", err, err, rec)
		}
		return
	}
	if !journal.PlausibleFrame(frame, lim) {
		t.Fatalf("property 2: Decode accepts a frame PlausibleFrame rejects (the torn-tail search would miss it)")
	}
	clear(in) // the record must not alias its input
	enc, err := rec.AppendFrame([]byte("prefix"))
	if err != nil {
		t.Fatalf("property 2: decoded record does not encode: %v", err)
	}
	if !bytes.Equal(enc[6:], frame) || string(enc[:6]) != "prefix" {
		t.Fatalf("property 2: round trip changed the frame:\n in  %x\n out %x", frame, enc[6:])
	}
	if rec.EncodedSize() != len(frame) {
		t.Fatalf("property 2: EncodedSize %d, frame %d bytes", rec.EncodedSize(), len(frame))
	}
	if len(rec.Namespace) > lim.MaxNamespace || len(rec.Key) > lim.MaxKey || len(rec.Schema) > lim.MaxSchema ||
		len(rec.Owner) > lim.MaxOwner || len(rec.Document) > lim.MaxDocument {
		t.Fatalf("property 2: decoded lengths beyond the limits: %+v", rec)
	}
	if rec.Kind != journal.KindPut && (rec.Schema != "" || rec.Owner != "" || len(rec.Document) != 0 || rec.CreatedMs != 0 || rec.UpdatedMs != 0 || rec.ExpiresMs != 0) {
		t.Fatalf("property 2: a %s record carries PUT fields: %+v", rec.Kind, rec)
	}
}

// buildRecord makes a record from fuzz values: cuts holds four 10-bit
// lengths that split data into namespace, key, schema and owner; the rest
// is the document.
func buildRecord(data []byte, kind byte, rev uint64, ms int64, cuts uint64) *journal.Record {
	take := func(shift uint) string {
		n := min(int(cuts>>shift&0x3FF), len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	r := &journal.Record{Kind: journal.Kind(kind), Revision: rev, TimeMs: ms, Namespace: take(0), Key: take(10)}
	if r.Kind == journal.KindPut {
		r.Schema, r.Owner = take(20), take(30)
		r.CreatedMs, r.UpdatedMs, r.ExpiresMs = ms^int64(rev), -ms, int64(cuts>>40)
		r.Document = bytes.Clone(data)
	}
	return r
}

func checkBuiltRecord(t *testing.T, data []byte, kind byte, rev uint64, ms int64, cuts uint64, lim journal.Limits) {
	rec := buildRecord(data, kind, rev, ms, cuts)
	enc, err := rec.Encode()
	known := rec.Kind == journal.KindPut || rec.Kind == journal.KindDelete || rec.Kind == journal.KindExpire
	if !known {
		var fe *journal.FrameError
		if err == nil || !errors.As(err, &fe) {
			t.Fatalf("property 3: kind %d encoded (%v)", rec.Kind, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("property 3: %s record does not encode: %v", rec.Kind, err)
	}
	if len(enc) != rec.EncodedSize() {
		t.Fatalf("property 3: encoded %d bytes, EncodedSize %d", len(enc), rec.EncodedSize())
	}
	got, err := journal.Decode(enc, wideLimits)
	if err != nil {
		t.Fatalf("property 3: decode(encode(r)) failed: %v", err)
	}
	if d := recordDiff(got, rec); d != "" {
		t.Fatalf("property 3: decode(encode(r)) != r: %s", d)
	}
	within := len(rec.Namespace) <= lim.MaxNamespace && len(rec.Key) <= lim.MaxKey && len(rec.Schema) <= lim.MaxSchema &&
		len(rec.Owner) <= lim.MaxOwner && len(rec.Document) <= lim.MaxDocument
	if _, err := journal.Decode(enc, lim); (err == nil) != within {
		t.Fatalf("property 3: with the store's limits, decode error %v, lengths within limits %v", err, within)
	}
	if p := journal.PlausibleFrame(enc, lim); p != within {
		t.Fatalf("property 3: PlausibleFrame %v for a well-formed frame whose lengths are within the limits: %v", p, within)
	}
	if !journal.PlausibleFrame(enc, wideLimits) {
		t.Fatalf("property 3: PlausibleFrame rejects a well-formed frame under limits that admit it")
	}
	// Property 4, on a bit and a prefix length chosen by the input.
	bit := int(rev % uint64(len(enc)*8))
	flipped := bytes.Clone(enc)
	flipped[bit/8] ^= 1 << (bit % 8)
	if _, err := journal.Decode(flipped, wideLimits); err == nil {
		t.Fatalf("property 4: a frame with bit %d flipped decodes", bit)
	}
	cut := int(uint64(ms) % uint64(len(enc)))
	if _, err := journal.Decode(enc[:cut], wideLimits); err == nil {
		t.Fatalf("property 4: the first %d of %d bytes decode", cut, len(enc))
	}
}

// TestRecordBitFlips checks property 4 exhaustively on every seed frame.
func TestRecordBitFlips(t *testing.T) {
	t.Parallel()
	r := realData(t)
	for i, fr := range r.frames {
		for bit := 0; bit < len(fr)*8; bit++ {
			b := bytes.Clone(fr)
			b[bit/8] ^= 1 << (bit % 8)
			if _, err := journal.Decode(b, wideLimits); err == nil {
				t.Fatalf("frame %d with bit %d flipped decodes", i+1, bit)
			}
		}
		for cut := 0; cut < len(fr); cut++ {
			if _, err := journal.Decode(fr[:cut], wideLimits); err == nil {
				t.Fatalf("frame %d cut to %d bytes decodes", i+1, cut)
			}
		}
	}
}

// recordSeeds are the frames of a few real records of each kind, with the
// values that rebuild a similar record from the same bytes.
func recordSeeds(tb testing.TB) map[string][]any {
	r := realData(tb)
	seeds := map[string][]any{}
	seen := map[journal.Kind]int{}
	for i, rec := range r.recs {
		if seen[rec.Kind] >= 2 {
			continue
		}
		seen[rec.Kind]++
		frame := r.frames[i]
		var cuts uint64
		lens := []int{len(rec.Namespace), len(rec.Key), len(rec.Schema), len(rec.Owner)}
		for k, l := range lens {
			cuts |= uint64(l) << (10 * k)
		}
		// The data for buildRecord is the frame itself: the split then
		// lands inside the header, which is as good a test as any.
		seeds[fmt.Sprintf("%s-%d", rec.Kind, i+1)] = []any{frame, byte(rec.Kind), rec.Revision, rec.TimeMs, cuts | uint64(rec.ExpiresMs)<<40}
	}
	// A frame that is all header: the shortest DELETE.
	short, err := (&journal.Record{Kind: journal.KindDelete, Namespace: "user/a", Key: "k", Revision: 1}).Encode()
	if err != nil {
		tb.Fatal(err)
	}
	seeds["short-delete"] = []any{short, byte(journal.KindExpire), uint64(7), int64(-1), uint64(6 | 1<<10)}
	// A real frame with its checksum zeroed.
	lie := bytes.Clone(r.frames[0])
	binary.LittleEndian.PutUint32(lie[len(lie)-4:], 0)
	seeds["bad-crc"] = []any{lie, byte(0), uint64(0), int64(0), uint64(0)}
	return seeds
}
