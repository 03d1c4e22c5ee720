package testdoc

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMediaIntentSizeAndDeterminism(t *testing.T) {
	t.Parallel()
	for _, size := range []int{150, 160, 200, 227, 228, 260, 261, 300, 512, 1000, 2193, 4096, 16384} {
		for _, seed := range []int{0, 1, 7, 42, -3, 12345} {
			doc := MediaIntent(size, seed)
			if len(doc) != size {
				t.Fatalf("MediaIntent(%d, %d): %d bytes", size, seed, len(doc))
			}
			var m map[string]any
			if err := json.Unmarshal(doc, &m); err != nil {
				t.Fatalf("MediaIntent(%d, %d): %v\n%s", size, seed, err, doc)
			}
			if !bytes.Equal(doc, MediaIntent(size, seed)) {
				t.Fatalf("MediaIntent(%d, %d) not deterministic", size, seed)
			}
		}
	}
	if bytes.Equal(MediaIntent(2193, 1), MediaIntent(2193, 2)) {
		t.Fatal("seeds 1 and 2 gave the same document")
	}
}

func TestMediaIntentTooSmallPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for size 10")
		}
	}()
	MediaIntent(10, 0)
}
