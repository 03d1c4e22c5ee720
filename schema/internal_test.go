package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/keeppeek/statestore/internal/testdoc"
)

func TestFastPatternsAgreeWithRegexp(t *testing.T) {
	alphabet := []byte("aZ09._-/ éA.")
	fixed := []string{"", ".", "..", "a", "a.", ".a", "a.b", "a..b", "a.b.", "transcoder.scale",
		"Transcoder.scale", "cv.Zone_1-x", "a-b.c.d", "a.B", "ab", "a b", "a.b c", "é.x", "a.é"}
	rng := rand.New(rand.NewPCG(1, 2))
	for pattern, fast := range fastPatterns {
		re := regexp.MustCompile(pattern)
		check := func(s string) {
			if got, want := fast(s), re.MatchString(s); got != want {
				t.Fatalf("pattern %s, input %q: fast %v, regexp %v", pattern, s, got, want)
			}
		}
		for _, s := range fixed {
			check(s)
		}
		for range 200000 {
			b := make([]byte, rng.IntN(8))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			check(string(b))
		}
	}
}

// referenceDecode is what the parse and the walk must agree with:
// encoding/json with UseNumber, plus the extra strictness the package
// documents.
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
	if !ok || depthOf(v) > maxDepth || hasDuplicate(doc) {
		return nil, false
	}
	return obj, true
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

// decodeObject is the document as a Validator sees it: parsed, walked and
// built.
func decodeObject(doc []byte) (map[string]any, *Error) {
	d, err := parse(doc)
	if err != nil {
		return nil, err
	}
	defer d.release()
	if d.root.Type() != fastjson.TypeObject {
		return nil, &Error{Path: "$", Reason: "not an object"}
	}
	v, err := d.walk(true)
	if err != nil && !strings.HasPrefix(err.Reason, "duplicate") && !strings.HasPrefix(err.Reason, "nesting") {
		// A guard offence; the reference has no guard, so build
		// without one to compare the values.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// addFixtures seeds f with every accepted and rejected fixture.
func addFixtures(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecodeMatchesEncodingJSON holds valyala/fastjson, with the checks
// parse and the walk add, to encoding/json: the same documents accepted
// and the same values built, lone surrogates and all.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	addFixtures(f)
	f.Add(testdoc.MediaIntent(2193, 1))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, gerr := decodeObject(doc)
		if gerr == nil && got == nil {
			return // the guard refused it; FuzzQuickAcceptSound covers that
		}
		want, ok := referenceDecode(doc)
		if ok != (gerr == nil) {
			t.Fatalf("%q: decodeObject error %v, reference accepts %v", doc, gerr, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeObject %#v, reference %#v", doc, got, want)
		}
		// Whatever is decoded must survive Validate without panicking.
		NewRegistry().Validate(MediaIntentV1, doc)
	})
}

func TestConcurrentRegistry(t *testing.T) {
	r := NewRegistry()
	doc := testdoc.MediaIntent(2193, 9)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if err := r.Validate(MediaIntentV1, doc); err != nil {
					t.Error(err)
					return
				}
				if i%20 == 0 {
					name := fmt.Sprintf("keeppeek.g%d.v%d", g, i+1)
					if err := r.Register(name, mediaIntentValidator()); err != nil {
						t.Error(err)
						return
					}
					if err := r.Validate(name, doc); err != nil {
						t.Error(err)
						return
					}
					_ = r.Names()
				}
			}
		}()
	}
	wg.Wait()
	if n := len(r.Names()); n != 1+8*10 {
		t.Errorf("%d names", n)
	}
}

func TestHasControlByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(0x18 + rng.IntN(0x70)) // around 0x20, and 0x80 and up
			if rng.IntN(4) == 0 {
				b[i] |= 0x80
			}
		}
		want := false
		for _, c := range b {
			want = want || c < 0x20
		}
		if got := hasControlByte(b); got != want {
			t.Fatalf("hasControlByte(%q) = %v", b, got)
		}
	}
}
