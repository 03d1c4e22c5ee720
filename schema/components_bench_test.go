package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

// The component benchmarks split BenchmarkValidateMediaIntent into its
// stages, so a regression can be traced to decoding, the guard or the JSON
// Schema check.

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

func BenchmarkGuard(b *testing.B) {
	m, err := decodeObject(testdoc.MediaIntent(2193, 1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := guard(m); err != nil {
			b.Fatal(err)
		}
	}
}

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

// BenchmarkValidateMediaIntentFull is Registry.Validate without the fast
// path: what every document the fast path is not sure about costs.
func BenchmarkValidateMediaIntentFull(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	v := mediaIntentValidator()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := validateFull(MediaIntentV1, v, doc); err != nil {
			b.Fatal(err)
		}
	}
}
