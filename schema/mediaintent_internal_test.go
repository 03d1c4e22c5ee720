package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

func fastAccepts(doc []byte) bool {
	return mediaIntentValidator().(RawValidator).AcceptRaw(doc)
}

// fullAccepts is the full path without the fast path: the oracle.
func fullAccepts(doc []byte) error {
	return validateFull(MediaIntentV1, mediaIntentValidator(), doc)
}

func TestFastPathEnabled(t *testing.T) {
	t.Parallel()
	if r := mediaIntentFast().enabledReason; r != "" {
		t.Fatalf("fast path for %s is off: %s\n(update mediaIntentFast's rules and mediaIntentFastSpec together)", MediaIntentV1, r)
	}
	if _, ok := mediaIntentValidator().(RawValidator); !ok {
		t.Fatal("media-intent validator is not a RawValidator")
	}
}

// TestFastPathFollowsSchema checks that the fast path turns itself off for
// any change of media-intent.v1.json but a change of annotations.
func TestFastPathFollowsSchema(t *testing.T) {
	t.Parallel()
	same := []string{
		strings.Replace(string(mediaIntentSchema), `"A stable identifier`, `"An identifier`, 1),
		strings.Replace(string(mediaIntentSchema), `"type": "boolean" }`, `"type": "boolean", "$comment": "x", "title": "t" }`, 1),
	}
	changed := []string{
		strings.Replace(string(mediaIntentSchema), `"maxLength": 128`, `"maxLength": 64`, 1),
		strings.Replace(string(mediaIntentSchema), `"maximum": 1000`, `"maximum": 100`, 1),
		strings.Replace(string(mediaIntentSchema), `["inherit", "disabled", "required"]`, `["inherit", "required"]`, 1),
		strings.Replace(string(mediaIntentSchema), `"desired": { "type": "boolean" }`, `"desired": { "type": "boolean", "description": "x", "const": true }`, 1),
		strings.Replace(string(mediaIntentSchema), `"required": ["role", "desired", "source_id", "media_kind"]`, `"required": ["role", "desired", "source_id", "media_kind", "priority"]`, 1),
		`{}`, `not json`,
	}
	for i, s := range same {
		if s == string(mediaIntentSchema) {
			t.Fatalf("same[%d] did not change the schema", i)
		}
		if r := newFastPath([]byte(s)).enabledReason; r != "" {
			t.Errorf("same[%d]: fast path off: %s", i, r)
		}
	}
	for i, s := range changed {
		if s == string(mediaIntentSchema) {
			t.Fatalf("changed[%d] did not change the schema", i)
		}
		if newFastPath([]byte(s)).enabledReason == "" {
			t.Errorf("changed[%d]: fast path still on", i)
		}
	}
}

// realisticDocs are documents writers send; the fast path must accept all.
func realisticDocs(t testing.TB, short bool) map[string][]byte {
	docs := map[string][]byte{}
	files, _ := filepath.Glob("testdata/accept/*.json")
	if len(files) == 0 {
		t.Fatal("no accept fixtures")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = b
	}
	step := 1
	if short {
		step = 97
	}
	for size := 200; size <= 16384; size += step {
		docs["MediaIntent("+strconv.Itoa(size)+")"] = testdoc.MediaIntent(size, size)
	}
	for seed := range 200 {
		docs["MediaIntent(2193, "+strconv.Itoa(seed)+")"] = testdoc.MediaIntent(2193, seed)
	}
	for _, seed := range []int{-7, 1 << 40} {
		docs["MediaIntent(16384, "+strconv.Itoa(seed)+")"] = testdoc.MediaIntent(16384, seed)
	}
	return docs
}

func TestFastPathAcceptsRealistic(t *testing.T) {
	t.Parallel()
	i := 0
	for name, doc := range realisticDocs(t, testing.Short()) {
		// The full path is slow; a sample shows the set is valid.
		if i++; i%31 == 0 || !strings.HasPrefix(name, "MediaIntent") {
			if err := fullAccepts(doc); err != nil {
				t.Fatalf("%s: full path rejects: %v", name, err)
			}
		}
		if !fastAccepts(doc) {
			t.Errorf("%s: fast path is not sure", name)
		}
	}
	// Documents that need the escape decoder, the hash set's growth and
	// nesting right at the limit are accepted too.
	for name, doc := range map[string][]byte{
		"escapes":    []byte(`{"r\u006fle":"pub\u006cish","desired":true,"source_id":"cam\u002d1","media_kind":"video","recording_mode":"inherit","parameters":{"cv\u002enote":"line\none \"quoted\" \u00e9\ud83d\ude00 \/","x.y":["\t",{"k\u0031":"\\"}]}}`),
		"many keys":  manyParams(3000, false),
		"nesting 32": []byte(`{"role":"subscribe","desired":false,"source_id":"x","media_kind":"audio","parameters":{"a.b":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}}`),
		"same names": []byte(`{"role":"subscribe","desired":false,"source_id":"x","media_kind":"audio","parameters":{"a.b":{"k":1,"j":[{"k":1},{"k":2}]},"a.c":{"k":1}}}`),
		"spacing":    []byte(" \t\r\n{ \"role\" : \"subscribe\" ,\n\"desired\":\tfalse , \"source_id\" : \"x\" , \"media_kind\" : \"audio\" , \"priority\" : 1000 , \"parameters\" : { } }\n "),
	} {
		if err := fullAccepts(doc); err != nil {
			t.Fatalf("%s: full path rejects: %v", name, err)
		}
		if !fastAccepts(doc) {
			t.Errorf("%s: fast path is not sure", name)
		}
	}
}

func manyParams(n int, dup bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"n.k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	if dup {
		b.WriteString(`,"n.k` + strconv.Itoa(n/2) + `":0`)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

func TestFastPathAllocations(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations
	// (and sets GOMAXPROCS to 1 while it runs).
	if testing.Short() {
		t.Skip("allocation counts are noisy under -race and -short")
	}
	doc := testdoc.MediaIntent(2193, 1)
	fastAccepts(doc) // warm the pool
	if n := testing.AllocsPerRun(200, func() { fastAccepts(doc) }); n > 0.1 {
		t.Errorf("AcceptRaw allocates %.2f times per document", n)
	}
}

// fastRejectSeeds are documents the full path rejects, each one rule away
// from acceptance, so a fast path that skips a rule accepts one of them.
var fastRejectSeeds = []string{
	// duplicates, at every level and through escapes
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","role":"subscribe"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","r\u006fle":"subscribe"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":1,"a\u002eb":2}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"x":1,"x":2}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":[{"x":1,"y":{"z":1,"z":1}}]}}`,
	// priority
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":1001}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":-1}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":0.5}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":1e4}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":"1"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":01}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":null}`,
	// identifiers
	`{"role":"subscribe","desired":true,"source_id":".","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"..","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"\u002e","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"a b","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"caf\u00e9","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"` + strings.Repeat("a", 129) + `","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"R0lGODlhAQABAIAAAAAAAP","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":["x"],"media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","variant_id":7}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","output_profile":""}`,
	// enums and types
	`{"role":"Subscribe","desired":true,"source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","desired":1,"source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","desired":null,"source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video\u0000"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","recording_mode":"off"}`,
	`{"role":"publish","desired":true,"source_id":"x","media_kind":"video"}`,
	`{"role":"publish","desired":true,"source_id":"x","media_kind":"video","recording_mode":null}`,
	// required, additional
	`{"desired":true,"source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","extra":1}`,
	`{}`,
	// parameters
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":[]}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":null}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"scale":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"A.b":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b.":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b c":1}}`,
	// guard, at every depth, in names and values, plain and escaped
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.pwd":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"deep":[{"Api-Key":1}]}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"p\u0061ss":1}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"pa\u017f\u017fword":1}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":["Bearer abcdefgh1234"]}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"x":"\u002d----BEGIN X-----"}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"v=0\no=- 0 0 IN IP4 0.0.0.0\n"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"Cookie: a=b"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"id=a3fWa; Path=/"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"data:x;base64,AAAA"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.` + strings.Repeat("QUJD", 64) + `":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"` + strings.Repeat("QUJD\\n", 64) + `"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"iVBORw0KGgoAAAANSUhEUgAA"}}`,
	// syntax, depth, encoding
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":[1,]}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video",}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video"}x`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video"}{}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video"`,
	`{"role":"subscribe","desired":tru,"source_id":"x","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\x"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\u12G4"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":-}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":1.}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":.5}}`,
	"{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"x\",\"media_kind\":\"video\",\"parameters\":{\"a.b\":\"\x01\"}}",
	"{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"x\",\"media_kind\":\"video\",\"parameters\":{\"a.b\":\"\xff\"}}",
	"{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"x\",\"media_kind\":\"video\",\"parameters\":{\"a.\xc0\xaf\":1}}",
	"{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"x\",\"media_kind\":\"video\",\"parameters\":{\"a.b\":\"\xed\xa0\x80\"}}",
	"\ufeff{\"role\":\"subscribe\",\"desired\":true,\"source_id\":\"x\",\"media_kind\":\"video\"}",
	`[{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video"}]`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":`,
	`{"role":"subscribe","desired":`,
	``, ` `, `null`, `"x"`,
	// what not every reader reads alike
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\ud800"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\ud800\u0041"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\udc00\ud800"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.\udfff":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x\ud800","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"x\u0000"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b\u0000":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":1e999}}`,
	// split across the top-level identifiers, and the parameters' names
	`{"role":"subscribe","desired":true,"source_id":"` + strings.Repeat("aBC3", 32) + `","variant_id":"` + strings.Repeat("aBC3", 32) + `","output_profile":"` + strings.Repeat("aBC3", 32) + `","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"x.` + strings.Repeat("aBC3", 33) + `":1,"x.` + strings.Repeat("aBC4", 33) + `":1}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":["` + strings.Repeat("aBC3", 33) + `","` + strings.Repeat("aBC4", 33) + `"]}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"c":"` + strings.Repeat("aBC3", 33) + `","d":"` + strings.Repeat("aBC4", 33) + `"}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":[` + strings.Repeat("7,", 256) + `7]}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":[-1E+400]}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":` + strings.Repeat("9", 400) + `}}`,
}

// fastAcceptSeeds are accepted documents close to the edges.
var fastAcceptSeeds = []string{
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"v=0\\no=- 0 0 IN IP4 0.0.0.0\\n"}}`,
	`{"role":"subscribe","desired":true,"source_id":"...","media_kind":"video","priority":0}`,
	`{"role":"subscribe","desired":true,"source_id":"` + strings.Repeat("a", 128) + `","media_kind":"video","priority":1000}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":-0}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":1e2}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","priority":100.0}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"\ud800\udc00","c.d":"\ud83d\ude00\u0041"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a-1.B_c-2.d":{"pass_through":"\ufffd","tok":"a=b; c=d"}}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"` + strings.Repeat("QUJD", 63) + `"}}`,
	`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}}`,
}

func TestFastPathRejects(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/reject/*.json")
	if len(files) == 0 {
		t.Fatal("no reject fixtures")
	}
	docs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = b
	}
	for i, s := range fastRejectSeeds {
		docs["fastRejectSeeds["+strconv.Itoa(i)+"]"] = []byte(s)
	}
	docs["duplicate among many"] = manyParams(3000, true)
	for name, doc := range docs {
		if err := fullAccepts(doc); err == nil {
			t.Fatalf("%s: the full path accepts; not a rejection case", name)
		}
		if fastAccepts(doc) {
			t.Errorf("%s: fast path accepts a document the full path rejects", name)
		}
	}
	for i, s := range fastAcceptSeeds {
		if err := fullAccepts([]byte(s)); err != nil {
			t.Errorf("fastAcceptSeeds[%d]: full path rejects: %v", i, err)
		}
	}
}

// FuzzFastPathSound holds the fast path to the full path: whatever the
// bytes, a document the fast path accepts must be one the full path accepts.
// (The reverse need not hold; "not sure" is always allowed.)
func FuzzFastPathSound(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range fastRejectSeeds {
		f.Add([]byte(s))
	}
	for _, s := range fastAcceptSeeds {
		f.Add([]byte(s))
	}
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	for _, size := range []int{160, 200, 300, 700, 2193} {
		for _, seed := range []int{0, 1, 3} {
			f.Add(testdoc.MediaIntent(size, seed))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// in itself, and in spliced where most random bytes still leave a
		// document the fast path may accept: a parameter value, the inside
		// of a string value, a parameter name, an identifier.
		for _, doc := range [][]byte{
			in,
			splice(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":`, in, `}}`),
			splice(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"`, in, `"}}`),
			splice(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"`, in, `":1}}`),
			splice(`{"role":"subscribe","desired":true,"media_kind":"video","source_id":"`, in, `"}`),
		} {
			if !fastAccepts(doc) {
				continue
			}
			if err := fullAccepts(doc); err != nil {
				t.Fatalf("fast path accepts %q; full path: %v", doc, err)
			}
		}
	})
}

func splice(head string, in []byte, tail string) []byte {
	return append(append([]byte(head), in...), tail...)
}

// BenchmarkMediaIntentSchema is the JSON Schema stage of the full path (see
// BenchmarkDecode).
func BenchmarkMediaIntentSchema(b *testing.B) {
	m, err := decodeObject(testdoc.MediaIntent(2193, 1))
	if err != nil {
		b.Fatal(err)
	}
	v := mediaIntentValidator()
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMediaIntentFast is the accept-only fast path on its own.
func BenchmarkMediaIntentFast(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	v := mediaIntentValidator().(RawValidator)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !v.AcceptRaw(doc) {
			b.Fatal("not sure")
		}
	}
}
