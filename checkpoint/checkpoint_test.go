package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/materialize"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	emptied := newBuilder(t)
	emptied.put("user/x", "k", schemaMI, "x", 0, []byte(`{}`))
	emptied.put("user/x", "k", schemaMI, "x", 0, []byte(`{"v":2}`))
	emptied.del("user/x", "k")

	tests := []struct {
		name string
		v    *materialize.View
	}{
		{"empty", materialize.New()},
		{"only an emptied namespace", emptied.v},
		{"sample", sampleView(t)},
		{"2000 entries in 3 namespaces", fullView(t, 2000, 700)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := encode(t, tc.v, 1234, 1_700_000_000_999)
			h, got, err := Decode(bytes.NewReader(img), testLimits)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			entries, byteCount, _ := tc.v.Totals()
			nsCount := 0
			tc.v.Namespaces(func(string, materialize.Namespace) bool { nsCount++; return true })
			want := Header{Version: FormatVersion, Index: 1234, TimeMs: 1_700_000_000_999,
				Namespaces: uint32(nsCount), Entries: uint32(entries), Bytes: uint64(byteCount)}
			if h != want {
				t.Fatalf("header %+v, want %+v", h, want)
			}
			sameView(t, got, tc.v)

			// Canonical: the same view encodes to the same bytes, and so
			// does the decoded copy.
			if again := encode(t, tc.v, 1234, 1_700_000_000_999); !bytes.Equal(again, img) {
				t.Fatal("encoding the same view twice gave different bytes")
			}
			if again := encode(t, got, 1234, 1_700_000_000_999); !bytes.Equal(again, img) {
				t.Fatal("encoding the decoded view gave different bytes")
			}
			rh, err := ReadHeader(bytes.NewReader(img))
			if err != nil || rh != h {
				t.Fatalf("ReadHeader = %+v, %v; want %+v", rh, err, h)
			}
		})
	}
}

// testdata/cas127-1mib-window.ckpt was written by the encoder as it was
// before its options changed (1 MiB window, 64 KiB blocks; now 512 KiB and
// 128 KiB). The options are not part of the format: that image must keep
// decoding, to the view it was taken from.
func TestDecodesEarlierEncoderOptions(t *testing.T) {
	t.Parallel()
	h, v, err := ReadFile(filepath.Join("testdata", "cas127-1mib-window.ckpt"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 1 || h.Index != 7 || h.TimeMs != 1_700_000_000_000 || h.Entries != casWriters {
		t.Fatalf("header %+v", h)
	}
	sameView(t, v, buildCAS127(t))
}

func TestRoundTripKeepsEmptiedNamespace(t *testing.T) {
	t.Parallel()
	img := encode(t, sampleView(t), 1, 1)
	_, v, err := Decode(bytes.NewReader(img), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if n := v.Namespace("group/gone"); n != (materialize.Namespace{Revision: 4}) {
		t.Fatalf("emptied namespace restored as %+v, want revision 4 and no entries", n)
	}
	if _, _, live := v.Totals(); live != 3 {
		t.Fatalf("%d live namespaces, want 3", live)
	}
}

// A decoded document shares one buffer with its neighbours; appending to it
// must copy, never overwrite the next entry.
func TestDecodedDocumentsAreCapacityLimited(t *testing.T) {
	t.Parallel()
	v := fullView(t, 10, 200)
	_, got, err := Decode(bytes.NewReader(encode(t, v, 1, 1)), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	var first *materialize.Entry
	got.All(func(e *materialize.Entry) bool { first = e; return false })
	_ = append(first.Document, "XXXXXXXX"...)
	sameView(t, got, v)
}

func TestConcurrentDecode(t *testing.T) {
	t.Parallel()
	v := sampleView(t)
	img := encode(t, v, 1, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				_, got, err := Decode(bytes.NewReader(img), testLimits)
				if err != nil {
					t.Error(err)
					return
				}
				sameView(t, got, v)
				if !bytes.Equal(encode(t, got, 1, 1), img) {
					t.Error("re-encoding differs")
					return
				}
			}
		})
	}
	wg.Wait()
}

// Encoders and their buffers are kept between calls and handed between
// goroutines; images of different sizes going through them concurrently
// must come out as they do one at a time.
func TestConcurrentEncode(t *testing.T) {
	t.Parallel()
	views := []*materialize.View{sampleView(t), fullView(t, 150, 2193), fullView(t, 700, 1500), materialize.New()}
	want := make([][]byte, len(views))
	for i, v := range views {
		want[i] = encode(t, v, 3, 4)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for j := range 12 {
				i := (g + j) % len(views)
				if got := encode(t, views[i], 3, 4); !bytes.Equal(got, want[i]) {
					t.Errorf("view %d: concurrent encoding differs", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// wantErr checks that err is an *Error wrapping sentinel and naming field.
func wantErr(t *testing.T, err error, sentinel error, field string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *checkpoint.Error", err, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	if field != "" && ce.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, ce.Field, field)
	}
	if !strings.Contains(err.Error(), ce.Field) {
		t.Fatalf("error text %q does not name the field %q", err, ce.Field)
	}
}

// setHeader rewrites a header field and recomputes the header CRC, so the
// check behind the CRC is what fails.
func setHeader(img []byte, off int, size int, v uint64) []byte {
	img = bytes.Clone(img)
	switch size {
	case 2:
		binary.LittleEndian.PutUint16(img[off:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(img[off:], uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(img[off:], v)
	}
	return fixCRCs(img)
}

func TestCorruptHeader(t *testing.T) {
	t.Parallel()
	img := encode(t, sampleView(t), 9, 9)
	flip := func(off int) []byte { b := bytes.Clone(img); b[off] ^= 0x40; return b }
	withLim := func(f func(*Limits)) Limits { l := testLimits; f(&l); return l }
	tests := []struct {
		name     string
		img      []byte
		lim      Limits
		sentinel error
		field    string
	}{
		{"bad magic", flip(3), testLimits, ErrCorrupt, "magic"},
		{"not a checkpoint", []byte(strings.Repeat("{\"json\":true}", 10)), testLimits, ErrCorrupt, "magic"},
		{"newer version", setHeader(img, offVersion, 2, FormatVersion+1), testLimits, ErrVersion, "version"},
		{"newer version, stale crc", func() []byte { b := bytes.Clone(img); b[offVersion] = FormatVersion + 1; return b }(), testLimits, ErrVersion, "version"},
		{"version 0", setHeader(img, offVersion, 2, 0), testLimits, ErrCorrupt, "version"},
		{"unknown flag", setHeader(img, offFlags, 2, 1), testLimits, ErrVersion, "flags"},
		{"header crc (index)", flip(offIndex), testLimits, ErrCorrupt, "header crc"},
		{"header crc (entries)", flip(offEntries + 3), testLimits, ErrCorrupt, "header crc"},
		{"header crc (crc)", flip(offHeaderCRC), testLimits, ErrCorrupt, "header crc"},
		{"body length below the counts", setHeader(img, offRawLen, 8, 10), testLimits, ErrCorrupt, "body length"},
		{"compressed length beyond zstd", setHeader(img, offCompLen, 8, 1<<40), testLimits, ErrCorrupt, "compressed length"},
		{"too many namespaces", img, withLim(func(l *Limits) { l.MaxNamespaces = 3 }), ErrLimits, "namespaces"},
		{"too many entries", img, withLim(func(l *Limits) { l.MaxEntries = 5 }), ErrLimits, "entries"},
		{"too many bytes", img, withLim(func(l *Limits) { l.MaxTotalBytes = 1000 }), ErrLimits, "bytes"},
		{"zero limits", img, Limits{}, ErrLimits, "namespaces"},
		{"documents beyond MaxDocument", img, withLim(func(l *Limits) { l.MaxDocument = 100 }), ErrLimits, "bytes"},
		{"body beyond the string limits", img, withLim(func(l *Limits) { l.MaxNamespace, l.MaxKey, l.MaxSchema, l.MaxOwner = 1, 1, 1, 1 }), ErrLimits, "body length"},
		{"one key over MaxKey", img, withLim(func(l *Limits) { l.MaxKey = 255 }), ErrLimits, "key length"},
		{"one namespace over MaxNamespace", img, withLim(func(l *Limits) { l.MaxNamespace = 127 }), ErrLimits, "namespace length"},
		{"one schema over MaxSchema", img, withLim(func(l *Limits) { l.MaxSchema = 127 }), ErrLimits, "schema length"},
		{"one owner over MaxOwner", img, withLim(func(l *Limits) { l.MaxOwner = 127 }), ErrLimits, "owner length"},
		{"one document over MaxDocument", img, withLim(func(l *Limits) { l.MaxDocument = 16383 }), ErrLimits, "document length"},
		{"empty file", nil, testLimits, ErrCorrupt, "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, v, err := Decode(bytes.NewReader(tc.img), tc.lim)
			if v != nil {
				t.Fatal("returned a view with an error")
			}
			wantErr(t, err, tc.sentinel, tc.field)
		})
	}
}

// failReader hands out head, then fails the test if anything reads further.
type failReader struct {
	t    *testing.T
	head []byte
}

func (r *failReader) Read(p []byte) (int, error) {
	if len(r.head) == 0 {
		r.t.Fatal("Decode read past the header of an image whose header is over the limits")
	}
	n := copy(p, r.head)
	r.head = r.head[n:]
	return n, nil
}

// Limits apply before the body is read or anything is allocated for it: a
// header declaring a billion entries (and a body to match) costs one
// 64-byte read.
func TestLimitsBeforeBody(t *testing.T) {
	// Serial: it reads the process's TotalAlloc, which other tests raise.
	h := fileHeader{Header: Header{Version: FormatVersion, Index: 1, Namespaces: 1, Entries: 1_000_000_000, Bytes: 1 << 40}}
	h.rawLen = bodyBound(&h.Header, testLimits)
	h.compLen = h.rawLen / 100
	head := appendHeader(nil, &h)
	small := Limits{MaxNamespaces: 10, MaxEntries: 100, MaxTotalBytes: 1 << 20, MaxNamespace: 128, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 16384}

	var before, after runtimeAlloc
	before.read()
	_, _, err := Decode(&failReader{t: t, head: head}, small)
	after.read()
	wantErr(t, err, ErrLimits, "entries")
	if d := after.bytes - before.bytes; d > 1<<20 {
		t.Fatalf("refusing the header allocated %d bytes", d)
	}

	// Within the count limits, the declared body length is still bounded by
	// what the counts can need.
	h = fileHeader{Header: Header{Version: FormatVersion, Index: 1, Namespaces: 1, Entries: 1, Bytes: 10}}
	h.rawLen = 1 << 40
	h.compLen = 1 << 30
	_, _, err = Decode(&failReader{t: t, head: appendHeader(nil, &h)}, small)
	wantErr(t, err, ErrLimits, "body length")
}

func TestTruncated(t *testing.T) {
	t.Parallel()
	img := encode(t, sampleView(t), 3, 3)
	dir := t.TempDir()
	for n := 0; n < len(img); n += 1 + n/64 {
		_, v, err := Decode(bytes.NewReader(img[:n]), testLimits)
		if v != nil || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d of %d: view %v, error %v", n, len(img), v != nil, err)
		}
		wantErr(t, err, ErrCorrupt, "")
		if n%7 == 0 {
			path := filepath.Join(dir, "t.ckpt")
			if err := os.WriteFile(path, img[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadFile(path, testLimits)
			wantErr(t, err, ErrCorrupt, "")
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
		}
	}
	// The last byte too.
	_, _, err := Decode(bytes.NewReader(img[:len(img)-1]), testLimits)
	wantErr(t, err, ErrCorrupt, "trailer")
}

// Every byte of the image matters: a flipped byte anywhere is refused.
func TestFlippedByte(t *testing.T) {
	t.Parallel()
	img := encode(t, sampleView(t), 3, 3)
	for off := range img {
		b := bytes.Clone(img)
		b[off] ^= 1 << (off % 8)
		_, v, err := Decode(bytes.NewReader(b), testLimits)
		if v != nil {
			t.Fatalf("flipped byte at offset %d decoded", off)
		}
		switch {
		case off >= offVersion && off < offVersion+2:
			if !errors.Is(err, ErrVersion) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("offset %d: %v", off, err)
			}
		case off < len(magic):
			wantErr(t, err, ErrCorrupt, "magic")
		case off < headerSize:
			wantErr(t, err, ErrCorrupt, "header crc")
		default: // body and trailer
			wantErr(t, err, ErrCorrupt, "body crc")
		}
	}
}

func TestTrailingGarbage(t *testing.T) {
	t.Parallel()
	img := encode(t, sampleView(t), 3, 3)
	for _, extra := range []string{"\x00", "garbage", strings.Repeat("\x00", 4096)} {
		b := append(bytes.Clone(img), extra...)
		_, _, err := Decode(bytes.NewReader(b), testLimits)
		wantErr(t, err, ErrCorrupt, "trailing data")

		path := filepath.Join(t.TempDir(), Name(3))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err = ReadFile(path, testLimits)
		wantErr(t, err, ErrCorrupt, "trailing data")
	}
}

// Bodies that pass every CRC but disagree with the header or themselves.
func TestInconsistentBody(t *testing.T) {
	t.Parallel()
	ns := func(name string, rev uint64, entries uint32, n uint64) rawNS { return rawNS{name, rev, entries, n} }
	ent := func(nsName, key string, rev uint64, doc string) rawEnt {
		return rawEnt{ns: nsName, key: key, schema: schemaMI, owner: "o", rev: rev, created: 1, updated: 2, doc: doc}
	}
	okNS := []rawNS{ns("a", 3, 2, 4), ns("b", 1, 1, 2)}
	okEnts := []rawEnt{ent("a", "k1", 1, "{}"), ent("a", "k2", 3, "{}"), ent("b", "k", 1, "{}")}
	// The well-formed body decodes; each case below breaks one thing.
	if _, _, err := Decode(bytes.NewReader(wrap(t, 2, 3, 6, rawBody(okNS, okEnts))), testLimits); err != nil {
		t.Fatalf("control body: %v", err)
	}
	tests := []struct {
		name     string
		img      []byte
		sentinel error
		field    string
	}{
		{"header counts one entry more", wrap(t, 2, 4, 6, rawBody(okNS, okEnts)), ErrCorrupt, "namespace counters"},
		{"header counts one entry more, counters agree",
			wrap(t, 2, 4, 6, rawBody([]rawNS{ns("a", 3, 3, 4), ns("b", 1, 1, 2)}, okEnts)), ErrCorrupt, "entry record"},
		{"header counts one entry less", wrap(t, 2, 2, 6, rawBody([]rawNS{ns("a", 3, 1, 4), ns("b", 1, 1, 2)}, okEnts)), ErrCorrupt, "body length"},
		{"header counts one namespace more", wrap(t, 3, 3, 6, rawBody(okNS, okEnts)), ErrCorrupt, ""},
		{"header counts one namespace less", wrap(t, 1, 3, 6, rawBody(okNS, okEnts)), ErrCorrupt, "namespace counters"},
		{"header bytes differ", wrap(t, 2, 3, 7, rawBody([]rawNS{ns("a", 3, 2, 5), ns("b", 1, 1, 2)}, okEnts)), ErrCorrupt, ""},
		{"namespace counter disagrees", wrap(t, 2, 3, 6, rawBody([]rawNS{ns("a", 3, 1, 4), ns("b", 1, 2, 2)}, okEnts)), ErrCorrupt, "namespace counters"},
		{"namespace bytes disagree", wrap(t, 2, 3, 6, rawBody([]rawNS{ns("a", 3, 2, 3), ns("b", 1, 1, 3)}, okEnts)), ErrCorrupt, "namespace counters"},
		{"namespaces out of order", wrap(t, 2, 3, 6, rawBody([]rawNS{okNS[1], okNS[0]}, okEnts)), ErrCorrupt, "namespace order"},
		{"duplicate namespace", wrap(t, 2, 0, 0, rawBody([]rawNS{ns("a", 1, 0, 0), ns("a", 1, 0, 0)}, nil)), ErrCorrupt, "namespace order"},
		{"namespace revision 0", wrap(t, 1, 0, 0, rawBody([]rawNS{ns("a", 0, 0, 0)}, nil)), ErrCorrupt, "namespace revision"},
		{"entries out of order", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{okEnts[1], okEnts[0], okEnts[2]})), ErrCorrupt, "entry order"},
		{"namespaces of entries out of order", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{okEnts[2], okEnts[0], okEnts[1]})), ErrCorrupt, "entry order"},
		{"duplicate entry", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{okEnts[0], okEnts[0], okEnts[2]})), ErrCorrupt, "entry order"},
		{"entry without namespace record", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{okEnts[0], okEnts[1], ent("c", "k", 1, "{}")})), ErrCorrupt, "entry namespace"},
		{"entry revision above namespace", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{okEnts[0], ent("a", "k2", 4, "{}"), okEnts[2]})), ErrCorrupt, "entry revision"},
		{"entry revision 0", wrap(t, 2, 3, 6, rawBody(okNS, []rawEnt{ent("a", "k1", 0, "{}"), okEnts[1], okEnts[2]})), ErrCorrupt, "entry revision"},
		{"trailing bytes in body", wrap(t, 2, 3, 6, append(rawBody(okNS, okEnts), 0)), ErrCorrupt, "body length"},
		{"body ends inside a namespace record", wrap(t, 1, 0, 0, rawBody([]rawNS{ns("a", 1, 0, 0)}, nil)[:21]), ErrCorrupt, "body length"},
		{"body shorter than declared", func() []byte {
			raw := rawBody(okNS, okEnts)
			img := wrap(t, 2, 3, 6, raw)
			return setHeader(img, offRawLen, 8, uint64(len(raw)+10))
		}(), ErrCorrupt, "body length"},
		{"body longer than declared", func() []byte {
			raw := rawBody(okNS, okEnts)
			img := wrap(t, 2, 3, 6, raw)
			return setHeader(img, offRawLen, 8, uint64(len(raw)-1))
		}(), ErrCorrupt, "body length"},
		{"body far longer than declared", func() []byte {
			raw := rawBody(okNS, okEnts)
			img := wrap(t, 2, 3, 6, append(raw, make([]byte, 1<<20)...))
			return setHeader(img, offRawLen, 8, uint64(len(raw)))
		}(), ErrCorrupt, "body"},
		{"body far longer than declared, no content size in the frame", func() []byte {
			raw := rawBody(okNS, okEnts)
			var comp bytes.Buffer
			enc, _ := zstd.NewWriter(&comp, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
			enc.Write(raw)
			enc.Write(make([]byte, 4<<20))
			enc.Close()
			return frame(fileHeader{Header: Header{Version: 1, Namespaces: 2, Entries: 3, Bytes: 6}, rawLen: uint64(len(raw)) + 1000, compLen: uint64(comp.Len())}, comp.Bytes())
		}(), ErrCorrupt, "body"},
		{"body is not zstd", frame(fileHeader{Header: Header{Version: 1}, rawLen: 0, compLen: 5}, []byte("hello")), ErrCorrupt, "body frame"},
		// An image of an empty view needs a frame too: without one, a CRC
		// recomputed over nothing would turn any image into an empty store.
		{"empty body", frame(fileHeader{Header: Header{Version: 1}}, nil), ErrCorrupt, "body frame"},
		{"skippable frame", func() []byte {
			comp := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0x184D2A50), 3)
			comp = append(comp, "abc"...)
			return frame(fileHeader{Header: Header{Version: 1}, compLen: uint64(len(comp))}, comp)
		}(), ErrCorrupt, "body frame"},
		{"frame without content checksum", func() []byte {
			comp := zstdFrame(t, rawBody(okNS, okEnts), false)
			return frame(fileHeader{Header: Header{Version: 1, Namespaces: 2, Entries: 3, Bytes: 6}, rawLen: uint64(len(rawBody(okNS, okEnts))), compLen: uint64(len(comp))}, comp)
		}(), ErrCorrupt, "body frame"},
		{"a second frame after the first", func() []byte {
			raw := rawBody(okNS, okEnts)
			comp := append(zstdFrame(t, raw[:10], true), zstdFrame(t, raw[10:], true)...)
			return frame(fileHeader{Header: Header{Version: 1, Namespaces: 2, Entries: 3, Bytes: 6}, rawLen: uint64(len(raw)), compLen: uint64(len(comp))}, comp)
		}(), ErrCorrupt, "body frame"},
		{"frame cut inside its checksum", func() []byte {
			raw := rawBody(okNS, okEnts)
			comp := zstdFrame(t, raw, true)
			comp = comp[:len(comp)-2]
			return frame(fileHeader{Header: Header{Version: 1, Namespaces: 2, Entries: 3, Bytes: 6}, rawLen: uint64(len(raw)), compLen: uint64(len(comp))}, comp)
		}(), ErrCorrupt, "body frame"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, v, err := Decode(bytes.NewReader(tc.img), testLimits)
			if v != nil {
				t.Fatal("decoded")
			}
			wantErr(t, err, tc.sentinel, tc.field)
			t.Log(err)
		})
	}
}

func TestEncodeRefusesBrokenViews(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ns   map[string]materialize.Namespace
	}{
		{"namespace revision 0", map[string]materialize.Namespace{"a": {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := materialize.Restore(tc.ns, nil)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := Encode(&buf, v, 1, 1); err == nil {
				t.Fatal("encoded a view Decode would refuse")
			}
			if buf.Len() != 0 {
				t.Fatalf("wrote %d bytes before refusing", buf.Len())
			}
		})
	}
}

type errWriter struct{ n int }

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, io.ErrShortWrite
	}
	w.n--
	return len(p), nil
}

func TestEncodeWriteError(t *testing.T) {
	t.Parallel()
	if _, err := Encode(&errWriter{n: 0}, sampleView(t), 1, 1); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("write failing: error %v", err)
	}
	// The whole image goes out in one Write: one write(2) for a file.
	if _, err := Encode(&errWriter{n: 1}, fullView(t, 200, 2193), 1, 1); err != nil {
		t.Fatalf("a writer taking one Write: %v", err)
	}
	// A failed write leaves nothing behind for the next Encode.
	v := sampleView(t)
	_, got, err := Decode(bytes.NewReader(encode(t, v, 1, 1)), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, got, v)
}

// An Encode that fails halfway through the entries leaves its encoder
// mid-frame; nothing of it may reach the next Encode, which must give the
// same bytes as before, or images would stop being canonical.
func TestEncodeAfterFailureIsCanonical(t *testing.T) {
	t.Parallel()
	docs := 0
	var ents []*materialize.Entry
	for i := range 150 {
		d := testdoc.MediaIntent(2193, i)
		docs += len(d)
		ents = append(ents, &materialize.Entry{Namespace: "a", Key: fmt.Sprintf("k%03d", i), Revision: 1, Document: d})
	}
	// Sorts last, past 128 KiB of body, and is too long for its field.
	ents = append(ents, &materialize.Entry{Namespace: "a", Key: strings.Repeat("z", math.MaxUint16+1), Revision: 1})
	bad, err := materialize.Restore(map[string]materialize.Namespace{"a": {Revision: 1, Entries: len(ents), Bytes: int64(docs)}}, ents)
	if err != nil {
		t.Fatal(err)
	}
	good := fullView(t, 300, 2193)

	fresh := encode(t, good, 1, 1)
	for range 3 {
		var buf bytes.Buffer
		if _, err := Encode(&buf, bad, 1, 1); err == nil || buf.Len() != 0 {
			t.Fatalf("encoded a key over 65535 bytes: error %v, %d bytes written", err, buf.Len())
		}
		if again := encode(t, good, 1, 1); !bytes.Equal(again, fresh) {
			t.Fatal("after a failed Encode, the same view encodes to different bytes")
		}
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	e := &Error{Path: "/s/checkpoint-00000000000000000007.ckpt", Offset: 60, Field: "header crc", Reason: "stored 1, computed 2", Err: ErrCorrupt}
	want := "checkpoint /s/checkpoint-00000000000000000007.ckpt: header crc: stored 1, computed 2 (file offset 60)"
	if e.Error() != want {
		t.Fatalf("%q, want %q", e.Error(), want)
	}
	e = &Error{Offset: -1, Field: "key length", Reason: "too long", Err: ErrLimits}
	if e.Error() != "checkpoint: key length: too long" || !errors.Is(e, ErrLimits) {
		t.Fatalf("%q", e.Error())
	}
}

func TestSaturating(t *testing.T) {
	t.Parallel()
	if satMul(math.MaxUint32+1, math.MaxUint32+1) != math.MaxUint64 || satAdd(math.MaxUint64, 1) != math.MaxUint64 || satMul(3, 4) != 12 {
		t.Fatal("saturating arithmetic wraps")
	}
	h := Header{Namespaces: math.MaxUint32, Entries: math.MaxUint32, Bytes: math.MaxUint64}
	huge := Limits{MaxNamespace: math.MaxInt, MaxKey: math.MaxInt, MaxSchema: math.MaxInt, MaxOwner: math.MaxInt}
	if bodyBound(&h, huge) != math.MaxUint64 {
		t.Fatal("body bound wraps")
	}
}

// A frame that inflates far beyond the declared body length (a zstd bomb
// behind a valid CRC) stops at the declared length: decoding it allocates
// about what the header declared, not what the frame would produce.
func TestDecompressionBounded(t *testing.T) {
	// Serial: it reads the process's TotalAlloc, which other tests raise.
	var ents []rawEnt
	for i := range 100 {
		ents = append(ents, rawEnt{ns: "a", key: fmt.Sprintf("k%03d", i), rev: 1, doc: string(testdoc.MediaIntent(1000, i))})
	}
	raw := rawBody([]rawNS{{"a", 1, 100, 100_000}}, ents)
	for _, withSize := range []bool{false, true} {
		var comp bytes.Buffer
		enc, err := zstd.NewWriter(&comp, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		const bomb = 256 << 20
		if withSize {
			enc.ResetContentSize(&comp, int64(len(raw))+bomb)
		}
		enc.Write(raw)
		enc.ReadFrom(io.LimitReader(zeros{}, bomb))
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		declared := uint64(len(raw))
		img := frame(fileHeader{Header: Header{Version: 1, Namespaces: 1, Entries: 100, Bytes: 100_000}, rawLen: declared, compLen: uint64(comp.Len())}, comp.Bytes())

		var before, after runtimeAlloc
		before.read()
		_, _, err = Decode(bytes.NewReader(img), testLimits)
		after.read()
		wantErr(t, err, ErrCorrupt, "body")
		t.Logf("frame content size %v: %v; allocated %d bytes", withSize, err, after.bytes-before.bytes)
		if d := after.bytes - before.bytes; d > 4<<20 {
			t.Fatalf("content size in frame %v: a %d-byte declared body allocated %d bytes while refusing a %d-byte bomb", withSize, declared, d, bomb)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestLowerEncoderMemSameBytes: the lower-memory option changes only what
// the encoder allocates, never the bytes it writes, for inputs below,
// at and well past the window (where the smaller history is shifted more
// often), written in the small pieces Encode hands it.
func TestLowerEncoderMemSameBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	docs := func(n int) []byte {
		var b []byte
		for i := 0; len(b) < n; i++ {
			b = fmt.Appendf(b, `{"role":"publish","desired":true,"source_id":"cam-%d","media_kind":"video","priority":%d,"recording_mode":"disabled"}`, i, rng.IntN(1000))
		}
		return b[:n]
	}
	noise := make([]byte, 3<<20)
	for i := range noise {
		noise[i] = byte(rng.IntN(16)) // compressible, few long matches
	}
	inputs := map[string][]byte{"empty": nil, "1KiB": docs(1 << 10), "300KiB": docs(300 << 10), "window": docs(encoderWindow),
		"3MiB": docs(3 << 20), "3MiB noise": noise}
	for name, in := range inputs {
		var out [2]bytes.Buffer
		for i, lower := range []bool{false, true} {
			enc := newEncoderMem(lower)
			enc.Reset(&out[i])
			for p := in; len(p) > 0; {
				n := min(len(p), 1+rng.IntN(8<<10))
				if _, err := enc.Write(p[:n]); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
			t.Errorf("%s: %d bytes with the default memory, %d with the lower: not the same bytes", name, out[0].Len(), out[1].Len())
		}
	}
}
