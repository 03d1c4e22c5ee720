package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// This file is the accept-only fast path for MediaIntentV1 (see
// [RawValidator] and the package comment). rawScanner.mediaIntent makes one
// pass over the raw bytes and checks everything the full path checks — the
// parser's syntax, UTF-8, depth and duplicate rules, every [Guard] rule on
// every member name and string, and the rules of media-intent.v1.json plus
// the publish rule — without building a value tree. Whenever it meets
// something it does not handle it says "not sure" and the full path decides.
//
// Soundness (fast accepts ⇒ full path accepts) rests on three things:
//   - the JSON rules mirror decode.go byte for byte, and strings are decoded
//     exactly as parser.strEscaped decodes them;
//   - the content rules are the guard's own functions (credentialWord,
//     stringProblem), applied to the decoded text, or shortcuts that only
//     ever answer "certainly clean" where those functions would find
//     nothing (fastguard.go), and the schema's patterns are the very
//     functions the JSON Schema library runs (fastPatterns) or, for
//     parameter names, one tested to agree with it (paramNameNormal);
//   - the schema rules were written from media-intent.v1.json, and the fast
//     path switches itself off unless that document, annotations aside, is
//     still exactly mediaIntentFastSpec.
//
// FuzzFastPathSound holds the fast path to the full path.

// mediaIntentFastSpec is media-intent.v1.json as the fast path implements
// it: annotations (title, description, $comment) removed, keys sorted. A
// change to the schema turns the fast path off (TestFastPathEnabled fails)
// until the rules below and this constant are brought up to date.
const mediaIntentFastSpec = `{"$defs":{"identifier":{"maxLength":128,"minLength":1,"not":{"enum":[".",".."]},"pattern":"^[A-Za-z0-9._-]+$","type":"string"}},"$id":"https://keeppeek.invalid/schema/keeppeek.media-intent.v1","$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"if":{"properties":{"role":{"const":"publish"}},"required":["role"]},"properties":{"desired":{"type":"boolean"},"media_kind":{"enum":["video","audio"]},"output_profile":{"$ref":"#/$defs/identifier"},"parameters":{"additionalProperties":false,"patternProperties":{"^[a-z0-9-]+(\\.[a-zA-Z0-9_-]+)+$":true},"type":"object"},"priority":{"maximum":1000,"minimum":0,"type":"integer"},"recording_mode":{"enum":["inherit","disabled","required"]},"role":{"enum":["publish","subscribe"]},"source_id":{"$ref":"#/$defs/identifier"},"variant_id":{"$ref":"#/$defs/identifier"}},"required":["role","desired","source_id","media_kind"],"then":{"required":["recording_mode"]},"type":"object"}`

// The schema's patterns, run through the same functions the library uses.
const (
	identifierPattern = `^[A-Za-z0-9._-]+$`
	paramNamePattern  = `^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$`
)

// Limits of the identifier definition.
const (
	identifierMinLen = 1
	identifierMaxLen = 128
)

// priorityMax is the priority maximum; its minimum is 0.
const priorityMax = 1000

// Top-level members, one bit each.
const (
	fRole = iota
	fDesired
	fSourceID
	fMediaKind
	fVariantID
	fOutputProfile
	fPriority
	fRecordingMode
	fParameters
	numTopFields
)

var topFieldNames = [numTopFields]string{
	fRole: "role", fDesired: "desired", fSourceID: "source_id", fMediaKind: "media_kind",
	fVariantID: "variant_id", fOutputProfile: "output_profile", fPriority: "priority",
	fRecordingMode: "recording_mode", fParameters: "parameters",
}

const requiredFields = 1<<fRole | 1<<fDesired | 1<<fSourceID | 1<<fMediaKind

// enumValues are every value the enums allow, so the guard need not look
// at them again: newFastPath checks once that all of them pass it.
var enumValues = []string{"publish", "subscribe", "video", "audio", "inherit", "disabled", "required"}

func topField(k string) int {
	switch k {
	case "role":
		return fRole
	case "desired":
		return fDesired
	case "source_id":
		return fSourceID
	case "media_kind":
		return fMediaKind
	case "variant_id":
		return fVariantID
	case "output_profile":
		return fOutputProfile
	case "priority":
		return fPriority
	case "recording_mode":
		return fRecordingMode
	case "parameters":
		return fParameters
	}
	return -1
}

// fastPath holds what the fast path needs, set up once.
type fastPath struct {
	isIdentifier  func(string) bool
	isParamName   func(string) bool
	scratch       sync.Pool // *fastScratch
	keySeed       uint64    // of keyHash, random so that no one can aim at collisions
	enabledReason string    // why the fast path is off, "" when on
}

var mediaIntentFast = sync.OnceValue(func() *fastPath {
	return newFastPath(mediaIntentSchema)
})

// newFastPath returns the fast path for schemaJSON; it is switched off
// (enabledReason set, every answer "not sure") unless schemaJSON is the
// schema the fast path implements and every name and value it lets through
// without a guard check passes the guard.
func newFastPath(schemaJSON []byte) *fastPath {
	fp := &fastPath{
		isIdentifier: fastPatterns[identifierPattern],
		isParamName:  fastPatterns[paramNamePattern],
		keySeed:      rand.Uint64(),
	}
	fp.scratch.New = func() any { return new(fastScratch) }
	canon, err := canonicalSchema(schemaJSON)
	switch {
	case err != nil:
		fp.enabledReason = "schema does not parse: " + err.Error()
	case canon != mediaIntentFastSpec:
		fp.enabledReason = "schema is not the one the fast path implements: " + canon
	case fp.isIdentifier == nil || fp.isParamName == nil:
		fp.enabledReason = "schema patterns missing from fastPatterns"
	}
	for _, s := range topFieldNames {
		if credentialWord(s) != "" || stringProblem(s) != "" {
			fp.enabledReason = "member name " + s + " fails the guard"
		}
	}
	for _, s := range enumValues {
		if stringProblem(s) != "" {
			fp.enabledReason = "enum value " + s + " fails the guard"
		}
	}
	return fp
}

// AcceptRaw implements [RawValidator] for MediaIntentV1.
func (mediaIntent) AcceptRaw(doc []byte) bool {
	fp := mediaIntentFast()
	if fp.enabledReason != "" {
		return false
	}
	s := fp.scratch.Get().(*fastScratch)
	s.reset()
	p := rawScanner{b: doc, d: unsafe.String(unsafe.SliceData(doc), len(doc)), fp: fp, s: s}
	p.marks.reset()
	ok := p.mediaIntent()
	if len(s.slots) > maxPooledSlots {
		s.slots = nil // do not keep what one huge object needed
	}
	fp.scratch.Put(s)
	return ok
}

// fastScratch is the reusable memory of one AcceptRaw call: the buffer for
// strings with escapes and the set of member names seen.
type fastScratch struct {
	buf   []byte
	slots []keySlot // open addressing, len a power of two
	gen   uint32    // slots of other generations are empty
	count int       // keys in slots of this generation
}

// maxPooledSlots bounds the name set a pooled fastScratch keeps (1,024
// names, 32 KiB); documents within the store's size limit rarely need more.
const maxPooledSlots = 2048

type keySlot struct {
	h   uint64
	gen uint32
}

func (s *fastScratch) reset() {
	s.gen++
	s.count = 0
	if s.gen == 0 || s.slots == nil {
		s.gen = 1
		if s.slots == nil {
			s.slots = make([]keySlot, 512)
		} else {
			clear(s.slots)
		}
	}
}

// insert adds h to the set and reports whether it was new. A false answer
// may also be a hash collision; either way the caller is not sure.
func (s *fastScratch) insert(h uint64) bool {
	if 2*(s.count+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.gen != s.gen {
			*sl = keySlot{h: h, gen: s.gen}
			s.count++
			return true
		}
		if sl.h == h {
			return false
		}
	}
}

func (s *fastScratch) grow() {
	old := s.slots
	s.slots = make([]keySlot, 2*len(old))
	mask := uint64(len(s.slots) - 1)
	for _, sl := range old {
		if sl.gen != s.gen {
			continue
		}
		i := sl.h & mask
		for s.slots[i].gen == s.gen {
			i = (i + 1) & mask
		}
		s.slots[i] = sl
	}
}

// rawScanner walks one document. d views the caller's bytes without a
// copy; nothing derived from it outlives the AcceptRaw call, and the
// guard's functions keep nothing of the strings they are given.
type rawScanner struct {
	b      []byte // the document
	d      string // the same bytes
	pos    int
	fp     *fastPath
	s      *fastScratch
	serial uint64 // numbers the objects, to keep their name sets apart
	marks  guardMarks
}

// mediaIntent checks the whole document: one object of MediaIntentV1.
func (p *rawScanner) mediaIntent() bool {
	d := p.d
	p.skipSpace()
	if p.pos >= len(d) || d[p.pos] != '{' {
		return false
	}
	p.pos++
	p.skipSpace()
	var seen uint32
	publish := false
	for {
		if p.pos >= len(d) || d[p.pos] != '"' {
			return false // includes {}, which lacks required members
		}
		k, _, ok := p.str()
		if !ok {
			return false
		}
		// The guard passes every name topField knows (newFastPath).
		f := topField(k)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		if !p.colon() {
			return false
		}
		switch f {
		case fRole:
			v, _, ok := p.strValue()
			if !ok || v != "publish" && v != "subscribe" {
				return false
			}
			publish = v == "publish"
		case fDesired:
			if !p.boolValue() {
				return false
			}
		case fSourceID, fVariantID, fOutputProfile:
			v, clean, ok := p.strValue()
			if !ok || !p.identifier(v, clean) {
				return false
			}
		case fMediaKind:
			v, _, ok := p.strValue()
			if !ok || v != "video" && v != "audio" {
				return false
			}
		case fPriority:
			if !p.priority() {
				return false
			}
		case fRecordingMode:
			v, _, ok := p.strValue()
			if !ok || v != "inherit" && v != "disabled" && v != "required" {
				return false
			}
		case fParameters:
			if p.pos >= len(d) || d[p.pos] != '{' || !p.object(2, true) {
				return false
			}
		}
		p.skipSpace()
		if p.pos >= len(d) {
			return false
		}
		if d[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if d[p.pos] != '}' {
			return false
		}
		p.pos++
		break
	}
	p.skipSpace()
	if p.pos != len(d) || seen&requiredFields != requiredFields {
		return false
	}
	// The Go rule and the schema's if/then alike.
	return !publish || seen&(1<<fRecordingMode) != 0
}

// identifier checks a decoded string against the schema's identifier
// definition and the guard; clean is str's verdict on v.
func (p *rawScanner) identifier(v string, clean bool) bool {
	if !p.fp.isIdentifier(v) || v == "." || v == ".." {
		return false
	}
	// minLength and maxLength count characters, as the library does.
	if n := utf8.RuneCountInString(v); n < identifierMinLen || n > identifierMaxLen {
		return false
	}
	return clean || stringProblem(v) == ""
}

// priority accepts only the plain spelling of an integer in range: "-0",
// "5.0" or "1e2" are integers to the schema, but no writer sends them, so
// the full path may judge them.
func (p *rawScanner) priority() bool {
	start := p.pos
	if !p.number() {
		return false
	}
	n := p.d[start:p.pos]
	if len(n) > 4 {
		return false
	}
	v := 0
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
		v = v*10 + int(n[i]-'0')
	}
	return v <= priorityMax
}

func (p *rawScanner) colon() bool {
	p.skipSpace()
	if p.pos >= len(p.d) || p.d[p.pos] != ':' {
		return false
	}
	p.pos++
	p.skipSpace()
	return true
}

func (p *rawScanner) strValue() (s string, clean, ok bool) {
	if p.pos >= len(p.d) || p.d[p.pos] != '"' {
		return "", false, false
	}
	return p.str()
}

func (p *rawScanner) boolValue() bool {
	if p.pos >= len(p.d) {
		return false
	}
	switch p.d[p.pos] {
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	}
	return false
}

func (p *rawScanner) skipSpace() {
	// Documents written by programs mostly have no white space at all, so
	// one comparison settles the common case.
	for p.pos < len(p.d) && p.d[p.pos] <= ' ' && jsonSpace>>p.d[p.pos]&1 != 0 {
		p.pos++
	}
}

// jsonSpace has a bit for each JSON white space byte.
const jsonSpace = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'

// value checks any JSON value at p.pos (not white space) against the
// guard; depth is the nesting level a container found here would have.
func (p *rawScanner) value(depth int) bool {
	if p.pos >= len(p.d) {
		return false
	}
	switch c := p.d[p.pos]; c {
	case '{':
		return depth <= maxDepth && p.object(depth, false)
	case '[':
		return depth <= maxDepth && p.array(depth)
	case '"':
		v, clean, ok := p.str()
		return ok && (clean || stringProblem(v) == "")
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		return (c == '-' || c >= '0' && c <= '9') && p.number()
	}
}

func (p *rawScanner) literal(lit string) bool {
	if len(p.d)-p.pos < len(lit) || p.d[p.pos:p.pos+len(lit)] != lit {
		return false
	}
	p.pos += len(lit)
	return true
}

// object checks the object at p.pos; paramNames applies the parameters
// member-name pattern (patternProperties with additionalProperties false).
func (p *rawScanner) object(depth int, paramNames bool) bool {
	d := p.d
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(d) && d[p.pos] == '}' {
		p.pos++
		return true
	}
	p.serial++
	mix := p.serial * 0x9e3779b97f4a7c15
	for {
		if p.pos >= len(d) || d[p.pos] != '"' {
			return false
		}
		k, clean, ok := p.str()
		if !ok {
			return false
		}
		if paramNames {
			// The pattern and the name's normal form for credentialWord
			// in one pass: every parameter name needs both.
			var norm [64]byte
			n, match, long := paramNameNormal(k, &norm)
			if long {
				match = p.fp.isParamName(k) && credentialWord(k) == ""
			} else {
				match = match && credentialIn(norm[:n]) == ""
			}
			if !match {
				return false
			}
		} else if credentialWord(k) != "" {
			return false
		}
		if !clean && stringProblem(k) != "" {
			return false
		}
		// Equal hashes mean a duplicate or, rarely, a collision: not sure.
		if !p.s.insert(keyHash(k, p.fp.keySeed) ^ mix) {
			return false
		}
		if !p.colon() || !p.value(depth+1) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(d) {
			return false
		}
		switch d[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			return true
		default:
			return false
		}
	}
}

func (p *rawScanner) array(depth int) bool {
	d := p.d
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(d) && d[p.pos] == ']' {
		p.pos++
		return true
	}
	for {
		if !p.value(depth + 1) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(d) {
			return false
		}
		switch d[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			return true
		default:
			return false
		}
	}
}

// number accepts the JSON number grammar, as parser.number.
func (p *rawScanner) number() bool {
	end, ok := scanNumber(p.d, p.pos)
	if ok {
		p.pos = end
	}
	return ok
}

// str returns the decoded contents of the string at p.pos, as parser.str
// would. Without escapes that is a substring of the document; with escapes
// it is the scratch buffer, valid until the next call.
//
// clean true promises that stringProblem has nothing to say about the
// string; false only means "not shown" (always so after an escape), and the
// caller asks stringProblem itself. See fastguard.go.
func (p *rawScanner) str() (s string, clean, ok bool) {
	d, b := p.d, p.b
	i := p.pos + 1 // opening quote
	start := i
	for {
		// Eight bytes at a time up to the first that is not plainByte:
		// most of a document is string contents, and most string contents
		// are plain ASCII.
		for i+8 <= len(b) {
			if m := notPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(d) {
			return "", false, false
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
			if len(s) < minGuardedString {
				return s, true, true
			}
			if p.marks.next < start {
				p.marks.update(d, start)
			}
			clean = p.marks.next >= i && len(s) < minBase64Run
			if clean && headerFirst[s[0]]&headerSecond[s[1]]&headerThird[s[2]] != 0 {
				clean = headerProblem(s) == ""
			}
			return s, clean, true
		case c == '\\':
			p.pos = i
			s, ok = p.strEscaped(start)
			return s, false, ok
		case c < 0x20:
			return "", false, false
		default:
			r, size := utf8.DecodeRuneInString(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false, false
			}
			i += size
		}
	}
}

// keyHash hashes a member name for the set of names seen. Equal names hash
// equally; unequal ones may collide, which only makes the caller unsure.
// It is maphash's job done inline, eight bytes at a time: names are short,
// and a call per name showed in profiles. Up to 24 bytes there is no loop,
// whose end would be mispredicted as often as not.
func keyHash(k string, seed uint64) uint64 {
	h := seed ^ uint64(len(k))*0x9e3779b97f4a7c15
	switch n := len(k); {
	case n > 24:
		for s := k; len(s) > 8; s = s[8:] {
			h = hashMix(h ^ load64(s))
		}
		h ^= load64(k[n-8:]) // overlapping the word before if need be
	case n >= 8:
		// Three words that together cover every byte.
		h = hashMix(hashMix(h^load64(k))^load64(k[(n-8)/2:])) ^ load64(k[n-8:])
	case n >= 4:
		s := k[n-4:]
		h ^= uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
			uint64(s[0])<<32 | uint64(s[1])<<40 | uint64(s[2])<<48 | uint64(s[3])<<56
	case n > 0:
		h ^= uint64(k[0]) | uint64(k[n/2])<<8 | uint64(k[n-1])<<16
	}
	return hashMix(hashMix(h))
}

// load64 reads the first eight bytes of s, little endian (the compiler
// makes it one load).
func load64(s string) uint64 {
	s = s[:8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hashMix spreads every bit of h over the higher ones and folds the high
// bits back down (splitmix64's multiplier), so that the low bits the name
// set indexes by depend on the whole name.
func hashMix(h uint64) uint64 {
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// notPlain has the top bit set in the lowest byte of x (little endian)
// that is not plainByte — a quote, a backslash, a control character or
// non-ASCII — and is zero when there is none. Each subtraction sets a
// byte's top bit when that byte is below the subtrahend (0x20 for control
// characters, 1 after XOR for the quote and the backslash); borrows can set
// more top bits, but only above a byte that really is not plain, and
// non-ASCII bytes have the top bit set already.
func notPlain(x uint64) uint64 {
	q := x ^ (lsbs * '"')
	bs := x ^ (lsbs * '\\')
	return (x | (x - lsbs*0x20) | (q - lsbs) | (bs - lsbs)) & msbs
}

// strEscaped is parser.strEscaped writing into the scratch buffer.
func (p *rawScanner) strEscaped(start int) (string, bool) {
	d := p.d
	buf := append(p.s.buf[:0], d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case plainByte[c]:
			buf = append(buf, c)
			p.pos++
		case c == '"':
			p.pos++
			p.s.buf = buf // keep what it grew to
			return unsafe.String(unsafe.SliceData(buf), len(buf)), true
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			buf = append(buf, d[p.pos:p.pos+size]...)
			p.pos += size
		default: // backslash
			if p.pos+1 >= len(d) {
				return "", false
			}
			var bad string
			if buf, p.pos, bad = appendEscape(buf, d, p.pos); bad != "" {
				return "", false
			}
		}
	}
	return "", false
}

// canonicalSchema renders a JSON Schema document with its annotations
// (title, description, $comment) removed and keys sorted, so two documents
// that differ only in explanations compare equal.
func canonicalSchema(src []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	stripAnnotations(v)
	b, err := json.Marshal(v)
	return string(b), err
}

// stripAnnotations removes annotations from schema s and every subschema
// below it, leaving values of other keywords (enum, const, ...) alone.
func stripAnnotations(s any) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	delete(m, "title")
	delete(m, "description")
	delete(m, "$comment")
	for k, v := range m {
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if sub, ok := v.(map[string]any); ok {
				for _, c := range sub {
					stripAnnotations(c)
				}
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if list, ok := v.([]any); ok {
				for _, c := range list {
					stripAnnotations(c)
				}
			}
		case "not", "if", "then", "else", "items", "contains", "additionalProperties",
			"propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems":
			stripAnnotations(v)
		}
	}
}
