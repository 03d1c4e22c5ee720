package journal

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// segmentBytes encodes recs as tidwall/wal writes them and returns the
// bytes with each entry's offset.
func segmentBytes(t testing.TB, recs []*Record) ([]byte, []int) {
	t.Helper()
	var data []byte
	var offs []int
	for _, r := range recs {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, len(data))
		data = binary.AppendUvarint(data, uint64(len(b)))
		data = append(data, b...)
	}
	return data, offs
}

func sixPuts() []*Record {
	var recs []*Record
	for i := 1; i <= 6; i++ {
		recs = append(recs, &Record{Kind: KindPut, Namespace: "service/a", Key: "k", Revision: uint64(i), TimeMs: int64(i),
			Schema: "keeppeek.media-intent.v1", Owner: "o", Document: bytes.Repeat([]byte("x"), 20+i)})
	}
	return recs
}

// scanned is one thing a Scanner found, copied out.
type scanned struct {
	index  uint64
	offset int64
	rev    uint64 // 0 for damage
	damage string
	last   bool
	// prewritten: the damage is the zeros of pre-written space.
	prewritten bool
}

func scanAll(data []byte, start uint64, mode DamageMode) (out []scanned, s *Scanner) {
	s = NewScanner(data, start, DefaultLimits, mode)
	for s.Next() {
		if f := s.Frame(); f != nil {
			if s.Damage() != nil {
				panic("both a frame and damage")
			}
			out = append(out, scanned{index: s.Index(), offset: s.Offset(), rev: f.Revision})
			continue
		}
		d := s.Damage()
		if d.Index != s.Index() || d.Offset != s.Offset() {
			panic("damage and scanner disagree on where")
		}
		out = append(out, scanned{index: d.Index, offset: d.Offset, damage: d.Reason, last: d.Last, prewritten: d.Prewritten})
	}
	return out, s
}

func TestFrameParseInPlace(t *testing.T) {
	// Serial: testing.AllocsPerRun counts the whole process's allocations.
	for _, r := range sampleRecords() {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var f Frame
		if err := f.Parse(b, DefaultLimits); err != nil {
			t.Fatal(err)
		}
		got := f.Record()
		if got.Kind == KindPut && got.Document == nil {
			got.Document = []byte{}
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("Record() %+v, encoded %+v", got, r)
		}
		if n := testing.AllocsPerRun(100, func() { f.Parse(b, DefaultLimits) }); n != 0 {
			t.Errorf("Parse allocates %.0f times", n)
		}
		// The fields alias the frame; Record's copy does not.
		if len(f.Key) > 0 {
			f.Key[0] ^= 0xff
			if got.Key == string(f.Key) {
				t.Error("Record shares the key with the frame")
			}
			if !bytes.Contains(b, f.Key) {
				t.Error("Frame.Key does not alias the frame")
			}
		}
	}
}

func TestScannerCleanSegment(t *testing.T) {
	t.Parallel()
	data, offs := segmentBytes(t, sixPuts())
	for _, mode := range []DamageMode{StopAtDamage, SkipDamage} {
		got, s := scanAll(data, 10, mode)
		if len(got) != 6 || s.Records() != 6 {
			t.Fatalf("mode %d: %d found, %d records", mode, len(got), s.Records())
		}
		for i, g := range got {
			if g.index != uint64(10+i) || g.offset != int64(offs[i]) || g.rev != uint64(i+1) || g.damage != "" {
				t.Errorf("mode %d, entry %d: %+v", mode, i, g)
			}
		}
		if next, known := s.NextIndex(); next != 16 || !known {
			t.Errorf("NextIndex %d %v, want 16", next, known)
		}
		if s.Next() {
			t.Error("Next after the end")
		}
	}
}

func TestScannerDamage(t *testing.T) {
	t.Parallel()
	clean, offs := segmentBytes(t, sixPuts())
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), clean...)) }
	tests := []struct {
		name string
		data []byte
		// want lists, for SkipDamage, what the scan finds: "r<index>" a
		// record ("r?" index unknown), "d<index>" damage ("d<index>L"
		// when nothing valid follows).
		want       string
		reason     string
		nextKnown  bool
		stopAfter  int // StopAtDamage: records before the damage
		stopReason string
	}{
		{"flipped payload byte", mutate(func(b []byte) []byte { b[offs[2]+30] ^= 1; return b }),
			"r1 r2 d3 r4 r5 r6", "record crc", true, 2, "record crc"},
		{"zero-filled record", mutate(func(b []byte) []byte { clear(b[offs[2]:offs[3]]); return b }),
			"r1 r2 d3 r? r? r?", "empty entry (zero-filled bytes); next valid record at offset", false, 2, "empty entry"},
		{"length prefix too long", mutate(func(b []byte) []byte { b[offs[1]] += 3; return b }),
			"r1 d2 r? r? r? r?", "next valid record at offset " + strconv.Itoa(offs[2]), false, 1, "record crc"},
		{"cut inside the last record", clean[:len(clean)-5],
			"r1 r2 r3 r4 r5 d6L", "runs past end of file", true, 5, "runs past end of file"},
		{"damaged last record", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
			"r1 r2 r3 r4 r5 d6L", "record crc", true, 5, "record crc"},
		{"zeros inside the data", append(append(append([]byte(nil), clean[:offs[5]]...), make([]byte, 40)...), clean[offs[5]:]...),
			"r1 r2 r3 r4 r5 d6 r?", "empty entry (zero-filled bytes); next valid record at offset", false, 5, "empty entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, s := scanAll(tt.data, 1, SkipDamage)
			var words []string
			reason := ""
			for _, g := range got {
				idx := "?"
				if g.index != 0 {
					idx = strconv.Itoa(int(g.index))
				}
				switch {
				case g.damage == "":
					words = append(words, "r"+idx)
				case g.last:
					words = append(words, "d"+idx+"L")
					reason = g.damage
				default:
					words = append(words, "d"+idx)
					reason = g.damage
				}
			}
			if w := strings.Join(words, " "); w != tt.want {
				t.Errorf("SkipDamage found %s, want %s", w, tt.want)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.reason)
			}
			if _, known := s.NextIndex(); known != tt.nextKnown {
				t.Errorf("next index known %v, want %v", known, tt.nextKnown)
			}
			got, s = scanAll(tt.data, 1, StopAtDamage)
			last := got[len(got)-1]
			if len(got) != tt.stopAfter+1 || last.damage == "" || !strings.Contains(last.damage, tt.stopReason) || last.index != uint64(tt.stopAfter+1) {
				t.Errorf("StopAtDamage found %+v", got)
			}
			if strings.Contains(last.damage, "next valid record") || last.last {
				t.Errorf("StopAtDamage looked past the damage: %+v", last)
			}
			if last.prewritten {
				t.Errorf("damage that a record follows taken for pre-written space: %+v", last)
			}
			// The damage is where Replay stops, with Replay's reason.
			res, _ := scan(tt.data, DefaultLimits, nil)
			if res.bad == nil || res.bad.offset != last.offset || res.bad.reason != last.damage || res.count != s.Records() {
				t.Errorf("scan stops at %+v after %d records; the Scanner at %+v after %d", res.bad, res.count, last, s.Records())
			}
		})
	}
}

// FuzzScanner holds the Scanner to replay's reading on any bytes: with
// StopAtDamage it finds the records scan finds and stops where scan stops,
// with scan's reason; with SkipDamage it finds the same records up to that
// damage, then only valid frames, in file order, with an index only while
// the entries stay aligned.
// TestScannerPrewrittenTail: zeros from an entry boundary to the end are
// the journal's pre-written space, in both modes, exactly where scan (and
// so Open) stops reading without calling it damage.
func TestScannerPrewrittenTail(t *testing.T) {
	t.Parallel()
	clean, _ := segmentBytes(t, sixPuts())
	data := append(append([]byte(nil), clean...), make([]byte, 40)...)
	res, _ := scan(data, DefaultLimits, nil)
	if res.bad != nil || res.zeros != 40 || res.count != 6 {
		t.Fatalf("scan: %+v", res)
	}
	for _, mode := range []DamageMode{StopAtDamage, SkipDamage} {
		got, s := scanAll(data, 1, mode)
		last := got[len(got)-1]
		if len(got) != 7 || s.Records() != 6 || !last.prewritten || !last.last || last.index != 7 ||
			last.offset != int64(len(clean)) || !strings.Contains(last.damage, "40 zero bytes after the last record") {
			t.Errorf("mode %d found %+v", mode, got)
		}
		if next, known := s.NextIndex(); next != 7 || !known {
			t.Errorf("mode %d: NextIndex %d %v, want 7", mode, next, known)
		}
	}
}

func FuzzScanner(f *testing.F) {
	clean, offs := segmentBytes(f, sixPuts())
	f.Add(clean)
	f.Add(clean[:len(clean)-5])
	for _, off := range []int{offs[1], offs[2] + 30, offs[4] + 3} {
		c := append([]byte(nil), clean...)
		c[off] ^= 0x5a
		f.Add(c)
	}
	f.Add(append(append([]byte(nil), clean[:offs[3]]...), make([]byte, 50)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, _ := scan(data, DefaultLimits, nil)
		stop, s := scanAll(data, 1, StopAtDamage)
		if s.Records() != res.count {
			t.Fatalf("StopAtDamage found %d records, scan %d", s.Records(), res.count)
		}
		if res.bad != nil {
			last := stop[len(stop)-1]
			if last.damage != res.bad.reason || last.offset != res.bad.offset || last.index != uint64(res.count+1) {
				t.Fatalf("StopAtDamage stops at %+v, scan at %+v", last, res.bad)
			}
		}
		if res.zeros > 0 {
			last := stop[len(stop)-1]
			if !last.prewritten || last.offset != int64(len(data))-res.zeros {
				t.Fatalf("scan found %d pre-written zeros, StopAtDamage %+v", res.zeros, last)
			}
		}
		skip, _ := scanAll(data, 1, SkipDamage)
		for i := range min(len(stop), len(skip)) {
			if stop[i].damage == "" && stop[i] != skip[i] {
				t.Fatalf("entry %d: StopAtDamage %+v, SkipDamage %+v", i, stop[i], skip[i])
			}
		}
		var prev int64 = -1
		aligned := true
		for _, e := range skip {
			if e.offset <= prev {
				t.Fatalf("offsets go back: %+v after %d", e, prev)
			}
			prev = e.offset
			if !aligned && e.index != 0 {
				t.Fatalf("index %d after a resync", e.index)
			}
			if strings.Contains(e.damage, "indexes after it unknown") {
				aligned = false
			}
			if e.damage == "" {
				n, w := binary.Uvarint(data[e.offset:])
				var fr Frame
				if err := fr.Parse(data[int(e.offset)+w:int(e.offset)+w+int(n)], DefaultLimits); err != nil {
					t.Fatalf("a record at %d that does not parse: %v", e.offset, err)
				}
			}
		}
	})
}
