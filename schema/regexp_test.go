package schema

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestFastPatternsAgreeWithRegexp(t *testing.T) {
	t.Parallel()
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

// TestParamNameNormalises holds paramName's by-product to normalizeName,
// for every name short enough to have one (its match verdict is
// matchParamName's, which TestFastPatternsAgreeWithRegexp holds to Go's
// regexp).
func TestParamNameNormalises(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	alphabet := []byte("azAZ09._-/ \xc3\xa9\x00\x7f")
	names := []string{"a.b", "A.b", "a-1.B_c-2.d", "transcoder.note-12", "cv.Zone_1-x", "x.Pass_Word",
		strings.Repeat("a.b", 21) + "c"}
	for range 300000 {
		b := make([]byte, 1+rng.IntN(70))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	var matched int
	for _, s := range names {
		var out [64]byte
		n, _, match := paramName(s, &out)
		if match {
			matched++
		}
		if match && len(s) <= len(out) && string(out[:n]) != string(normalizeName(nil, s)) {
			t.Fatalf("paramName(%q) normalises to %q, normalizeName to %q", s, out[:n], normalizeName(nil, s))
		}
	}
	if matched < 100 {
		t.Fatalf("only %d names match; the test no longer tests", matched)
	}
}
