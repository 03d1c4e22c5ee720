package checkpoint

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/keeppeek/statestore/internal/fuzzcorpus"
	"github.com/keeppeek/statestore/materialize"
)

// fuzzLimits are small enough that no input can make a fuzz run allocate
// much, and large enough for the seed images.
var fuzzLimits = Limits{
	MaxNamespaces: 64, MaxEntries: 256, MaxTotalBytes: 1 << 20,
	MaxNamespace: 128, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 16384,
}

// seedViews are the views whose images seed the fuzz targets.
func seedViews(tb testing.TB) map[string]*materialize.View {
	small := newBuilder(tb)
	small.put("user/a", "k1", schemaMI, "a", 0, []byte(`{"x":1}`))
	small.put("user/a", "k2", schemaMI, "a", 1_700_000_000_500, []byte(`{"x":2}`))
	small.put("user/b", "k", "keeppeek.other.v1", "b", 0, []byte(`{}`))
	small.put("group/e", "k", schemaMI, "admin", 0, []byte(`{}`))
	small.del("group/e", "k")
	return map[string]*materialize.View{
		"empty":  materialize.New(),
		"small":  small.v,
		"sample": sampleView(tb),
	}
}

// checkImage is the fuzz property: Decode never panics, fails only with a
// typed *Error, and whatever it accepts re-encodes canonically to an image
// that decodes to the same view.
func checkImage(t *testing.T, data []byte) {
	h, v, err := Decode(bytes.NewReader(data), fuzzLimits)
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) || errors.Is(err, ErrLimits)) {
			t.Fatalf("untyped error %v (%T)", err, err)
		}
		if v != nil {
			t.Fatal("a view returned with an error")
		}
		return
	}
	img := encode(t, v, h.Index, h.TimeMs)
	h2, v2, err := Decode(bytes.NewReader(img), fuzzLimits)
	if err != nil {
		t.Fatalf("re-encoded image does not decode: %v", err)
	}
	if h2.Index != h.Index || h2.TimeMs != h.TimeMs || h2.Namespaces != h.Namespaces || h2.Entries != h.Entries || h2.Bytes != h.Bytes {
		t.Fatalf("re-encoded header %+v, decoded %+v", h2, h)
	}
	sameView(t, v2, v)
	if again := encode(t, v2, h.Index, h.TimeMs); !bytes.Equal(again, img) {
		t.Fatal("re-encoding is not canonical")
	}
}

// FuzzDecode feeds whole files to Decode. Each input is tried as is and
// with both CRCs recomputed, so mutations reach the checks behind them
// (limits, zstd, the body) instead of all stopping at a checksum.
func FuzzDecode(f *testing.F) {
	for _, v := range seedViews(f) {
		f.Add(encode(f, v, 7, 1_700_000_000_000))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkImage(t, data)
		if len(data) >= headerSize {
			checkImage(t, fixCRCs(bytes.Clone(data)))
		}
	})
}

// FuzzDecodeBody fuzzes the uncompressed body and the header's counts
// behind valid framing (compressed, CRCs right), where random bytes would
// otherwise almost never reach: the record parser and materialize.Restore.
func FuzzDecodeBody(f *testing.F) {
	for _, v := range seedViews(f) {
		raw, h := rawOf(f, v)
		f.Add(raw, h.Namespaces, h.Entries, h.Bytes)
	}
	f.Fuzz(func(t *testing.T, raw []byte, namespaces, entries uint32, byteCount uint64) {
		checkImage(t, wrap(t, namespaces, entries, byteCount, raw))
	})
}

// rawOf returns the uncompressed body of v's image and its header.
func rawOf(tb testing.TB, v *materialize.View) ([]byte, Header) {
	img := encode(tb, v, 7, 1_700_000_000_000)
	h := headerOf(tb, img)
	raw, err := decompress(img[headerSize:headerSize+h.compLen], h.rawLen)
	if err != nil {
		tb.Fatal(err)
	}
	return raw, h.Header
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// TestSeedCorpus keeps testdata/fuzz/<target>/seed-* in step with the
// encoder: it fails if a seed file is missing or stale, and rewrites them
// with -update-corpus. Checked-in seeds let `go test` replay them on every
// run, and give the fuzzer real images to mutate.
func TestSeedCorpus(t *testing.T) {
	t.Parallel()
	for name, v := range seedViews(t) {
		raw, h := rawOf(t, v)
		files := map[string]string{
			filepath.Join("testdata", "fuzz", "FuzzDecode", "seed-"+name):     fuzzcorpus.File(encode(t, v, 7, 1_700_000_000_000)),
			filepath.Join("testdata", "fuzz", "FuzzDecodeBody", "seed-"+name): fuzzcorpus.File(raw, h.Namespaces, h.Entries, h.Bytes),
		}
		for path, want := range files {
			if *updateCorpus {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("seed %s is missing or stale (err %v); run go test ./checkpoint/ -run TestSeedCorpus -args -update-corpus", path, err)
			}
		}
	}
}
