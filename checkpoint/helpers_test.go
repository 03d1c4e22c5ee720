package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// testLimits are the store's per-field defaults with room for the test
// views and the full benchmark view.
var testLimits = Limits{
	MaxNamespaces: 1 << 16, MaxEntries: 1 << 20, MaxTotalBytes: 1 << 30,
	MaxNamespace: 128, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 16384,
}

// builder makes views the way the store does: by applying journal records,
// so every revision and counter is one the store could have produced.
type builder struct {
	tb  testing.TB
	v   *materialize.View
	rev map[string]uint64
	now int64
}

func newBuilder(tb testing.TB) *builder {
	return &builder{tb: tb, v: materialize.New(), rev: map[string]uint64{}, now: 1_700_000_000_000}
}

func (b *builder) apply(r *journal.Record) {
	b.tb.Helper()
	b.rev[r.Namespace]++
	b.now++
	r.Revision, r.TimeMs = b.rev[r.Namespace], b.now
	if _, err := b.v.Apply(r); err != nil {
		b.tb.Fatalf("apply %s %s/%s: %v", r.Kind, r.Namespace, r.Key, err)
	}
}

func (b *builder) put(ns, key, schema, owner string, expires int64, doc []byte) {
	created := b.now + 1
	if old, ok := b.v.Get(ns, key); ok {
		created = old.CreatedMs
	}
	b.apply(&journal.Record{Kind: journal.KindPut, Namespace: ns, Key: key, Schema: schema, Owner: owner,
		CreatedMs: created, UpdatedMs: b.now + 1, ExpiresMs: expires, Document: doc})
}

func (b *builder) del(ns, key string) {
	b.apply(&journal.Record{Kind: journal.KindDelete, Namespace: ns, Key: key})
}

const schemaMI = "keeppeek.media-intent.v1"

// sampleView has a bit of everything: several namespaces, an emptied
// namespace whose revision must survive, replaced entries (revision below
// the namespace's), leases, several owners and schemas, an empty document
// and strings at their length limits.
func sampleView(tb testing.TB) *materialize.View {
	b := newBuilder(tb)
	for i := range 5 {
		b.put("user/alice", fmt.Sprintf("intent/cam-%d", i), schemaMI, "alice", 0, testdoc.MediaIntent(300+i, i))
	}
	b.put("user/alice", "intent/cam-1", schemaMI, "alice", 1_700_000_100_000, testdoc.MediaIntent(400, 99))
	b.put("user/bob", "x", "keeppeek.other.v2", "admin", 0, []byte(`{}`))
	b.put("user/bob", "y", schemaMI, "bob", 1_700_000_050_000, []byte{})
	b.put("group/gone", "k1", schemaMI, "admin", 0, []byte(`{"a":1}`))
	b.put("group/gone", "k2", schemaMI, "admin", 0, []byte(`{"a":2}`))
	b.del("group/gone", "k1")
	b.del("group/gone", "k2") // emptied: revision 4, no entries
	long := string(bytes.Repeat([]byte("n"), 128))
	b.put(long, string(bytes.Repeat([]byte("k"), 256)), string(bytes.Repeat([]byte("s"), 128)), string(bytes.Repeat([]byte("o"), 128)), 0, testdoc.MediaIntent(16384, 7))
	b.del("user/alice", "intent/cam-3")
	return b.v
}

// fullView is the benchmark's store: n documents of size bytes in
// namespaces of at most 1,024 entries (the default per-namespace bound).
func fullView(tb testing.TB, n, size int) *materialize.View {
	b := newBuilder(tb)
	for i := range n {
		ns := fmt.Sprintf("user/u%03d", i/1024)
		b.put(ns, fmt.Sprintf("intent/camera-%05d", i), schemaMI, fmt.Sprintf("u%03d", i/1024), int64(i%3)*1_800_000_000_000, testdoc.MediaIntent(size, i))
	}
	return b.v
}

func encode(tb testing.TB, v *materialize.View, index uint64, timeMs int64) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := Encode(&buf, v, index, timeMs); err != nil {
		tb.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

// snapshot is everything observable about a view, for comparisons.
type snapshot struct {
	Entries    []materialize.Entry
	Namespaces map[string]materialize.Namespace
	Totals     [3]int64
	Deadline   int64
	HasLease   bool
}

func snap(v *materialize.View) snapshot {
	s := snapshot{Namespaces: map[string]materialize.Namespace{}}
	v.All(func(e *materialize.Entry) bool {
		c := *e
		if len(c.Document) == 0 {
			c.Document = nil // nil and empty are the same document
		}
		s.Entries = append(s.Entries, c)
		return true
	})
	v.Namespaces(func(name string, n materialize.Namespace) bool {
		s.Namespaces[name] = n
		return true
	})
	e, by, ns := v.Totals()
	s.Totals = [3]int64{int64(e), by, int64(ns)}
	s.Deadline, s.HasLease = v.NextDeadline()
	return s
}

func sameView(tb testing.TB, got, want *materialize.View) {
	tb.Helper()
	g, w := snap(got), snap(want)
	if !reflect.DeepEqual(g, w) {
		if len(g.Entries) != len(w.Entries) {
			tb.Fatalf("views differ: %d entries, want %d", len(g.Entries), len(w.Entries))
		}
		for i := range g.Entries {
			if !reflect.DeepEqual(g.Entries[i], w.Entries[i]) {
				tb.Fatalf("entry %d differs:\n got %+v\nwant %+v", i, g.Entries[i], w.Entries[i])
			}
		}
		tb.Fatalf("views differ:\n got %+v %v %v\nwant %+v %v %v", g.Namespaces, g.Totals, g.Deadline, w.Namespaces, w.Totals, w.Deadline)
	}
}

// Hand-built bodies, for images a correct encoder never writes.

type rawNS struct {
	name    string
	rev     uint64
	entries uint32
	bytes   uint64
}

type rawEnt struct {
	ns, key, schema, owner    string
	rev                       uint64
	created, updated, expires int64
	doc                       string
}

func rawBody(nss []rawNS, ents []rawEnt) []byte {
	var b []byte
	for _, n := range nss {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(n.name)))
		b = append(b, n.name...)
		b = binary.LittleEndian.AppendUint64(b, n.rev)
		b = binary.LittleEndian.AppendUint32(b, n.entries)
		b = binary.LittleEndian.AppendUint64(b, n.bytes)
	}
	for _, e := range ents {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.ns)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.key)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.schema)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.owner)))
		b = binary.LittleEndian.AppendUint64(b, e.rev)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.created))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.updated))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.expires))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.doc)))
		b = append(b, e.ns...)
		b = append(b, e.key...)
		b = append(b, e.schema...)
		b = append(b, e.owner...)
		b = append(b, e.doc...)
	}
	return b
}

// wrap compresses raw and frames it with a valid header (counts as given)
// and valid CRCs, so only the body's content can be wrong.
func wrap(tb testing.TB, namespaces, entries uint32, byteCount uint64, raw []byte) []byte {
	tb.Helper()
	comp := testEncoder.EncodeAll(raw, nil)
	return frame(fileHeader{Header: Header{Version: FormatVersion, Index: 42, TimeMs: 7, Namespaces: namespaces, Entries: entries, Bytes: byteCount},
		rawLen: uint64(len(raw)), compLen: uint64(len(comp))}, comp)
}

// testEncoder compresses hand-built bodies; EncodeAll is safe for
// concurrent use, and building an encoder per call would dominate fuzzing.
var testEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))

// zstdFrame compresses raw as one zstd frame, with or without the content
// checksum every image carries.
func zstdFrame(tb testing.TB, raw []byte, checksum bool) []byte {
	tb.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(checksum))
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}

// frame writes header h (CRC computed) + comp + trailer CRC.
func frame(h fileHeader, comp []byte) []byte {
	out := appendHeader(nil, &h)
	out = append(out, comp...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(comp, castagnoli))
}

// fixCRCs recomputes both CRCs of img in place where the layout allows, so
// a mutation elsewhere reaches the checks behind them.
func fixCRCs(img []byte) []byte {
	if len(img) < headerSize {
		return img
	}
	binary.LittleEndian.PutUint32(img[offHeaderCRC:], crc32.Checksum(img[:offHeaderCRC], castagnoli))
	compLen := binary.LittleEndian.Uint64(img[offCompLen:])
	if uint64(len(img)-headerSize) >= compLen+trailerSize && compLen < uint64(len(img)) {
		end := headerSize + int(compLen)
		binary.LittleEndian.PutUint32(img[end:], crc32.Checksum(img[headerSize:end], castagnoli))
	}
	return img
}

// headerOf parses the header of an image, body lengths included.
func headerOf(tb testing.TB, img []byte) fileHeader {
	tb.Helper()
	h, err := parseHeader((*[headerSize]byte)(img[:headerSize]))
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// runtimeAlloc samples the bytes allocated so far by the process.
type runtimeAlloc struct{ bytes uint64 }

func (a *runtimeAlloc) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	a.bytes = m.TotalAlloc
}
