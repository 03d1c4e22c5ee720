package schema

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeObject parses doc into the same values json.Decoder with UseNumber
// produces (map[string]any, []any, string, json.Number, bool, nil) and
// insists on exactly one JSON object.
//
// It is stricter than encoding/json where leniency would let the stored
// bytes say something other than what was checked: a duplicate member name
// (encoding/json keeps the last, so a forbidden first value would be stored
// unchecked) and invalid UTF-8 (encoding/json substitutes U+FFFD) are
// rejected. It also stops at maxDepth, so a hostile document cannot make the
// parser recurse deeply. And it is several times faster than encoding/json's
// reflection-based decoding, which matters on the write path.
// FuzzDecodeMatchesEncodingJSON holds it to encoding/json's results.
func decodeObject(doc []byte) (map[string]any, *Error) {
	// One copy of the whole document up front lets every unescaped string
	// and number be a substring of it instead of an allocation of its own.
	p := parser{data: string(doc), members: make([]member, 0, 48)}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, &Error{Path: "$", Reason: "invalid JSON: empty document"}
	}
	v, err := p.value(1)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.syntax("data after the document")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Path: "$", Reason: "document must be a JSON object, not " + jsonKind(v)}
	}
	return obj, nil
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

type parser struct {
	data  string
	pos   int
	depth int // entries used in path
	path  [maxDepth + 1]pathSeg
	// members collects the members of the objects being parsed (a stack,
	// innermost object last), so each map is made once at its final size
	// instead of growing and rehashing member by member.
	members []member
}

type member struct {
	key string
	val any
}

func (p *parser) syntax(what string) *Error {
	if p.pos >= len(p.data) {
		return &Error{Path: "$", Reason: "invalid JSON: unexpected end of document"}
	}
	return &Error{Path: "$", Reason: fmt.Sprintf("invalid JSON at byte %d: %s", p.pos, what)}
}

func (p *parser) fail(reason string) *Error {
	return &Error{Path: segsPath(p.path[:p.depth]), Reason: reason}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at p.pos, which is not white space; depth is the
// nesting level a container found here would have.
func (p *parser) value(depth int) (any, *Error) {
	if p.pos >= len(p.data) {
		return nil, p.syntax("")
	}
	switch c := p.data[p.pos]; c {
	case '{':
		if depth > maxDepth {
			return nil, p.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
		}
		return p.object(depth)
	case '[':
		if depth > maxDepth {
			return nil, p.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
		}
		return p.array(depth)
	case '"':
		return p.str()
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	case 'n':
		return nil, p.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return p.number()
		}
		return nil, p.syntax(fmt.Sprintf("unexpected %q", c))
	}
}

func (p *parser) literal(lit string) *Error {
	if len(p.data)-p.pos < len(lit) || p.data[p.pos:p.pos+len(lit)] != lit {
		return p.syntax("invalid literal")
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) object(depth int) (any, *Error) {
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return make(map[string]any), nil
	}
	first := len(p.members)
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.syntax("expected a member name")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.syntax("expected ':' after a member name")
		}
		p.pos++
		p.skipSpace()
		p.path[p.depth] = pathSeg{key: k, index: -1}
		p.depth++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.depth--
		p.members = append(p.members, member{k, v})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.syntax("")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			continue
		case '}':
			p.pos++
		default:
			return nil, p.syntax("expected ',' or '}' in object")
		}
		break
	}
	members := p.members[first:]
	m := make(map[string]any, len(members))
	for i, mb := range members {
		m[mb.key] = mb.val
		if len(m) != i+1 {
			p.path[p.depth] = pathSeg{key: mb.key, index: -1}
			p.depth++
			return nil, p.fail("duplicate field name")
		}
	}
	clear(members) // let the values go
	p.members = p.members[:first]
	return m, nil
}

func (p *parser) array(depth int) (any, *Error) {
	p.pos++ // '['
	a := make([]any, 0)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return a, nil
	}
	for {
		p.path[p.depth] = pathSeg{index: len(a)}
		p.depth++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.depth--
		a = append(a, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.syntax("")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			return a, nil
		default:
			return nil, p.syntax("expected ',' or ']' in array")
		}
	}
}

func (p *parser) number() (any, *Error) {
	start := p.pos
	end, ok := scanNumber(p.data, start)
	p.pos = end
	if !ok {
		return nil, p.syntax("invalid number")
	}
	return json.Number(p.data[start:end]), nil
}

// scanNumber matches the JSON number grammar at d[i]. It returns the end of
// the number, or with ok false the offset of the first byte that breaks the
// grammar. Both parsers call it, so they accept exactly the same numbers.
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

func (p *parser) str() (string, *Error) {
	d := p.data
	p.pos++ // opening quote
	start := p.pos
	for p.pos < len(d) {
		c := d[p.pos]
		if plainByte[c] {
			p.pos++
			continue
		}
		switch {
		case c == '"':
			s := d[start:p.pos]
			p.pos++
			return s, nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", p.syntax("control character in string")
		default:
			if err := p.utf8Rune(); err != nil {
				return "", err
			}
		}
	}
	return "", p.syntax("")
}

func (p *parser) utf8Rune() *Error {
	r, size := utf8.DecodeRuneInString(p.data[p.pos:])
	if r == utf8.RuneError && size <= 1 {
		return p.syntax("invalid UTF-8 in string")
	}
	p.pos += size
	return nil
}

// strEscaped finishes a string that contains escapes, decoding them the way
// encoding/json does, including its U+FFFD for unpaired surrogates.
func (p *parser) strEscaped(start int) (string, *Error) {
	d := p.data
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case plainByte[c]:
			buf = append(buf, c)
			p.pos++
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.syntax("control character in string")
		case c >= utf8.RuneSelf:
			at := p.pos
			if err := p.utf8Rune(); err != nil {
				return "", err
			}
			buf = append(buf, d[at:p.pos]...)
		default: // backslash
			if p.pos+1 >= len(d) {
				p.pos++
				return "", p.syntax("")
			}
			var bad string
			buf, p.pos, bad = appendEscape(buf, d, p.pos)
			if bad != "" {
				return "", p.syntax(bad)
			}
		}
	}
	return "", p.syntax("")
}

// appendEscape appends what the escape sequence at d[pos] (a backslash
// with at least one byte after it) stands for and returns the position
// after it. A non-empty bad says why the escape is invalid; pos then points
// at the offending byte. Both parsers (the full one and the fast path) use
// it, so they decode escapes identically.
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
