package schema

import (
	"strings"
	"unicode/utf8"
)

// The fast path's first look at string contents for the guard. Running
// stringProblem on every string cost more than everything else the fast
// path did together, yet hardly any string in a real document comes near
// one of its rules. So str answers "certainly clean" or "ask stringProblem"
// for each string; unsure, the guard's own function decides, so this can
// only make the fast path unsure more often, never accept more.
// TestStrCleanImpliesNoProblem and FuzzGuardFilters hold it to that.
//
// What stringProblem can object to in a string without escapes, and what
// such a string then must hold:
//
//   - nothing at all below minGuardedString bytes;
//   - a header or cookie prefix (headerProblem): first three bytes that
//     begin one of headerPrefixes (headerFirst and the two after it);
//   - "-----BEGIN" (PEM): an upper-case B;
//   - raw SDP: a line break after "v=0", which a string without escapes
//     cannot hold, str refusing control characters;
//   - ";base64," and Set-Cookie attributes: a semicolon;
//   - "Bearer " or "Basic " in any case: a b or B followed by an a or an e
//     in either case (EqualFold compares as many bytes as the ASCII scheme
//     has, so only ASCII matches);
//   - a base64 run of minBase64Run characters: as many bytes;
//   - a shorter run, from minMagicRun on, starting with one of
//     base64Magics: that magic as it stands, and each of them holds an
//     upper-case B or G or is "/9j/".
//
// Those letters and signs are rare in text, and strings.IndexByte finds
// them many bytes at a time: once per document rather than byte by byte in
// every string (guardMarks). The rest costs a few instructions a string.

// minGuardedString is the length below which stringProblem finds nothing.
const minGuardedString = 7

// headerFirst, headerSecond and headerThird have a bit for each prefix
// that headerProblem compares the start of a string with, after spaces and
// tabs (headerPrefixes): a string may match only if the bits of its first
// three bytes meet. EqualFold compares as many bytes of the string as the
// ASCII prefix has, so a match is ASCII throughout and ASCII case is all
// that folds. Derived from headerPrefixes, the tables cannot drift apart
// from it.
var headerFirst, headerSecond, headerThird = func() (first, second, third [256]uint32) {
	const anything = 1 // after leading white space anything may follow
	first[' '], first['\t'] = anything, anything
	for c := range second {
		second[c], third[c] = anything, anything
	}
	bit := uint32(anything)
	for lower, prefixes := range headerPrefixes {
		for _, p := range prefixes {
			if bit <<= 1; bit == 0 || len(p.prefix) < 3 {
				panic("schema: header prefix " + p.prefix + " does not fit headerFirst")
			}
			for _, c := range asciiCases(byte(lower)) {
				first[c] |= bit
			}
			for _, c := range asciiCases(p.prefix[1]) {
				second[c] |= bit
			}
			for _, c := range asciiCases(p.prefix[2]) {
				third[c] |= bit
			}
		}
	}
	return first, second, third
}()

// asciiCases returns c and, for an ASCII letter, its other case.
func asciiCases(c byte) []byte {
	switch {
	case c >= 'a' && c <= 'z':
		return []byte{c, c - 'a' + 'A'}
	case c >= 'A' && c <= 'Z':
		return []byte{c, c - 'A' + 'a'}
	}
	return []byte{c}
}

// guardMarkKinds are the bytes a string must hold for stringProblem to
// object to it, see the comment at the top, each with what must stand
// around it for that (a check of d at the byte's position j, which keeps
// within d itself).
var guardMarkKinds = [numGuardMarks]struct {
	c      byte
	around func(d string, j int) bool
}{
	{';', nil},
	{'B', nil},
	{'G', nil}, // R0lGOD, UklGR
	{'b', func(d string, j int) bool { // bearer, basic
		return j+1 < len(d) && (d[j+1]|0x20 == 'a' || d[j+1]|0x20 == 'e')
	}},
	{'/', func(d string, j int) bool { // /9j/
		return strings.HasPrefix(d[j:], "/9j/")
	}},
}

const numGuardMarks = 5

// guardMarks are the positions in one document of the next occurrence of
// each of guardMarkKinds. The scanner reads strings in document order, so a
// kind is searched for again only once a string has begun past it, and the
// document is scanned about once per kind.
type guardMarks struct {
	next int                // the lowest of at, or -1 before the first update
	at   [numGuardMarks]int // len(d) when there is no further occurrence
}

func (m *guardMarks) reset() {
	m.next = -1
	for k := range m.at {
		m.at[k] = -1
	}
}

// update moves every mark before start to its next occurrence at or after
// start.
func (m *guardMarks) update(d string, start int) {
	next := len(d)
	for k := range m.at {
		j := m.at[k]
		if j < start {
			kind := &guardMarkKinds[k]
			for j = start; ; j++ {
				j = indexFrom(d, j, kind.c)
				if j == len(d) || kind.around == nil || kind.around(d, j) {
					break
				}
			}
			m.at[k] = j
		}
		next = min(next, j)
	}
	m.next = next
}

// indexFrom returns the position of the first c in d at or after from, or
// len(d) when there is none.
func indexFrom(d string, from int, c byte) int {
	if j := strings.IndexByte(d[from:], c); j >= 0 {
		return from + j
	}
	return len(d)
}

// paramNameNormal does matchParamName and normalizeName in one pass over a
// parameter name, as the fast path needs both for every one: it reports
// whether s matches the pattern and, if it does, writes normalizeName's
// result to out and returns its length. Names longer than out are left to
// the two functions themselves (long true).
func paramNameNormal(s string, out *[64]byte) (n int, match, long bool) {
	if len(s) > len(out) {
		return 0, false, true
	}
	// n <= i < len(s) <= 64 below; the mask only spares a bounds check.
	i := 0
	for ; i < len(s); i++ {
		e := paramNameByte[s[i]]
		if e&pnNamespace == 0 {
			break
		}
		out[n&63] = byte(e)
		n += int(e >> pnKeepShift & 1)
	}
	if i == 0 || i == len(s) {
		return 0, false, false
	}
	for i < len(s) {
		if s[i] != '.' {
			return 0, false, false
		}
		i++
		start := i
		for ; i < len(s); i++ {
			e := paramNameByte[s[i]]
			if e&pnSegment == 0 {
				break
			}
			out[n&63] = byte(e)
			n += int(e >> pnKeepShift & 1)
		}
		if i == start {
			return 0, false, false
		}
	}
	return n, true, false
}

// paramNameByte holds for each byte what paramNameNormal needs, in one
// look-up: the byte as normalizeName writes it (low eight bits), whether
// normalizeName keeps it, and its classes in matchParamName's pattern.
var paramNameByte = func() (t [256]uint16) {
	for c := range utf8.RuneSelf {
		t[c] = uint16(asciiNorm[c]) | uint16(asciiKeep[c])<<pnKeepShift
		if patternClass[c]&pcNamespace != 0 {
			t[c] |= pnNamespace
		}
		if patternClass[c]&pcSegment != 0 {
			t[c] |= pnSegment
		}
	}
	return t
}()

const (
	pnKeepShift = 8
	pnNamespace = 1 << 9
	pnSegment   = 1 << 10
)
