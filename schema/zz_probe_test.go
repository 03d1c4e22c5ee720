package schema

import (
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

func BenchmarkProbeSchemaNoParams(b *testing.B) {
	doc := testdoc.MediaIntent(2193, 1)
	m, _ := decodeObject(doc)
	m["parameters"] = map[string]any{}
	v := mediaIntentValidator()
	b.ReportAllocs()
	for b.Loop() {
		v.Validate(m)
	}
}
