package schema

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// credentialWordReference is credentialWord as it was before the Wu-Manber
// search: a look at every position. credentialWord must name the same word.
func credentialWordReference(name string) string {
	n := normalizeName(nil, name)
	for i := 0; i+minCredentialWord <= len(n); i++ {
		for _, w := range credentialWords[n[i]] {
			if len(n)-i >= len(w) && string(n[i:i+len(w)]) == w {
				return w
			}
		}
	}
	for _, w := range credentialSuffixes {
		if len(n) >= len(w) && string(n[len(n)-len(w):]) == w {
			return w
		}
	}
	for _, w := range credentialNames {
		if string(n) == w {
			return w
		}
	}
	return ""
}

// credentialPatterns are every word, suffix and name credentialWord knows.
func credentialPatterns() []string {
	var all []string
	for _, words := range credentialWords {
		all = append(all, words...)
	}
	all = append(all, credentialSuffixes...)
	return append(all, credentialNames...)
}

// disguise spells w as a writer might: cases flipped, separators put
// between letters, s and k now and then replaced by the characters that
// fold to them.
func disguise(rng *rand.Rand, w string) string {
	var b strings.Builder
	for i, r := range w {
		if i > 0 && rng.IntN(4) == 0 {
			b.WriteByte("_-. "[rng.IntN(4)])
		}
		switch {
		case r == 's' && rng.IntN(6) == 0:
			b.WriteRune('\u017f')
		case r == 'k' && rng.IntN(6) == 0:
			b.WriteRune('\u212a')
		case rng.IntN(3) == 0:
			b.WriteString(strings.ToUpper(string(r)))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestCredentialWordMatchesReference(t *testing.T) {
	check := func(name string) {
		t.Helper()
		if got, want := credentialWord(name), credentialWordReference(name); got != want {
			t.Fatalf("credentialWord(%q) = %q, reference %q", name, got, want)
		}
	}
	patterns := credentialPatterns()
	fillers := []string{"", "x", "ab", "cv.", "transcoder.", "note-12", "author", "tokens", "pas", "se", "abcdefg"}
	for _, w := range patterns {
		for _, before := range fillers {
			for _, after := range fillers {
				check(before + w + after)
				check(before + strings.ToUpper(w) + after)
				// Every position of the word against the Wu-Manber windows.
				for k := range 9 {
					check(strings.Repeat("q", k) + before + w + after)
				}
			}
		}
		// Two words: the first one is named.
		for _, v := range patterns {
			check(w + v)
			check("zz" + w + "." + v)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []rune("apiksecrtonwdhjbvzl_-. AEKPST0\u017f\u212a")
	for range 300000 {
		var b strings.Builder
		if rng.IntN(3) == 0 {
			b.WriteString(disguise(rng, patterns[rng.IntN(len(patterns))]))
		}
		for range rng.IntN(24) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(3) == 0 {
			b.WriteString(disguise(rng, patterns[rng.IntN(len(patterns))]))
		}
		check(b.String())
	}
	check(strings.Repeat("a", 70) + "token") // longer than credentialWord's buffer
}

// TestNormalizeNameFastPath holds normalizeName's table-driven ASCII path
// (taken when dst has room) to its general loop (taken when it has not).
func TestNormalizeNameFastPath(t *testing.T) {
	alphabet := []rune("aZk_-. \x00\x7fé\u212a\u017fK0;")
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		r := make([]rune, rng.IntN(12))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		name := string(r)
		if rng.IntN(8) == 0 {
			name += "\xff" + name[:len(name)/2]
		}
		var buf [64]byte
		prefix := []byte("x")
		got := normalizeName(append(buf[:0], prefix...), name)
		want := normalizeName(prefix[:1:1], name) // no room: the loop
		if !bytes.Equal(got, want) {
			t.Fatalf("normalizeName(%q): table path %q, loop %q", name, got, want)
		}
	}
}
