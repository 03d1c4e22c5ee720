package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
)

func TestConcurrentRegistry(t *testing.T) {
	t.Parallel()
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
	if n := len(r.Names()); n != 2+8*10 { // the built-in schemas and the goroutines'
		t.Errorf("%d names", n)
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

// TestValidateAnswersAsFullPath holds Registry.Validate to the full path on
// documents either side of the fast path's edges: the same acceptance and,
// for a rejection, the same message, whichever path answered.
func TestValidateAnswersAsFullPath(t *testing.T) {
	t.Parallel()
	var docs [][]byte
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	for _, s := range slices.Concat(fastRejectSeeds, fastAcceptSeeds, decodeSeeds) {
		docs = append(docs, []byte(s))
	}
	r := NewRegistry()
	fast := 0
	for _, doc := range docs {
		got, want := r.Validate(MediaIntentV1, doc), fullAccepts(doc)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Errorf("%q: Validate %v, full path %v", doc, got, want)
		}
		if fastAccepts(doc) {
			fast++
		}
	}
	if fast == 0 || fast == len(docs) {
		t.Fatalf("the fast path accepts %d of %d documents; the test no longer covers both paths", fast, len(docs))
	}
}
