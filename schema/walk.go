package schema

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// walker is the package's one JSON reader (see "Fast path" in the package
// comment). In check mode (build nil) d views the caller's bytes without a
// copy and nothing derived from it outlives the walk; in build mode d is
// the walker's own copy, so the values built may share its memory.
type walker struct {
	d     string
	pos   int
	build *builder // nil: check mode
	buf   *[]byte  // decoded strings with escapes, reused within a walk
	lone  string   // the first lone surrogate escape str met, "" for none

	// Check mode only.
	s       *scratch
	seed    uint64     // of keyHash, random so that no one can aim at collisions
	serial  uint64     // numbers the objects, to keep their name sets apart
	marks   guardMarks // where the guard's markers are in d
	strVal  string     // the string value read last, for the container rules
	seen    uint32     // MediaIntentV1's top-level members read, one bit each
	publish bool       // its role is "publish"
}

type builder struct {
	val  any    // what the last value call read
	err  *Error // why the walk stopped
	path jsonPath
	// members collects the members of the objects being read (a stack,
	// innermost object last), so each map is made once at its final size.
	members []member
	buf     []byte
}

type member struct {
	key string
	val any
}

type pathSeg struct {
	key   string
	index int // -1 for an object member
}

// jsonPath is the way to the value being read: a fixed array rather than a
// chain of stack frames, which escape analysis would move to the heap for
// a path wanted only for an error.
type jsonPath struct {
	n    int
	segs [maxDepth + 1]pathSeg
}

func (jp *jsonPath) push(key string, index int) {
	jp.segs[jp.n] = pathSeg{key, index}
	jp.n++
}

func (jp *jsonPath) fail(reason string) *Error {
	return &Error{Path: segsPath(jp.segs[:jp.n]), Reason: reason}
}

// decodeObject reads doc into the values json.Decoder with UseNumber
// produces (map[string]any, []any, string, json.Number, bool, nil) and
// insists on exactly one JSON object.
//
// It is stricter than encoding/json where leniency would let the stored
// bytes say something other than what was checked: a duplicate member name
// (encoding/json keeps the last, so a forbidden first value would be stored
// unchecked) and invalid UTF-8 (encoding/json substitutes U+FFFD) are
// rejected. It also stops at maxDepth, so a hostile document cannot make
// the reader recurse deeply.
func decodeObject(doc []byte) (map[string]any, *Error) {
	// One copy of the whole document up front lets every unescaped string
	// and number be a substring of it instead of an allocation of its own.
	b := &builder{members: make([]member, 0, 48)}
	p := walker{d: string(doc), build: b, buf: &b.buf}
	p.skipSpace()
	if p.pos == len(p.d) {
		return nil, &Error{Path: "$", Reason: "invalid JSON: empty document"}
	}
	if !p.value(1) || !p.end() {
		return nil, b.err
	}
	obj, ok := b.val.(map[string]any)
	if !ok {
		return nil, &Error{Path: "$", Reason: "document must be a JSON object, not " + jsonKind(b.val)}
	}
	return obj, nil
}

func checker(doc []byte, s *scratch, seed uint64) walker {
	s.reset()
	p := walker{d: unsafe.String(unsafe.SliceData(doc), len(doc)), buf: &s.buf, s: s, seed: seed}
	p.marks.reset()
	return p
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// syntax stops the walk for a syntax error at p.pos; it returns false.
func (p *walker) syntax(what string) bool {
	if p.build != nil {
		if p.pos >= len(p.d) {
			p.build.err = &Error{Path: "$", Reason: "invalid JSON: unexpected end of document"}
		} else {
			p.build.err = &Error{Path: "$", Reason: fmt.Sprintf("invalid JSON at byte %d: %s", p.pos, what)}
		}
	}
	return false
}

// fail stops the walk for a rule broken at the current path; it returns
// false.
func (p *walker) fail(reason string) bool {
	if b := p.build; b != nil {
		b.err = b.path.fail(reason)
	}
	return false
}

func (p *walker) end() bool {
	p.skipSpace()
	return p.pos == len(p.d) || p.syntax("data after the document")
}

func (p *walker) skipSpace() {
	for p.pos < len(p.d) && jsonSpace[p.d[p.pos]] {
		p.pos++
	}
}

var jsonSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// separator reads c (':' or ',') between white space, reporting whether it
// was there; small enough to be inlined into the member loops.
func (p *walker) separator(c byte) bool {
	p.skipSpace()
	if p.pos < len(p.d) && p.d[p.pos] == c {
		p.pos++
		p.skipSpace()
		return true
	}
	return false
}

func (p *walker) closing(c byte, what string) bool {
	if p.pos >= len(p.d) {
		return p.syntax("")
	}
	if p.d[p.pos] != c {
		return p.syntax(what)
	}
	p.pos++
	return true
}

// value reads the value at p.pos; depth is the nesting level a container
// found here would have.
func (p *walker) value(depth int) bool {
	if p.pos >= len(p.d) {
		return p.syntax("")
	}
	switch c := p.d[p.pos]; c {
	case '{', '[':
		if depth > maxDepth {
			return p.fail(tooDeep)
		}
		if c == '{' {
			return p.object(depth, false)
		}
		return p.array(depth)
	case '"':
		s, clean, ok := p.str()
		if p.build != nil {
			p.build.val = s
			if ok && p.lone != "" {
				return p.fail("value holds a lone surrogate " + p.lone)
			}
			return ok
		}
		p.strVal = s
		return ok && (clean || stringProblem(s) == "")
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	}
	return p.number()
}

func (p *walker) literal(lit string, v any) bool {
	if len(p.d)-p.pos < len(lit) || p.d[p.pos:p.pos+len(lit)] != lit {
		return p.syntax("invalid literal")
	}
	p.pos += len(lit)
	if p.build != nil {
		p.build.val = v
	}
	return true
}

// object reads the object at p.pos. Check mode applies the guard to
// member names, and with paramNames the parameters member-name pattern
// (patternProperties with additionalProperties false, matchParamName).
func (p *walker) object(depth int, paramNames bool) bool {
	p.pos++ // '{'
	p.skipSpace()
	b := p.build
	first := 0 // build mode: where this object's members start
	var mix uint64
	var names, values pieceStats // check mode: the container rules
	if b != nil {
		first = len(b.members)
	} else {
		p.serial++
		mix = p.serial * 0x9e3779b97f4a7c15
	}
	if p.pos < len(p.d) && p.d[p.pos] == '}' {
		p.pos++
		return b == nil || b.object(first)
	}
	for more := true; more; {
		if p.pos >= len(p.d) || p.d[p.pos] != '"' {
			return p.syntax("expected a member name")
		}
		k, clean, ok := p.str()
		if !ok {
			return false
		}
		if b != nil && p.lone != "" {
			b.path.push(k, -1)
			return p.fail("field name holds a lone surrogate " + p.lone)
		}
		if b == nil {
			if paramNames {
				if !paramNameClean(k, clean, &names) {
					return false
				}
			} else if !nameClean(k, clean) {
				return false
			} else {
				names.add(k)
			}
			// Equal hashes mean a duplicate or, rarely, a collision: not
			// sure.
			if !p.s.insert(keyHash(k, p.seed) ^ mix) {
				return false
			}
		}
		if !p.separator(':') {
			return p.syntax("expected ':' after a member name")
		}
		if b != nil {
			b.path.push(k, -1)
		}
		isStr := p.pos < len(p.d) && p.d[p.pos] == '"'
		if !p.value(depth + 1) {
			return false
		}
		if b != nil {
			b.path.n--
			b.members = append(b.members, member{k, b.val})
		} else if isStr {
			values.add(p.strVal)
		}
		if more = p.separator(','); !more && !p.closing('}', "expected ',' or '}' in object") {
			return false
		}
	}
	if b != nil && !b.object(first) {
		return p.fail("duplicate field name")
	}
	// objectProblem's rules, in check mode (the full path's guard applies
	// them to what build mode made).
	return b != nil || names.splitProblem("") == "" && values.splitProblem("") == ""
}

// object makes the map of the members from first on, which it takes off
// the stack; a duplicate name shows as a map shorter than the members.
func (b *builder) object(first int) bool {
	members := b.members[first:]
	m := make(map[string]any, len(members))
	for i, mb := range members {
		m[mb.key] = mb.val
		if len(m) != i+1 {
			b.path.push(mb.key, -1)
			return false
		}
	}
	clear(members) // let the values go
	b.members = b.members[:first]
	b.val = m
	return true
}

func (p *walker) array(depth int) bool {
	p.pos++ // '['
	p.skipSpace()
	b := p.build
	var a []any
	if b != nil {
		a = make([]any, 0) // encoding/json's [], not nil
	}
	var strs pieceStats // check mode: arrayProblem's rules
	n := 0
	if p.pos < len(p.d) && p.d[p.pos] == ']' {
		p.pos++
	} else {
		for more := true; more; {
			if b != nil {
				b.path.push("", len(a))
			}
			isStr := p.pos < len(p.d) && p.d[p.pos] == '"'
			if !p.value(depth + 1) {
				return false
			}
			n++
			if b != nil {
				b.path.n--
				a = append(a, b.val)
			} else if n > maxByteArray {
				return false // arrayProblem decides
			} else if isStr {
				strs.add(p.strVal)
			}
			if more = p.separator(','); !more && !p.closing(']', "expected ',' or ']' in array") {
				return false
			}
		}
	}
	if b != nil {
		b.val = a
		return true
	}
	// Not sure about one whose strings join into encoded data.
	return strs.splitProblem("") == ""
}

func (p *walker) number() bool {
	start := p.pos
	if start >= len(p.d) {
		return p.syntax("")
	}
	if c := p.d[start]; c != '-' && (c < '0' || c > '9') {
		return p.build != nil && p.syntax(fmt.Sprintf("unexpected %q", c))
	}
	end, ok := scanNumber(p.d, start)
	p.pos = end
	if !ok {
		return p.syntax("invalid number")
	}
	if p.build != nil {
		p.build.val = json.Number(p.d[start:end])
		return true
	}
	return numberProblem(p.d[start:end]) == ""
}

// scanNumber matches the JSON number grammar at d[i]. It returns the end of
// the number, or with ok false the offset of the first byte that breaks the
// grammar.
func scanNumber(d string, i int) (end int, ok bool) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case isDigit(d, i):
		i = skipDigits(d, i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		if i++; !isDigit(d, i) {
			return i, false
		}
		i = skipDigits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		if i++; i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !isDigit(d, i) {
			return i, false
		}
		i = skipDigits(d, i)
	}
	return i, true
}

func isDigit(d string, i int) bool { return i < len(d) && d[i] >= '0' && d[i] <= '9' }

func skipDigits(d string, i int) int {
	for isDigit(d, i) {
		i++
	}
	return i
}

// plainByte marks bytes that stand for themselves inside a string.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads the string at p.pos (its opening quote) and returns its
// decoded contents: without escapes a substring of d; with escapes a copy
// in build mode, and in check mode p.buf, valid until the next call.
//
// clean true promises that stringProblem has nothing to say about the
// string (check mode only; see guardMarks); false only means "not shown",
// and the caller asks stringProblem.
func (p *walker) str() (s string, clean, ok bool) {
	d := p.d
	i := p.pos + 1 // opening quote
	start := i     // negated once an escape is met, rather than a flag more in the loop
	for {
		// Eight bytes at a time up to the first that is not plainByte:
		// most of a document is string contents, and most string contents
		// are plain ASCII.
		for i+8 <= len(d) {
			if m := notPlain(load64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(d) {
			p.pos = i
			return "", false, p.syntax("")
		}
		c := d[i]
		if plainByte[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.pos = i + 1
			if start < 0 {
				return p.unescape(d[-start:i]), false, true
			}
			s = d[start:i]
			if p.build != nil || len(s) < minGuardedString {
				return s, p.build == nil, true
			}
			if p.marks.next < start {
				p.marks.update(d, start)
			}
			return s, p.marks.next >= i && len(s) < minBase64Run && !mayBeHeader(s), true
		case c == '\\':
			var one [utf8.UTFMax]byte
			var bad string
			at := i
			if _, i, bad = appendEscape(one[:0], d, at); bad != "" {
				p.pos = i
				return "", false, p.syntax(bad)
			}
			if d[at+1] == 'u' && loneSurrogate(d, at) {
				// encoding/json reads U+FFFD, a JavaScript engine the
				// surrogate, some readers refuse the document: it cannot
				// mean the same to all of them.
				if p.build == nil {
					p.pos = i
					return "", false, false
				}
				if p.lone == "" {
					p.lone = d[at : at+6]
				}
			}
			if start > 0 {
				start = -start
			}
		case c < 0x20:
			p.pos = i
			return "", false, p.syntax("control character in string")
		default:
			r, size := utf8.DecodeRuneInString(d[i:])
			if r == utf8.RuneError && size <= 1 {
				p.pos = i
				return "", false, p.syntax("invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// unescape decodes raw, the contents of a string that str has checked.
func (p *walker) unescape(raw string) string {
	buf := (*p.buf)[:0]
	for {
		j := strings.IndexByte(raw, '\\')
		if j < 0 {
			break
		}
		buf = append(buf, raw[:j]...)
		buf, j, _ = appendEscape(buf, raw, j)
		raw = raw[j:]
	}
	buf = append(buf, raw...)
	*p.buf = buf // keep what it grew to
	if p.build != nil {
		return string(buf)
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// simpleEscape is what each one-letter escape stands for, 0 for the others.
var simpleEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendEscape appends what the escape sequence at d[pos] (a backslash)
// stands for, decoding it as encoding/json does (U+FFFD for an unpaired
// surrogate), and returns the position after it. A non-empty bad says why
// the escape is invalid; pos then points at the offending byte, or past
// the end.
func appendEscape(buf []byte, d string, pos int) (out []byte, next int, bad string) {
	if pos+1 >= len(d) {
		return buf, len(d), "unexpected end"
	}
	e := d[pos+1]
	pos += 2
	if c := simpleEscape[e]; c != 0 {
		return append(buf, c), pos, ""
	}
	if e != 'u' {
		return buf, pos - 1, "invalid escape"
	}
	r, ok := hex4(d[pos:])
	if !ok {
		return buf, pos, "invalid \\u escape"
	}
	pos += 4
	if utf16.IsSurrogate(r) {
		dec := utf8.RuneError
		if len(d)-pos >= 6 && d[pos] == '\\' && d[pos+1] == 'u' {
			if r2, ok := hex4(d[pos+2:]); ok {
				if x := utf16.DecodeRune(r, r2); x != utf8.RuneError {
					dec = x
					pos += 6
				}
			}
		}
		r = dec
	}
	return utf8.AppendRune(buf, r), pos, ""
}

// loneSurrogate reports whether the \u escape at d[pos] is a surrogate
// that is not half of a pair: a high one not followed by an escaped low
// one, or a low one not preceded by an escaped high one. appendEscape has
// checked the escape.
func loneSurrogate(d string, pos int) bool {
	r, _ := hex4(d[pos+2:])
	switch {
	case r >= 0xd800 && r < 0xdc00:
		if len(d)-pos >= 12 && d[pos+6] == '\\' && d[pos+7] == 'u' {
			r2, ok := hex4(d[pos+8:])
			return !ok || r2 < 0xdc00 || r2 >= 0xe000
		}
		return true
	case r >= 0xdc00 && r < 0xe000:
		// A low surrogate that completes a pair is consumed with its high
		// one by appendEscape, so the one seen here is lone.
		return true
	}
	return false
}

func hex4(b string) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	r, err := strconv.ParseUint(b[:4], 16, 16)
	return rune(r), err == nil
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// notPlain has the top bit set in the lowest byte of x (little endian)
// that is not plainByte, and is zero when there is none. Each subtraction
// sets a byte's top bit when that byte is below the subtrahend (0x20 for
// control characters, 1 after XOR for the quote and the backslash);
// borrows can set more top bits, but only above a byte that really is not
// plain, and non-ASCII bytes have the top bit set already.
func notPlain(x uint64) uint64 {
	q := x ^ (lsbs * '"')
	bs := x ^ (lsbs * '\\')
	return (x | (x - lsbs*0x20) | (q - lsbs) | (bs - lsbs)) & msbs
}

// load64 reads the first eight bytes of s, little endian (the compiler
// makes it one load).
func load64(s string) uint64 {
	s = s[:8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
