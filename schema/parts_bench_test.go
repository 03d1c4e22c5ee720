package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

func BenchmarkPartDecode(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.ReportAllocs()
	for b.Loop() {
		decodeObject(doc)
	}
}

func BenchmarkPartGuard(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	m, _ := decodeObject(doc)
	b.ReportAllocs()
	for b.Loop() {
		guard(m)
	}
}

func BenchmarkPartSchema(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	m, _ := decodeObject(doc)
	v := mediaIntentValidator()
	b.ReportAllocs()
	for b.Loop() {
		v.Validate(m)
	}
}

func BenchmarkPartUnmarshal(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.ReportAllocs()
	for b.Loop() {
		d := json.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		var v any
		d.Decode(&v)
	}
}
