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
	// identifier
	`^[A-Za-z0-9._-]+$`: func(s string) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if !isIdentByte(s[i]) {
				return false
			}
		}
		return true
	},
	// namespaced parameter name: <ns>.<name>[.<name>...]
	`^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$`: func(s string) bool {
		i := 0
		for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '-') {
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
			for i < len(s) && s[i] != '.' && isIdentByte(s[i]) {
				i++
			}
			if i == start {
				return false
			}
		}
		return true
	},
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

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
