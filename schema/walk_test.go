package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/keeppeek/statestore/internal/testdoc"
)

// referenceDecode is what decodeObject must agree with: encoding/json with
// UseNumber, plus the extra strictness decodeObject documents.
func referenceDecode(doc []byte) (map[string]any, bool) {
	if !utf8.Valid(doc) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	obj, ok := v.(map[string]any)
	if !ok || depthOf(v) > maxDepth || hasDuplicate(doc) || hasLoneSurrogate(doc) {
		return nil, false
	}
	return obj, true
}

// hasLoneSurrogate reads the escapes of doc, JSON that encoding/json
// accepts, for a \u surrogate that is not half of an escaped pair.
func hasLoneSurrogate(doc []byte) bool {
	inString, high := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '\\' && doc[i+1] == 'u':
			v, _ := strconv.ParseUint(string(doc[i+2:i+6]), 16, 32)
			i += 5
			isHigh, isLow := v >= 0xd800 && v < 0xdc00, v >= 0xdc00 && v < 0xe000
			if high && !isLow || !high && isLow {
				return true
			}
			high = isHigh
		default:
			if high {
				return true
			}
			if c == '\\' {
				i++
			}
			inString = c != '"'
		}
	}
	return false
}

func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			d = max(d, depthOf(c))
		}
		return d + 1
	case []any:
		for _, c := range v {
			d = max(d, depthOf(c))
		}
		return d + 1
	}
	return 0
}

func hasDuplicate(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				if seen[k.(string)] {
					return true
				}
				seen[k.(string)] = true
				if walk() {
					return true
				}
			}
			dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			dec.Token()
		}
		return false
	}
	return walk()
}

var decodeSeeds = []string{
	`{}`, ` {"a" : [ 1 , 2.5e-3 , -0 , true , false , null , {} , [] ] } `,
	`{"a":"\ud800"}`, `{"a":"\ud800\udc00"}`, `{"a":"\ud800\u0041"}`, `{"a":"\udc00\ud800"}`,
	`{"a":"\ud83d\ude00x"}`, `{"a":"\ud800\\"}`, `{"a":"\u00e9\/\b\f\n\r\t\"\\"}`,
	`{"a":-0.0e+1}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`,
	`{"a":nul}`, "{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}", `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`{"a":{"b":1,"b":1}}`, `[{"a":1,"a":1}]`, `{"a":1}x`, `{"a":1}{}`, `{"a":[1,]}`, `{,}`,
	`{"a"}`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}",
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, "\ufeff{}", `"x"`, `[]`, `1`, ``, `   `,
	`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"a":1e400}`, `{"a":123456789012345678901234567890}`, `{"":""}`,
}

func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(testdoc.MediaIntent(2193, 1))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, gerr := decodeObject(doc)
		want, ok := referenceDecode(doc)
		if ok != (gerr == nil) {
			t.Fatalf("%q: decodeObject error %v, reference accepts %v", doc, gerr, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeObject %#v, reference %#v", doc, got, want)
		}
		// Whatever is decoded must survive Validate without panicking, and
		// what it accepts must decode alike everywhere.
		if NewRegistry().Validate(MediaIntentV1, doc) == nil {
			if r := decodesEverywhere(doc); r != "" {
				t.Fatalf("%q: accepted, but %s", doc, r)
			}
		}
	})
}

// decodesEverywhere returns why doc, accepted, does not decode to the same
// values through encoding/json (numbers as float64, as JavaScript reads
// them) and back, or "".
func decodesEverywhere(doc []byte) string {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return "encoding/json cannot decode it: " + err.Error()
	}
	again, err := json.Marshal(v)
	if err != nil {
		return "encoding/json cannot encode it again: " + err.Error()
	}
	var w any
	if err := json.Unmarshal(again, &w); err != nil {
		return "its re-encoding does not decode: " + err.Error()
	}
	if !reflect.DeepEqual(v, w) {
		return "its re-encoding means something else: " + string(again)
	}
	return ""
}

func TestNotPlain(t *testing.T) {
	t.Parallel()
	check := func(w [8]byte) {
		first := 8
		for i, c := range w {
			if !plainByte[c] {
				first = i
				break
			}
		}
		m := notPlain(binary.LittleEndian.Uint64(w[:]))
		if got := bits.TrailingZeros64(m) / 8; got != first || (m == 0) != (first == 8) {
			t.Fatalf("notPlain(%q) = %#x: first at %d, want %d", w[:], m, got, first)
		}
	}
	for _, bg := range []byte{'a', ' ', '!', '#', '[', ']', 0x7f, 0x21, 0x23, 0x5b, 0x5d} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = bg
				}
				w[pos] = byte(c)
				check(w)
				for pos2 := pos + 1; pos2 < 8; pos2++ {
					w[pos2] = byte(c * 7)
					check(w)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1 << 20 {
		var w [8]byte
		for i := range w {
			w[i] = byte(0x1e + rng.IntN(0x64))
			if rng.IntN(16) == 0 {
				w[i] = byte(rng.IntN(256))
			}
		}
		check(w)
	}
}

// cleanByStr scans doc, JSON whose strings need no escapes, as a
// check-mode walk does, and returns every string with str's verdict on it.
func cleanByStr(t testing.TB, doc []byte) (strs []string, clean []bool) {
	t.Helper()
	p := checker(doc, new(scratch), 1)
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			continue
		}
		p.pos = i
		s, c, ok := p.str()
		if !ok {
			t.Fatalf("str failed at %d in %q", i, doc)
		}
		strs, clean = append(strs, s), append(clean, c)
		i = p.pos - 1
	}
	return strs, clean
}

// stringsDoc is a JSON array holding strs, which need no escapes.
func stringsDoc(strs ...string) []byte {
	return []byte(`["` + strings.Join(strs, `","`) + `"]`)
}

// BenchmarkDecode is the decoding stage of the full path, one of the stages
// BenchmarkValidateMediaIntentFull splits into, so that a regression can be
// traced to its stage.
func BenchmarkDecode(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeObject(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEncodingJSON is the baseline decodeObject replaces.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.ReportAllocs()
	for b.Loop() {
		d := json.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			b.Fatal(err)
		}
	}
}
