package schema

import (
	"unicode/utf8"
)

// The patterns of media-intent.v1.json, which the Go rules and the fast
// path match with the byte scans below.
const (
	identifierPattern = `^[A-Za-z0-9._-]+$`
	paramNamePattern  = `^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$`
)

// fastPatterns replaces the regexp engine for the patterns the built-in
// schemas use on every document. Go's regexp costs about as much as the
// rest of the schema check put together for these, while a byte scan is a
// few nanoseconds; TestFastPatternsAgreeWithRegexp holds the two to the
// same answers.
var fastPatterns = map[string]func(string) bool{
	identifierPattern: matchIdentifier,
	paramNamePattern:  matchParamName,
}

// matchIdentifier is identifierPattern.
func matchIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if patternByte[s[i]]&pcIdent == 0 {
			return false
		}
	}
	return true
}

// matchParamName is paramNamePattern, a namespaced parameter name:
// <ns>.<name>[.<name>...].
func matchParamName(s string) bool {
	var out [64]byte
	_, _, match := paramName(s, &out)
	return match
}

// paramName is matchParamName that also writes out what normalizeName
// makes of s and returns its length, because the fast path needs both for
// every parameter name and one pass costs half as much as two; it also
// sums pieceLanes over s, for the guard's split rule. The normalised form
// and the sum are complete only when s fits in out; beyond that the form
// wraps around, and callers normalise and count a long name themselves.
func paramName(s string, out *[64]byte) (n int, lanes uint64, match bool) {
	i, n, lanes := paramNameRun(s, 0, pcNamespace, out, 0, 0)
	if i == 0 || i == len(s) {
		return 0, 0, false
	}
	for i < len(s) {
		if s[i] != '.' {
			return 0, 0, false
		}
		start := i + 1
		if i, n, lanes = paramNameRun(s, start, pcSegment, out, n, lanes); i == start {
			return 0, 0, false
		}
	}
	return n, lanes, true
}

// paramNameRun reads the bytes of class from s[i:] on, appending their
// normal form to out[:n] and their pieceLanes to lanes, and returns where
// the run ends and the new n and lanes.
func paramNameRun(s string, i int, class uint16, out *[64]byte, n int, lanes uint64) (int, int, uint64) {
	for ; i < len(s); i++ {
		c := s[i]
		e := patternByte[c]
		if e&class == 0 {
			break
		}
		out[n&63] = byte(e)
		n += int(e >> pcKeepShift & 1)
		lanes += pieceLanes[c]
	}
	return i, n, lanes
}

// patternByte holds for each byte what the matchers need, in one look-up:
// the byte as normalizeName writes it (low eight bits), whether
// normalizeName keeps it, and its classes in the patterns. Bytes outside
// ASCII belong to no class.
var patternByte = func() (t [256]uint16) {
	for c := range utf8.RuneSelf {
		lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		t[c] = uint16(asciiNorm[c]) | uint16(asciiKeep[c])<<pcKeepShift
		if lower || upper || digit || c == '.' || c == '_' || c == '-' {
			t[c] |= pcIdent
		}
		if lower || digit || c == '-' {
			t[c] |= pcNamespace
		}
		if lower || upper || digit || c == '_' || c == '-' {
			t[c] |= pcSegment
		}
	}
	return t
}()

const (
	pcKeepShift = 8
	pcIdent     = 1 << 9  // [A-Za-z0-9._-]
	pcNamespace = 1 << 10 // [a-z0-9-]
	pcSegment   = 1 << 11 // [a-zA-Z0-9_-]
)
