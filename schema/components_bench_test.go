package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

// The component benchmarks split BenchmarkValidateMediaIntent into its
// stages, so a regression can be traced to parsing, the walk, the quick
// rules or the JSON Schema check.

func BenchmarkParse(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := parse(doc)
		if err != nil {
			b.Fatal(err)
		}
		d.release()
	}
}

// BenchmarkParseEncodingJSON is the baseline parse is measured against.
func BenchmarkParseEncodingJSON(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	b.SetBytes(int64(len(doc)))
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

// BenchmarkWalk is the shape rules and the guard over a parsed document.
func BenchmarkWalk(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	d, err := parse(doc)
	if err != nil {
		b.Fatal(err)
	}
	defer d.release()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.walk(false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuickAccept(b *testing.B) {
	d, err := parse(testdoc.MediaIntent(2193, 1))
	if err != nil {
		b.Fatal(err)
	}
	defer d.release()
	root, _ := d.root.Object()
	q := mediaIntentValidator().(quickAccepter)
	b.ReportAllocs()
	for b.Loop() {
		if !q.quickAccept(root) {
			b.Fatal("not sure")
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

// BenchmarkValidateMediaIntentFull is Registry.Validate without
// quickAccept: what every document quickAccept is not sure about costs.
func BenchmarkValidateMediaIntentFull(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	v := slowValidator{mediaIntentValidator()}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := validate(v, doc); err != nil {
			b.Fatal(err)
		}
	}
}
