package schema

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file is the package's one JSON reader. Every rule about what a
// document's bytes may be (the grammar, UTF-8, escapes decoded as
// encoding/json decodes them, the nesting limit, no duplicate member
// names) is written here once, and both ways of reading a document use it:
//
//   - building ([decodeObject]): the Go values the JSON Schema library
//     validates, with an *Error that says where and why for anything that is
//     not a document the store may keep;
//   - checking (a [RawValidator] such as MediaIntentV1's AcceptRaw): the
//     same walk without building anything or allocating, applying the guard
//     to every member name and string as it goes, that answers only "sure"
//     or "not sure".
//
// So the two cannot disagree on what JSON is; FuzzDecodeMatchesEncodingJSON
// holds the reader to encoding/json and FuzzFastPathSound holds checking to
// building plus validation.

// walker reads one document. In check mode (build nil) d views the
// caller's bytes without a copy and nothing derived from it outlives the
// walk; in build mode d is the walker's own copy, so the values built may
// share its memory.
type walker struct {
	d     string
	pos   int
	build *builder // nil: check mode

	// Check mode only.
	s      *scratch
	seed   uint64     // of keyHash, random so that no one can aim at collisions
	serial uint64     // numbers the objects, to keep their name sets apart
	marks  guardMarks // where the guard's markers are in d
}

// builder is what build mode keeps besides the walk.
type builder struct {
	val   any    // what the last value call read
	err   *Error // why the walk stopped
	depth int    // entries used in path
	path  [maxDepth + 1]pathSeg
	// members collects the members of the objects being read (a stack,
	// innermost object last), so each map is made once at its final size.
	members []member
	buf     []byte
}

type member struct {
	key string
	val any
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
	p := walker{d: string(doc), build: &builder{members: make([]member, 0, 48)}}
	p.skipSpace()
	if p.pos == len(p.d) {
		return nil, &Error{Path: "$", Reason: "invalid JSON: empty document"}
	}
	if !p.value(1) || !p.end() {
		return nil, p.build.err
	}
	obj, ok := p.build.val.(map[string]any)
	if !ok {
		return nil, &Error{Path: "$", Reason: "document must be a JSON object, not " + jsonKind(p.build.val)}
	}
	return obj, nil
}

// checker returns a check-mode walker over doc using s, which it resets.
func checker(doc []byte, s *scratch, seed uint64) walker {
	s.reset()
	p := walker{d: unsafe.String(unsafe.SliceData(doc), len(doc)), s: s, seed: seed}
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

// syntax stops the walk at p.pos for a JSON syntax error; it always
// returns false.
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

// fail stops the walk for a rule broken at the current path; it always
// returns false.
func (p *walker) fail(reason string) bool {
	if b := p.build; b != nil {
		b.err = &Error{Path: segsPath(b.path[:b.depth]), Reason: reason}
	}
	return false
}

// end insists that only white space follows the value just read.
func (p *walker) end() bool {
	p.skipSpace()
	return p.pos == len(p.d) || p.syntax("data after the document")
}

func (p *walker) skipSpace() {
	for p.pos < len(p.d) && jsonSpace[p.d[p.pos]] {
		p.pos++
	}
}

// jsonSpace marks the JSON white space bytes.
var jsonSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// separator reads white space, c (the ':' after a member name or the ','
// between members and elements) and white space, and reports whether it
// found c; build mode's callers say what is wrong when it did not. Small
// enough to be inlined into the loops, which call it for every member.
func (p *walker) separator(c byte) bool {
	p.skipSpace()
	if p.pos < len(p.d) && p.d[p.pos] == c {
		p.pos++
		p.skipSpace()
		return true
	}
	return false
}

// closing reads the byte that ends a container where separator found no
// ','.
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

// value reads the value at p.pos, which is not white space; depth is the
// nesting level a container found here would have. Check mode applies the
// guard to strings.
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
			return ok
		}
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
	if b != nil {
		first = len(b.members)
	} else {
		// Numbers the objects, to keep their name sets apart.
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
		if b == nil {
			if paramNames && !paramNameClean(k, clean) || !paramNames && !nameClean(k, clean) {
				return false
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
			b.path[b.depth] = pathSeg{key: k, index: -1}
			b.depth++
		}
		if !p.value(depth + 1) {
			return false
		}
		if b != nil {
			b.depth--
			b.members = append(b.members, member{k, b.val})
		}
		if more = p.separator(','); !more && !p.closing('}', "expected ',' or '}' in object") {
			return false
		}
	}
	if b == nil {
		return true
	}
	if !b.object(first) {
		return p.fail("duplicate field name")
	}
	return true
}

// object makes the map of the members from first on, which it takes off
// the stack. Each map is made once at its final size; a duplicate name
// shows as a map shorter than the members, and then object returns false
// with the name on the path.
func (b *builder) object(first int) bool {
	members := b.members[first:]
	m := make(map[string]any, len(members))
	for i, mb := range members {
		m[mb.key] = mb.val
		if len(m) != i+1 {
			b.path[b.depth] = pathSeg{key: mb.key, index: -1}
			b.depth++
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
	var a []any
	if p.build != nil {
		a = make([]any, 0)
	}
	p.skipSpace()
	if p.pos < len(p.d) && p.d[p.pos] == ']' {
		p.pos++
		if p.build != nil {
			p.build.val = a
		}
		return true
	}
	for more := true; more; {
		if b := p.build; b != nil {
			b.path[b.depth] = pathSeg{index: len(a)}
			b.depth++
		}
		if !p.value(depth + 1) {
			return false
		}
		if b := p.build; b != nil {
			b.depth--
			a = append(a, b.val)
		}
		if more = p.separator(','); !more && !p.closing(']', "expected ',' or ']' in array") {
			return false
		}
	}
	if p.build != nil {
		p.build.val = a
	}
	return true
}

// number reads the number at p.pos.
func (p *walker) number() bool {
	start := p.pos
	if start >= len(p.d) {
		return p.syntax("")
	}
	if c := p.d[start]; c != '-' && (c < '0' || c > '9') {
		if p.build == nil {
			return false
		}
		return p.syntax(fmt.Sprintf("unexpected %q", c))
	}
	end, ok := scanNumber(p.d, start)
	p.pos = end
	if !ok {
		return p.syntax("invalid number")
	}
	if p.build != nil {
		p.build.val = json.Number(p.d[start:end])
	}
	return true
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
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = skipDigits(d, i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return i, false
		}
		i = skipDigits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return i, false
		}
		i = skipDigits(d, i)
	}
	return i, true
}

func skipDigits(d string, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
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
// decoded contents. Without escapes that is a substring of d; with escapes
// build mode allocates it, and check mode returns the scratch buffer,
// valid until the next call.
//
// clean true promises that stringProblem has nothing to say about the
// string (check mode only; see guardMarks); false only means "not shown",
// and the caller asks stringProblem.
func (p *walker) str() (s string, clean, ok bool) {
	d := p.d
	i := p.pos + 1 // opening quote
	start := i
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
			s = d[start:i]
			if p.build != nil || len(s) < minGuardedString {
				return s, p.build == nil, true
			}
			// See guardMarks.
			if p.marks.next < start {
				p.marks.update(d, start)
			}
			return s, p.marks.next >= i && len(s) < minBase64Run && !mayBeHeader(s), true
		case c == '\\':
			p.pos = i
			s, ok = p.strEscaped(start)
			return s, false, ok
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

// strEscaped finishes a string that contains escapes, from p.pos on,
// decoding them the way encoding/json does, including its U+FFFD for
// unpaired surrogates.
func (p *walker) strEscaped(start int) (string, bool) {
	d := p.d
	var bufp *[]byte
	if p.build != nil {
		bufp = &p.build.buf
	} else {
		bufp = &p.s.buf
	}
	buf := append((*bufp)[:0], d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case plainByte[c]:
			buf = append(buf, c)
			p.pos++
		case c == '"':
			p.pos++
			*bufp = buf // keep what it grew to
			if p.build != nil {
				return string(buf), true
			}
			return unsafe.String(unsafe.SliceData(buf), len(buf)), true
		case c < 0x20:
			return "", p.syntax("control character in string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.syntax("invalid UTF-8 in string")
			}
			buf = append(buf, d[p.pos:p.pos+size]...)
			p.pos += size
		default: // backslash
			if p.pos+1 >= len(d) {
				p.pos++
				return "", p.syntax("")
			}
			var bad string
			if buf, p.pos, bad = appendEscape(buf, d, p.pos); bad != "" {
				return "", p.syntax(bad)
			}
		}
	}
	return "", p.syntax("")
}

// appendEscape appends what the escape sequence at d[pos] (a backslash
// with at least one byte after it) stands for and returns the position
// after it. A non-empty bad says why the escape is invalid; pos then points
// at the offending byte.
func appendEscape(buf []byte, d string, pos int) (out []byte, next int, bad string) {
	e := d[pos+1]
	pos += 2
	switch e {
	case '"', '\\', '/':
		return append(buf, e), pos, ""
	case 'b':
		return append(buf, '\b'), pos, ""
	case 'f':
		return append(buf, '\f'), pos, ""
	case 'n':
		return append(buf, '\n'), pos, ""
	case 'r':
		return append(buf, '\r'), pos, ""
	case 't':
		return append(buf, '\t'), pos, ""
	case 'u':
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
	return buf, pos - 1, "invalid escape"
}

func hex4(b string) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// notPlain has the top bit set in the lowest byte of x (little endian)
// that is not plainByte (a quote, a backslash, a control character or
// non-ASCII) and is zero when there is none. Each subtraction sets a
// byte's top bit when that byte is below the subtrahend (0x20 for control
// characters, 1 after XOR for the quote and the backslash); borrows can set
// more top bits, but only above a byte that really is not plain, and
// non-ASCII bytes have the top bit set already.
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
