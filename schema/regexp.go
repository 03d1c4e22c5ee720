package schema

import (
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastPatterns replaces the regexp engine for the patterns the built-in
// schemas use on every document. Go's regexp costs about as much as the
// rest of the schema check put together for these, while a byte scan is a
// few nanoseconds. Any other pattern is compiled with Go's regexp as usual;
// TestFastPatternsAgreeWithRegexp holds the two to the same answers.
var fastPatterns = map[string]func(string) bool{
	`^[A-Za-z0-9._-]+$`:               matchIdentifier,
	`^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$`: matchParamName,
}

// matchIdentifier is ^[A-Za-z0-9._-]+$.
func matchIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if patternClass[s[i]]&pcIdent == 0 {
			return false
		}
	}
	return true
}

// matchParamName is ^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$, a namespaced
// parameter name: <ns>.<name>[.<name>...].
func matchParamName(s string) bool {
	i := 0
	for i < len(s) && patternClass[s[i]]&pcNamespace != 0 {
		i++
	}
	if i == 0 || i == len(s) {
		return false
	}
	for i < len(s) {
		if s[i] != '.' {
			return false
		}
		i++
		start := i
		for i < len(s) && patternClass[s[i]]&pcSegment != 0 {
			i++
		}
		if i == start {
			return false
		}
	}
	return true
}

// The character classes of the patterns, as bits of patternClass: one
// table look-up per byte rather than a chain of comparisons.
const (
	pcIdent     = 1 << iota // [A-Za-z0-9._-]
	pcNamespace             // [a-z0-9-]
	pcSegment               // [a-zA-Z0-9_-]
)

var patternClass = func() (t [256]uint8) {
	for c := range 256 {
		lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
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

type fastRegexp struct {
	pattern string
	match   func(string) bool
}

func (r *fastRegexp) MatchString(s string) bool { return r.match(s) }
func (r *fastRegexp) String() string            { return r.pattern }

func compilePattern(pattern string) (jsonschema.Regexp, error) {
	if m, ok := fastPatterns[pattern]; ok {
		// A pointer, because the library keys maps by Regexp.
		return &fastRegexp{pattern, m}, nil
	}
	return regexp.Compile(pattern)
}
