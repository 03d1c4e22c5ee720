package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/keeppeek/statestore/journal"
)

func sampleFrames(t testing.TB) [][]byte {
	recs := []*journal.Record{
		putRec("service/a", "intents/cam", 7, string(doc(3))),
		{Kind: journal.KindDelete, Namespace: "user/bob", Key: "k", Revision: 9, TimeMs: 5},
		{Kind: journal.KindExpire, Namespace: "group/g", Key: "leases/x", Revision: 1 << 40, TimeMs: -1},
		{Kind: journal.KindPut, Namespace: "s", Key: "", Revision: 1, Schema: "", Owner: "", ExpiresMs: 99},
	}
	var out [][]byte
	for _, r := range recs {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// withCRC recomputes a frame's checksum, so that mutations reach the
// checks behind it.
func withCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[len(c)-4:], crc32.Checksum(c[:len(c)-4], crc32.MakeTable(crc32.Castagnoli)))
	return c
}

// checkParity fails unless parseFrame accepts exactly what journal.Decode
// accepts, with the same fields.
func checkParity(t testing.TB, b []byte, lim journal.Limits) {
	var f frame
	ok := parseFrame(b, lim, &f)
	rec, err := journal.Decode(b, lim)
	if ok != (err == nil) {
		t.Fatalf("parseFrame %v, journal.Decode %v, for %x", ok, err, b)
	}
	if ok {
		got := f.record()
		if len(got.Document) == 0 && len(rec.Document) == 0 {
			got.Document, rec.Document = nil, nil
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("fields differ:\nparseFrame %+v\nDecode     %+v", got, rec)
		}
	}
}

func TestParseFrameMatchesDecode(t *testing.T) {
	tight := journal.Limits{MaxNamespace: 5, MaxKey: 5, MaxSchema: 5, MaxOwner: 1, MaxDocument: 10}
	for _, b := range sampleFrames(t) {
		for _, lim := range []journal.Limits{journal.DefaultLimits, tight} {
			checkParity(t, b, lim)
			for n := 0; n < len(b)+3; n++ { // truncated and extended
				c := append([]byte(nil), b...)
				if n <= len(b) {
					c = c[:n]
				} else {
					c = append(c, bytes.Repeat([]byte{0}, n-len(b))...)
				}
				checkParity(t, c, lim)
				checkParity(t, withCRC(c), lim)
			}
			for i := range b { // every byte changed, with and without a fixed-up checksum
				for _, x := range []byte{0x01, 0x80, 0xff} {
					c := append([]byte(nil), b...)
					c[i] ^= x
					checkParity(t, c, lim)
					checkParity(t, withCRC(c), lim)
				}
			}
		}
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, b := range sampleFrames(f) {
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = withCRC(b)
		}
		checkParity(t, b, journal.DefaultLimits)
	})
}

func TestScanDataResyncs(t *testing.T) {
	var data []byte
	var offs []int
	for i := 1; i <= 6; i++ {
		b, _ := putRec("service/a", "k", uint64(i), string(doc(i))).Encode()
		offs = append(offs, len(data))
		data = binary.AppendUvarint(data, uint64(len(b)))
		data = append(data, b...)
	}
	clean := append([]byte(nil), data...)
	// Zero-filled bytes where record 3 was: damage, then resync at record 4.
	for i := offs[2]; i < offs[3]; i++ {
		data[i] = 0
	}
	s := &segmentScan{data: data}
	s.scanData(10, journal.DefaultLimits, nil)
	if s.records != 5 || len(s.damage) != 1 || s.damage[0].index != 12 || s.damage[0].offset != int64(offs[2]) || s.damage[0].last {
		t.Fatalf("records %d, damage %+v", s.records, s.damage)
	}
	if s.items[2].index != 0 || s.items[2].offset != int64(offs[3]) || s.next != 0 {
		t.Errorf("after a resync indexes are unknown: %+v, next %d", s.items[2], s.next)
	}
	// A cut inside the last record: one damage, flagged last.
	s = &segmentScan{data: clean[:len(clean)-5]}
	s.scanData(1, journal.DefaultLimits, nil)
	if s.records != 5 || len(s.damage) != 1 || !s.damage[0].last || s.damage[0].index != 6 || s.damage[0].offset != int64(offs[5]) {
		t.Fatalf("records %d, damage %+v", s.records, s.damage)
	}
}
