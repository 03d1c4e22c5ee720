package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// builtinRules versions the Go code of the built-in schemas' rules, so a
// fingerprint changes when that code changes in what it accepts even if the
// embedded JSON Schema did not.
const builtinRules = "go1"

// fault is one way a document breaks a rule, as the JSON Schema validator
// of package schema/jsonschema reports it: its depth is the length of its
// path, the member of a member rule counted.
type fault struct {
	depth  int
	path   string
	reason string
}

// faults collects every broken rule of one document and keeps the one a
// writer should fix, chosen as schema/jsonschema chooses among the
// library's causes (deepest first, then the smallest path, then the
// smallest reason), so both say the same about one document.
type faults struct {
	p    jsonPath
	best fault
	any  bool
}

func (f *faults) add(member, reason string) {
	depth := f.p.n
	if member != "" {
		f.p.push(member, -1)
		depth++
	}
	c := fault{depth: depth, path: segsPath(f.p.segs[:f.p.n]), reason: reason}
	if member != "" {
		f.p.n--
	}
	b := f.best
	if !f.any || c.depth > b.depth || c.depth == b.depth && (c.path < b.path || c.path == b.path && c.reason < b.reason) {
		f.best, f.any = c, true
	}
}

func (f *faults) err(schemaName string) error {
	if !f.any {
		return nil
	}
	return &Error{Schema: schemaName, Path: f.best.path, Reason: f.best.reason}
}

// jsonType is the JSON Schema type name of a decoded value, a number's
// always "number", as the library names it in errors.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func numRat(n json.Number) (*big.Rat, bool) {
	return new(big.Rat).SetString(string(n))
}

// checkType is the type keyword; false ends the schema's other checks,
// which all concern values of that type.
func (f *faults) checkType(v any, want string) bool {
	got := jsonType(v)
	if got == want {
		return true
	}
	if n, ok := v.(json.Number); ok && want == "integer" {
		if r, ok := numRat(n); ok && r.IsInt() {
			return true
		}
	}
	f.add("", "must be "+want+", not "+got)
	return false
}

// checkInt is {"type": "integer", "minimum": lo, "maximum": hi}.
func (f *faults) checkInt(v any, lo, hi int64) {
	if !f.checkType(v, "integer") {
		return
	}
	r, _ := numRat(v.(json.Number))
	if r.Cmp(big.NewRat(lo, 1)) < 0 {
		f.add("", "must be >= "+strconv.FormatInt(lo, 10))
	}
	if r.Cmp(big.NewRat(hi, 1)) > 0 {
		f.add("", "must be <= "+strconv.FormatInt(hi, 10))
	}
}

// checkString is {"type": "string", "minLength", "maxLength", "pattern"},
// lengths counted in characters as the library counts them.
func (f *faults) checkString(v any, minLen, maxLen int, pattern string, match func(string) bool) (string, bool) {
	if !f.checkType(v, "string") {
		return "", false
	}
	s := v.(string)
	if n := utf8.RuneCountInString(s); n < minLen {
		f.add("", "must be at least "+strconv.Itoa(minLen)+" characters")
	} else if n > maxLen {
		f.add("", "must be at most "+strconv.Itoa(maxLen)+" characters")
	}
	if !match(s) {
		f.add("", "does not match "+pattern)
	}
	return s, true
}

// checkEnum is an enum of strings.
func (f *faults) checkEnum(v any, want ...string) {
	if s, ok := v.(string); ok && slices.Contains(want, s) {
		return
	}
	f.add("", "must be one of "+strings.Join(want, ", "))
}

// checkObject is {"type": "object", "required", "additionalProperties":
// false} over the members known; it reports every missing and unknown
// member by the smallest name, as the library does.
func (f *faults) checkObject(v any, required []string, known func(string) bool) (map[string]any, bool) {
	if !f.checkType(v, "object") {
		return nil, false
	}
	m := v.(map[string]any)
	var missing, unknown string
	for _, r := range required {
		if _, ok := m[r]; !ok && (missing == "" || r < missing) {
			missing = r
		}
	}
	if missing != "" {
		f.add(missing, "missing required field")
	}
	found := false // "" is a member name too
	for k := range m {
		if !known(k) && (!found || k < unknown) {
			unknown, found = k, true
		}
	}
	if found {
		f.add(unknown, "unknown field")
	}
	return m, true
}

// member runs check on m[k] at path .k when k is present.
func (f *faults) member(m map[string]any, k string, check func(v any)) {
	v, ok := m[k]
	if !ok {
		return
	}
	f.p.push(k, -1)
	check(v)
	f.p.n--
}

// jsonEqual is JSON Schema's equality: numbers by value, objects by
// members, arrays by items in order.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, okA := numRat(a)
		rb, okB := numRat(bn)
		return okA && okB && ra.Cmp(rb) == 0
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	}
	return a == b
}

// builtinFingerprint is prefix, the Go rules' version and the SHA-256 of
// the embedded JSON Schema in canonical form (encoding/json sorts object
// members), so it differs per definition and not per spelling.
func builtinFingerprint(prefix string, schemaJSON []byte) string {
	var doc any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		panic("schema: embedded " + prefix + " schema does not parse: " + err.Error())
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		panic("schema: embedded " + prefix + " schema does not encode: " + err.Error())
	}
	sum := sha256.Sum256(canon)
	return prefix + "+" + builtinRules + ":" + hex.EncodeToString(sum[:])
}
