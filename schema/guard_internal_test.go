package schema

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/keeppeek/statestore/internal/testdoc"
)

// credentialWordReference is credentialWord without the Wu-Manber search:
// a look at every position, the name read in every spelling its digits
// and symbols allow (leetSpellings). credentialWord must name the same
// word.
func credentialWordReference(name string) string {
	n := normalizeName(nil, name)
	spells := func(b []byte, w string) bool {
		for k := range len(w) {
			if !strings.ContainsRune(leetSpellings[b[k]], rune(w[k])) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(n); i++ {
		for _, words := range credentialWords {
			for _, w := range words {
				if len(n)-i >= len(w) && spells(n[i:], w) {
					return w
				}
			}
		}
	}
	for _, w := range credentialSuffixes {
		if len(n) >= len(w) && spells(n[len(n)-len(w):], w) {
			return w
		}
	}
	for _, w := range credentialNames {
		if len(n) == len(w) && spells(n, w) {
			return w
		}
	}
	return ""
}

// leetSpellings lists the letters each byte may stand for in a name: itself,
// and for digits and symbols the letters they are used for.
var leetSpellings = func() (t [256]string) {
	for c := range 256 {
		t[c] = string(rune(c))
	}
	for c, l := range map[byte]string{'0': "o", '1': "il", '3': "e", '4': "a", '5': "s", '7': "t", '@': "a", '$': "s"} {
		t[c] += l
	}
	return t
}()

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
	t.Parallel()
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
	alphabet := []rune("apiksecrtonwdhjbvzl_-. AEKPST013457@$\u017f\u212a")
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
	t.Parallel()
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

// guardTriggers are strings stringProblem rejects, each for a different
// rule, none needing an escape in JSON.
var guardTriggers = []string{
	"-----BEGIN OPENSSH PRIVATE KEY-----",
	"x;base64,AAAA", "DATA:image/png;BASE64,iVBORw0KGgo=",
	"id=a3fWa; Path=/", "id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT",
	"bearer abcdefgh1234", "Bearer abcdefgh1234", "BEARER ABCDEFGH1234", "BeArEr abcdefgh1234",
	"basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
	"basic dXNlcjpwYXNzd29yZA==", "bAsIc dXNlcjpwYXNzd29yZA==", "bearer x.y.z0123", // no B, G or ;
	"Authorization: x", "authorization:x", "proxy-authorization: x", "cookie: a=b", "Set-Cookie: a",
	"  Cookie: a=b", "JSESSIONID=1", "__Secure-x=1", "__Host-x=1", "connect.sid=1",
	"PHPSESSID=1", "asp.net_sessionid=1",
	"R0lGODlhAQABAIAAAAAAAP", "UklGRiQAAABXQVZFZm10IBAA", "JVBERi0xLjQKJcOkw7zDtsOf",
	"iVBORw0KGgoAAAANSUhEUgAA", "/9j/4AAQSkZJRgABAQEASABI", "/9j/4AAQSkZJRgAAAQEASAAA",
	strings.Repeat("QUJD", 64), strings.Repeat("QUJD", 100),
}

func TestStrCleanImpliesNoProblem(t *testing.T) {
	t.Parallel()
	prose := "keep the aspect ratio and drop frames rather than add latency "
	var cases []string
	for _, trigger := range guardTriggers {
		cases = append(cases, trigger, trigger[:len(trigger)-1], trigger[1:])
		// Every offset against the eight-byte words, at the start, in the
		// middle and at the end of a string, and in strings of every length
		// around the limits.
		for k := range 17 {
			cases = append(cases, prose[:k]+trigger, trigger+prose[:k], prose[:k]+trigger+prose[:k],
				prose[:k]+" "+trigger+" "+prose[k:])
		}
	}
	for n := range 20 {
		cases = append(cases, strings.Repeat("Cookie: a=b ", 3)[:n], ("Bearer abcdefgh1234")[:min(n, 19)])
	}
	for _, n := range []int{15, 16, 17, 255, 256, 257} {
		cases = append(cases, strings.Repeat("A", n), "R0lGOD"+strings.Repeat("A", n), "x "+strings.Repeat("9", n))
	}
	// Marks that stand close to, but outside, a string.
	cases = append(cases, "b", "ab", "9j", "/9j", "ja", "B", ";", "G")
	cases = slices.DeleteFunc(cases, func(s string) bool { return !utf8.ValidString(s) })
	var problems int
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		for i, s := range cases {
			pair := [2]string{s, cases[(i+7)%len(cases)]}
			strs, clean := cleanByStr(t, stringsDoc(pair[order[0]], pair[order[1]], "short", prose))
			for j, s := range strs {
				r := stringProblem(s)
				if r != "" {
					problems++
				}
				if clean[j] && r != "" {
					t.Errorf("str calls %q clean; stringProblem: %s", s, r)
				}
			}
		}
	}
	if problems < len(guardTriggers) {
		t.Fatalf("only %d strings with a problem; the test no longer tests", problems)
	}
	// Each trigger also as a parameter name and value of a whole document:
	// the fast path must leave it to the full path.
	for _, s := range guardTriggers {
		for _, doc := range [][]byte{
			[]byte(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":"` + s + `"}}`),
			[]byte(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"a.b":{"` + s + `":1}}}`),
		} {
			if fastAccepts(doc) && fullAccepts(doc) != nil {
				t.Errorf("fast path accepts %s", doc)
			}
		}
	}
}

// TestStrCleanOnBenchmarkDocument keeps the fast guard fast: every string
// of the standard document should be shown clean without stringProblem.
// (Failing it leaves the fast path sound, only slow.)
func TestStrCleanOnBenchmarkDocument(t *testing.T) {
	t.Parallel()
	for _, seed := range []int{0, 1, 2, 3} {
		strs, clean := cleanByStr(t, testdoc.MediaIntent(2193, seed))
		for i, s := range strs {
			if !clean[i] {
				t.Errorf("seed %d: %q not shown clean", seed, s)
			}
		}
	}
}

func TestHeaderTables(t *testing.T) {
	t.Parallel()
	// Whatever headerProblem finds, the tables must let through.
	var firsts []byte
	for c := range 256 {
		firsts = append(firsts, byte(c))
	}
	tail := []string{"uthorization: x", "sp.net_sessionid=1", "roxy-authorization: x", "hpsessid=1",
		"ookie: a", "onnect.sid=1", "et-cookie: a", "sessionid=1", "_secure-a", "_host-a"}
	for _, c := range firsts {
		for _, rest := range tail {
			for _, s := range []string{string(c) + rest, string(c) + strings.ToUpper(rest), string(c) + "\u017f" + rest[1:],
				string(c) + "\u212a" + rest[1:]} {
				if len(s) >= minGuardedString && headerProblem(s) != "" && !mayBeHeader(s) {
					t.Errorf("headerProblem(%q) = %q, but the tables rule it out", s, headerProblem(s))
				}
			}
		}
	}
}

// FuzzGuardFilters holds the guard's shortcuts to the rules they skip:
// guardMarkers to contentProblem (no marker in a short string, no
// problem), str's clean verdict to stringProblem, the header tables to
// headerPrefixes, credentialWord's Wu-Manber search to its reference,
// paramName's normal form to normalizeName.
func FuzzGuardFilters(f *testing.F) {
	for _, s := range guardTriggers {
		f.Add([]byte(s))
	}
	for _, s := range []string{"", "a.b", "transcoder.note-12", "Api-Key", "pa\u017f\u017fword", "x.PassWord",
		"keep the aspect ratio", "browser-h264-720p", "v=0\no=- 0 0 IN IP4 0.0.0.0\n", "x;base64,AAAA"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := string(in)
		if got, want := credentialWord(s), credentialWordReference(s); got != want {
			t.Fatalf("credentialWord(%q) = %q, reference %q", s, got, want)
		}
		if r := contentProblem(s); r != "" && len(s) < minBase64Run && !hasMarker(s) {
			t.Fatalf("contentProblem(%q) = %q, but it holds no guard marker", s, r)
		}
		var out [64]byte
		if n, _, match := paramName(s, &out); match && len(s) <= len(out) && string(out[:n]) != string(normalizeName(nil, s)) {
			t.Fatalf("paramName(%q) = %q, %v", s, out[:n], match)
		}
		if r := headerProblemReference(s); r != headerProblem(s) {
			t.Fatalf("headerProblem(%q) = %q, without the tables %q", s, headerProblem(s), r)
		}
		if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' }) {
			return
		}
		// s on its own and between others, so that marks are met both
		// before and after it.
		for _, doc := range [][]byte{stringsDoc(s), stringsDoc("x"+s, s+"y", s+" "+s)} {
			strs, clean := cleanByStr(t, doc)
			for j, v := range strs {
				if clean[j] && stringProblem(v) != "" {
					t.Fatalf("str calls %q clean; stringProblem: %s", v, stringProblem(v))
				}
			}
		}
	})
}

// headerProblemReference is headerProblem without its tables: every
// prefix compared.
func headerProblemReference(s string) string {
	t := strings.TrimLeft(s, " \t")
	for _, p := range headerPrefixes {
		if len(t) >= len(p.prefix) && strings.EqualFold(t[:len(p.prefix)], p.prefix) {
			return p.reason
		}
	}
	return ""
}

// TestMarkersCoverRules: every string stringProblem rejects for a reason
// other than a header or length holds a marker, and removing the marker
// from a trigger (where the rule needs it) clears it.
func TestMarkersCoverRules(t *testing.T) {
	t.Parallel()
	var covered int
	for _, s := range append(slices.Clone(guardTriggers), "header\nv=0\r\nm=audio 9 RTP/AVP 0\r\n",
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n") {
		if stringProblem(s) == "" {
			t.Fatalf("trigger %q passes the guard", s)
		}
		if headerProblem(s) != "" || len(s) >= minBase64Run {
			continue
		}
		covered++
		if !hasMarker(s) {
			t.Errorf("trigger %q holds no guard marker", s)
		}
	}
	if covered < 20 {
		t.Fatalf("only %d triggers reach the markers; the test no longer tests", covered)
	}
}

// BenchmarkGuard is the guard stage of the full path (see BenchmarkDecode).
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
