package schema_test

import (
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

// BenchmarkValidateMediaIntent measures the write-path check for the
// store's standard 2,193-byte document.
func BenchmarkValidateMediaIntent(b *testing.B) {
	docs := make([][]byte, 64)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(2193, i)
	}
	b.SetBytes(2193)
	benchValidate(b, docs)
}

// BenchmarkValidateMediaIntentSmall measures the 150- to 200-byte
// documents kpjournal's verify throughput test replays, where the fixed
// cost of a call weighs more than the bytes.
func BenchmarkValidateMediaIntentSmall(b *testing.B) {
	docs := make([][]byte, 64)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(150+i*50/len(docs), i)
	}
	benchValidate(b, docs)
}

// benchValidate validates docs in turn, each of which must be accepted.
func benchValidate(b *testing.B, docs [][]byte) {
	r := schema.NewRegistry()
	for _, doc := range docs {
		if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := r.Validate(schema.MediaIntentV1, docs[i%len(docs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
