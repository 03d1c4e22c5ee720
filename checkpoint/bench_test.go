package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/materialize"
)

// The full store of the performance target: 30,601 documents of 2,193
// bytes, 64 MiB of values, in namespaces of at most 1,024 entries.
const (
	fullDocs    = 30_601
	fullDocSize = 2_193
)

type image struct {
	once sync.Once
	v    *materialize.View
	img  []byte
	h    fileHeader
}

// full uses the shared testdoc media intents, which differ only in a few
// fields and compress extremely well; varied fills the same documents with
// pseudo-random words and numbers, closer to what compresses worst.
var full, varied image

func (im *image) get(b *testing.B, build func(testing.TB) *materialize.View) (*materialize.View, []byte, fileHeader) {
	im.once.Do(func() {
		im.v = build(b)
		var buf bytes.Buffer
		if _, err := Encode(&buf, im.v, 1, 1); err != nil {
			b.Fatal(err)
		}
		im.img = buf.Bytes()
		im.h = headerOf(b, im.img)
	})
	return im.v, im.img, im.h
}

func buildFull(tb testing.TB) *materialize.View { return fullView(tb, fullDocs, fullDocSize) }

func buildVaried(tb testing.TB) *materialize.View {
	b := newBuilder(tb)
	for i := range fullDocs {
		b.put(fmt.Sprintf("user/u%03d", i/1024), fmt.Sprintf("intent/camera-%05d", i), schemaMI, fmt.Sprintf("u%03d", i/1024), 0, variedDoc(fullDocSize, i))
	}
	return b.v
}

var words = []string{"camera", "front", "door", "garden", "garage", "hallway", "720p", "1080p", "h264", "opus",
	"scale", "crop", "mirror", "rotate", "denoise", "sharpen", "fast", "slow", "idle", "busy", "left", "right",
	"wide", "narrow", "day", "night", "motion", "person", "vehicle", "parcel", "animal", "zone"}

// variedDoc is a media-intent-shaped JSON object of exactly size bytes
// whose parameters are pseudo-random words and numbers seeded by seed.
func variedDoc(size, seed int) []byte {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	buf := []byte(`{"role":"publish","desired":true,"source_id":"camera-` + strconv.Itoa(seed) +
		`","media_kind":"video","recording_mode":"disabled","parameters":{`)
	for j := 0; ; j++ {
		member := `"cv.p` + strconv.Itoa(j) + `":"`
		for range 3 {
			member += words[rng.IntN(len(words))] + "-" + strconv.Itoa(rng.IntN(100000)) + " "
		}
		member += `",`
		if len(buf)+len(member)+len(`"cv.end":""}}`) > size {
			break
		}
		buf = append(buf, member...)
	}
	buf = append(buf, `"cv.end":"`...)
	for len(buf) < size-len(`"}}`) {
		buf = append(buf, byte('a'+rng.IntN(26)))
	}
	buf = append(buf, `"}}`...)
	if len(buf) != size {
		panic(fmt.Sprintf("variedDoc: %d bytes, want %d", len(buf), size))
	}
	return buf
}

// The benchmarks report MB/s of uncompressed body, the work a checkpoint
// does per byte of state.
func BenchmarkEncodeFull(b *testing.B) {
	benchEncode(b, &full, buildFull)
}

func BenchmarkDecodeFull(b *testing.B) {
	benchDecode(b, &full, buildFull)
}

func BenchmarkEncodeFullVaried(b *testing.B) {
	benchEncode(b, &varied, buildVaried)
}

func BenchmarkDecodeFullVaried(b *testing.B) {
	benchDecode(b, &varied, buildVaried)
}

func benchEncode(b *testing.B, im *image, build func(testing.TB) *materialize.View) {
	v, img, h := im.get(b, build)
	b.SetBytes(int64(h.rawLen))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(io.Discard, v, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(img)), "file-bytes")
	b.ReportMetric(float64(h.rawLen), "body-bytes")
}

func benchDecode(b *testing.B, im *image, build func(testing.TB) *materialize.View) {
	v, img, h := im.get(b, build)
	if _, got, err := Decode(bytes.NewReader(img), testLimits); err != nil {
		b.Fatal(err)
	} else {
		sameView(b, got, v)
	}
	b.SetBytes(int64(h.rawLen))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(bytes.NewReader(img), testLimits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(img)), "file-bytes")
}

// The store checkpoints every ~1 MiB of journal. Under the 127-writer
// compare-and-set workload (one 2,193-byte media intent per owner, each in
// its own namespace) that is every ~470 writes, so the cost of encoding a
// small view recurs often and competes with the commit path for CPU.
const casWriters = 127

var cas127, medium image

func buildCAS127(tb testing.TB) *materialize.View {
	b := newBuilder(tb)
	// Three rounds of writes, for revisions and timestamps like a store's
	// after a while; owner i ends with MediaIntent(2193, i).
	for round := range 3 {
		for i := range casWriters {
			owner := fmt.Sprintf("owner-%03d", i)
			seed := i
			if round == 1 {
				seed += casWriters
			}
			b.put("user/"+owner, "intent", schemaMI, owner, 0, testdoc.MediaIntent(fullDocSize, seed))
		}
	}
	return b.v
}

// buildMedium is a few thousand documents: past the 127-writer case, far
// short of the full store.
func buildMedium(tb testing.TB) *materialize.View { return fullView(tb, 4096, fullDocSize) }

// The small and medium benchmarks run twice: "warm", back to back, and
// "afterGC", with two collections (untimed) before every encode. Between
// two background checkpoints the store runs hundreds of writes and several
// collections, so afterGC is what a checkpoint in the store actually costs:
// anything kept only in a sync.Pool is gone by then.
func BenchmarkEncodeCAS127(b *testing.B) {
	benchEncodeModes(b, &cas127, buildCAS127)
}

func BenchmarkEncodeMedium(b *testing.B) {
	benchEncodeModes(b, &medium, buildMedium)
}

func benchEncodeModes(b *testing.B, im *image, build func(testing.TB) *materialize.View) {
	for _, mode := range []string{"warm", "afterGC"} {
		b.Run(mode, func(b *testing.B) {
			v, img, h := im.get(b, build)
			b.SetBytes(int64(h.rawLen))
			b.ReportAllocs()
			for b.Loop() {
				if mode == "afterGC" {
					b.StopTimer()
					runtime.GC()
					runtime.GC()
					b.StartTimer()
				}
				if _, err := Encode(io.Discard, v, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(img)), "file-bytes")
			b.ReportMetric(float64(h.rawLen), "body-bytes")
		})
	}
}
