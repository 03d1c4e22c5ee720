package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds how deeply objects and arrays may nest. Desired-state
// documents are flat by nature; a deep document is either a mistake or an
// attempt to make every reader recurse.
const maxDepth = 32

// tooDeep is the reason given for a document nested deeper than maxDepth.
var tooDeep = fmt.Sprintf("nesting deeper than %d", maxDepth)

// minBase64Run is the length from which a run of base64 characters counts as
// a binary payload. 256 characters are 192 bytes: longer than any identifier
// or hash a desired-state document needs, far shorter than any image.
const minBase64Run = 256

// minMagicRun is how long a base64 run that starts with a known image or
// document signature must be before it counts; a signature alone is too
// short to mean anything.
const minMagicRun = 16

// Guard rejects content that a desired-state document must never carry,
// whatever its schema: credentials and binary payloads would be replicated
// to every watcher and kept in backups. doc is a value as produced by
// encoding/json (maps, slices, strings, json.Number or float64, bools, nil);
// anything else is rejected because it could not have come from a document.
//
// The returned *Error names the first offending field; when several fields
// offend, the one reported is the first in sorted key order, so the message
// is stable from one attempt to the next.
func Guard(doc any) error {
	if err := guard(doc); err != nil {
		return err
	}
	return nil
}

func guard(doc any) *Error {
	var w valueWalker
	if err := w.value(doc, 1); err != nil {
		// Map order is random; walk again in sorted order so that a
		// document with several problems always gets the same answer.
		w = valueWalker{sorted: true}
		return w.value(doc, 1)
	}
	return nil
}

// pathSeg is one step from the root to the value being checked.
type pathSeg struct {
	key   string
	index int // -1 for an object member
}

// valueWalker applies the guard to decoded values. It keeps the current path in a fixed array rather than a linked chain
// of stack frames: escape analysis cannot keep pointers passed around a
// recursive call on the stack, and the path is needed only when something is
// rejected.
type valueWalker struct {
	sorted bool
	depth  int
	path   [maxDepth + 1]pathSeg
}

func (w *valueWalker) value(v any, depth int) *Error {
	switch v := v.(type) {
	case map[string]any:
		if depth > maxDepth {
			return w.fail(tooDeep)
		}
		if w.sorted {
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if err := w.member(k, v[k], depth); err != nil {
					return err
				}
			}
			return nil
		}
		for k, child := range v {
			if err := w.member(k, child, depth); err != nil {
				return err
			}
		}
	case []any:
		if depth > maxDepth {
			return w.fail(tooDeep)
		}
		for i, child := range v {
			w.path[w.depth] = pathSeg{index: i}
			w.depth++
			err := w.value(child, depth+1)
			w.depth--
			if err != nil {
				return err
			}
		}
	case string:
		if reason := stringProblem(v); reason != "" {
			return w.fail("value " + reason)
		}
	case json.Number, float64, bool, nil:
	default:
		return w.fail(fmt.Sprintf("%T is not a JSON value", v))
	}
	return nil
}

func (w *valueWalker) member(k string, child any, depth int) *Error {
	w.path[w.depth] = pathSeg{key: k, index: -1}
	w.depth++
	if reason := memberNameProblem(k); reason != "" {
		return w.fail(reason)
	}
	err := w.value(child, depth+1)
	w.depth--
	return err
}

// memberNameProblem is the guard's rule for a member name: not named like a
// credential, and (names being strings too, a blob smuggled in as a name is
// still a blob) no stringProblem.
func memberNameProblem(k string) string {
	if word := credentialWord(k); word != "" {
		return "field name looks like a credential (" + word + ")"
	}
	if reason := stringProblem(k); reason != "" {
		return "field name " + reason
	}
	return ""
}

// nameClean is memberNameProblem(k) == "" for the JSON walk, where clean is
// str's verdict on k.
func nameClean(k string, clean bool) bool {
	return credentialWord(k) == "" && (clean || stringProblem(k) == "")
}

// paramNameClean is nameClean for a member of parameters, which must
// match matchParamName too: one pass over the name does the pattern and
// the normalisation credentialWord needs.
func paramNameClean(k string, clean bool) bool {
	var norm [64]byte
	n, match := paramName(k, &norm)
	if !match {
		return false
	}
	if len(k) > len(norm) {
		return nameClean(k, clean)
	}
	return credentialIn(norm[:n]) == "" && (clean || stringProblem(k) == "")
}

func (w *valueWalker) fail(reason string) *Error {
	return &Error{Path: segsPath(w.path[:w.depth]), Reason: reason}
}

// segsPath renders a path as a JSON path.
func segsPath(segs []pathSeg) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range segs {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		} else {
			appendKey(&b, s.key)
		}
	}
	return b.String()
}

// appendKey uses dot notation where it is unambiguous and bracket notation
// otherwise, so a namespaced parameter such as "transcoder.scale" is not
// mistaken for two levels of nesting.
func appendKey(b *strings.Builder, key string) {
	if isPlainKey(key) {
		b.WriteByte('.')
		b.WriteString(key)
		return
	}
	if len(key) > 64 {
		// A path is for a human to find the field, not to echo a blob.
		key = strings.ToValidUTF8(key[:64], "") + "..."
	}
	b.WriteByte('[')
	b.WriteString(strconv.Quote(key))
	b.WriteByte(']')
}

func isPlainKey(key string) bool {
	if key == "" || len(key) > 64 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// credentialWords are matched anywhere in a normalised member name (lower
// case, separators removed), indexed by first byte so a name is scanned
// once. Substring matching is what catches "x_api_key", "refresh_token" and
// "session_secret"; the price is false positives such as
// "tokens_per_second", which is accepted (see the package comment).
var credentialWords = [256][]string{
	'a': {"apikey", "accesskey", "authorization", "authheader", "authtoken"},
	'b': {"bearer"},
	'c': {"cookie", "credential"},
	'p': {"password", "passwd", "passphrase", "passcode", "privatekey", "privkey"},
	's': {"secret"},
	't': {"token"},
}

// minCredentialWord is the length of the shortest credentialWords entry.
const minCredentialWord = 5

// credentialSuffixes are matched only at the end of a normalised name:
// as substrings they would hit ordinary words ("author", "bypass").
var credentialSuffixes = []string{"pwd", "auth", "jwt"}

// credentialNames are matched only as the whole normalised name.
var credentialNames = []string{"pass", "pw"}

// credentialSym numbers the bytes that occur in credentialWords from 1,
// every other byte being 0. credentialShift, indexed by the symbols of the
// last two bytes of a window of minCredentialWord bytes, says how far the
// window may move on before a word could begin in it, 0 when one may begin
// at its first byte. This is a Wu-Manber search: it visits about one window
// in three, where looking at every position of every member name was a
// large part of the fast path's time.
var credentialSym, credentialShift = func() (sym [256]uint8, shift [32 * 32]uint8) {
	const m = minCredentialWord
	next := uint8(1)
	for _, words := range credentialWords {
		for _, w := range words {
			if len(w) < m {
				panic("schema: credential word " + w + " is shorter than minCredentialWord")
			}
			for i := 0; i < len(w); i++ {
				if sym[w[i]] == 0 {
					if next == 32 {
						panic("schema: too many distinct bytes in credential words")
					}
					sym[w[i]], next = next, next+1
				}
			}
		}
	}
	for i := range shift {
		shift[i] = m - 1
	}
	for _, words := range credentialWords {
		for _, w := range words {
			for j := 0; j+2 <= m; j++ {
				k := int(sym[w[j]])<<5 | int(sym[w[j+1]])
				shift[k] = min(shift[k], uint8(m-2-j))
			}
		}
	}
	return sym, shift
}()

// credentialWord returns the credential word name contains, or "".
func credentialWord(name string) string {
	var buf [64]byte
	return credentialIn(normalizeName(buf[:0], name))
}

// credentialIn is credentialWord for a name already normalised
// (normalizeName).
func credentialIn(n []byte) string {
	// No word begins within credentialShift of the window's start: its
	// first minCredentialWord bytes would hold the window's last two at an
	// offset that made the shift smaller. Windows are visited in order, so
	// the word found is the first in the name, as a scan of every position
	// would find it.
	for i := 0; i+minCredentialWord <= len(n); {
		last := n[i+minCredentialWord-2 : i+minCredentialWord]
		if s := credentialShift[(int(credentialSym[last[0]])<<5|int(credentialSym[last[1]]))&(len(credentialShift)-1)]; s != 0 {
			i += int(s)
			continue
		}
		for _, w := range credentialWords[n[i]] {
			if len(n)-i >= len(w) && n[i+1] == w[1] && string(n[i:i+len(w)]) == w {
				return w
			}
		}
		i++
	}
	if len(n) == 0 || !credentialLast[n[len(n)-1]] {
		return ""
	}
	for _, w := range credentialSuffixes {
		if len(n) >= len(w) && n[len(n)-1] == w[len(w)-1] && string(n[len(n)-len(w):]) == w {
			return w
		}
	}
	for _, w := range credentialNames {
		if string(n) == w {
			return w
		}
	}
	return ""
}

// credentialLast marks the last bytes of credentialSuffixes and
// credentialNames: most names end in none of them, and then neither list
// needs a look.
var credentialLast = func() (t [256]bool) {
	for _, w := range append(slices.Clone(credentialSuffixes), credentialNames...) {
		if w == "" {
			panic("schema: empty credential suffix or name")
		}
		t[w[len(w)-1]] = true
	}
	return t
}()

// normalizeName lower-cases name and drops the separators people put
// between words, so "Api-Key", "api_key" and "API.KEY" all read "apikey".
// Non-ASCII letters are case-folded to their ASCII counterpart where one
// exists (the Kelvin sign K, the long s), so a look-alike spelling cannot
// slip past.
func normalizeName(dst []byte, name string) []byte {
	if len(name) <= cap(dst)-len(dst) {
		// Room for all of name: ASCII goes through a table, without a
		// branch or a capacity check per byte; bytes dropped are written
		// and then overwritten.
		out, n := dst[:cap(dst)], len(dst)
		i := 0
		for ; i < len(name) && name[i] < utf8.RuneSelf; i++ {
			c := name[i]
			out[n] = asciiNorm[c]
			n += int(asciiKeep[c])
		}
		dst, name = out[:n], name[i:]
	}
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == '_' || c == '-' || c == '.' || c == ' ':
				continue
			}
			dst = append(dst, c)
			continue
		}
		r, size := utf8.DecodeRuneInString(name[i:])
		i += size
		if a := asciiFold(r); a != 0 {
			dst = append(dst, a)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// asciiNorm and asciiKeep are normalizeName's ASCII rules as tables.
var asciiNorm, asciiKeep = func() (norm, keep [utf8.RuneSelf]byte) {
	for c := range byte(utf8.RuneSelf) {
		norm[c], keep[c] = c, 1
		switch {
		case c >= 'A' && c <= 'Z':
			norm[c] = c + 'a' - 'A'
		case c == '_' || c == '-' || c == '.' || c == ' ':
			keep[c] = 0
		}
	}
	return norm, keep
}()

// asciiFold returns the lower-case ASCII letter that r case-folds to, or 0.
func asciiFold(r rune) byte {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return byte(unicode.ToLower(f))
		}
	}
	return 0
}

// Byte classes for the single pass over string contents.
const (
	clB64     = 1 << iota // base64 or base64url alphabet, or '=' padding
	clNewline             // line breaks inside wrapped base64 continue a run
	clAlnum               // word characters, for word boundaries
	clSpecial             // may start a marker that needs a closer look
)

var byteClass = func() (t [256]uint8) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= clB64 | clAlnum
		t[c+'a'-'A'] |= clB64 | clAlnum
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= clB64 | clAlnum
	}
	for _, c := range "+/-_=" {
		t[c] |= clB64
	}
	t['\n'] |= clNewline
	t['\r'] |= clNewline
	for _, c := range "-v;bB" {
		t[c] |= clSpecial
	}
	return t
}()

// base64Magics are the base64 spellings of file signatures: JPEG, PNG, GIF,
// RIFF (WebP, WAV, AVI) and PDF.
var base64Magics = []string{"/9j/", "iVBORw0KGgo", "R0lGOD", "UklGR", "JVBERi0"}

// stringProblem returns why s must not be stored, or "". It runs for every
// string the fast path cannot clear and every string of the full path, so
// a short string without any of guardMarkers is cleared with a few
// strings.IndexByte calls, and only the rest gets contentProblem's scan.
func stringProblem(s string) string {
	if len(s) < minGuardedString {
		return ""
	}
	if r := headerProblem(s); r != "" {
		return r
	}
	if len(s) < minBase64Run && !hasMarker(s) {
		return ""
	}
	return contentProblem(s)
}

// contentProblem is stringProblem's rules but the header's: a single
// table-driven byte scan, in which the few bytes that can start a marker
// ('-' for PEM, 'v' for SDP, ';' for data URIs and cookies, 'b' for Bearer
// and Basic) get a closer look where they stand.
func contentProblem(s string) string {
	run, runStart := 0, 0
	prev := uint8(0)
	sawSemicolon := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		cl := byteClass[c]
		if cl&clSpecial != 0 {
			switch c {
			case '-':
				if strings.HasPrefix(s[i:], "-----BEGIN") {
					return "contains a PEM block"
				}
			case 'v':
				if (i == 0 || s[i-1] == '\n') && strings.HasPrefix(s[i:], "v=0") && hasSDPLine(s[i+3:]) {
					return "looks like raw SDP"
				}
			case ';':
				if len(s)-i >= 8 && strings.EqualFold(s[i:i+8], ";base64,") {
					return "contains a base64 data URI"
				}
				sawSemicolon = true
			default: // 'b', 'B'
				if prev&clAlnum == 0 {
					if r := authSchemeProblem(s[i:]); r != "" {
						return r
					}
				}
			}
		}
		switch {
		case cl&clB64 != 0:
			if run == 0 {
				runStart = i
			}
			run++
		case cl&clNewline != 0 && run > 0:
			// Wrapped base64 (MIME, PEM bodies) stays one run.
		default:
			if run >= minMagicRun {
				if r := runProblem(s, runStart, run); r != "" {
					return r
				}
			}
			run = 0
		}
		prev = cl
	}
	if run >= minMagicRun {
		if r := runProblem(s, runStart, run); r != "" {
			return r
		}
	}
	if sawSemicolon && isSetCookie(s) {
		return cookieValue
	}
	return ""
}

func runProblem(s string, start, run int) string {
	if run >= minBase64Run {
		return fmt.Sprintf("contains a base64-like run of %d characters (binary payload)", run)
	}
	if run >= minMagicRun {
		for _, m := range base64Magics {
			if strings.HasPrefix(s[start:], m) {
				return "contains base64-encoded image or file data"
			}
		}
	}
	return ""
}

// hasSDPLine reports whether rest, which follows a "v=0" at the start of a
// line, continues with another SDP line ("o=", "s=", "m=", "a=", ...): "v=0"
// on its own is an ordinary string.
func hasSDPLine(rest string) bool {
	for {
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return false
		}
		rest = rest[nl+1:]
		if len(rest) >= 2 && rest[1] == '=' && strings.IndexByte("omacstb", rest[0]) >= 0 {
			return true
		}
	}
}

// headerPrefixes mark a whole HTTP header line, or a cookie whose name says
// it carries a session. Indexed by the lower-cased first byte so ordinary
// strings cost one table look-up.
var headerPrefixes = [256][]struct{ prefix, reason string }{
	'a': {{"authorization:", authHeader}, {"asp.net_sessionid=", cookieValue}},
	'p': {{"proxy-authorization:", authHeader}, {"phpsessid=", cookieValue}},
	'c': {{"cookie:", cookieValue}, {"connect.sid=", cookieValue}},
	's': {{"set-cookie:", cookieValue}},
	'j': {{"jsessionid=", cookieValue}},
	'_': {{"__secure-", cookieValue}, {"__host-", cookieValue}},
}

const (
	authHeader  = "looks like an Authorization header"
	cookieValue = "looks like an HTTP cookie"
)

// setCookieAttrs appear only in Set-Cookie values.
var setCookieAttrs = []string{"path=", "domain=", "expires=", "max-age=", "httponly", "secure", "samesite="}

func headerProblem(s string) string {
	if len(s) < 3 || !mayBeHeader(s) {
		return ""
	}
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return ""
	}
	t := s[i:]
	first := t[0]
	if first >= 'A' && first <= 'Z' {
		first += 'a' - 'A'
	}
	for _, p := range headerPrefixes[first] {
		if len(t) >= len(p.prefix) && strings.EqualFold(t[:len(p.prefix)], p.prefix) {
			return p.reason
		}
	}
	return ""
}

// isSetCookie reports a Set-Cookie value: name=value; Path=/; HttpOnly ...
func isSetCookie(s string) bool {
	t := strings.TrimLeft(s, " \t")
	semi := strings.IndexByte(t, ';')
	if semi < 0 {
		return false
	}
	eq := strings.IndexByte(t[:semi], '=')
	if eq <= 0 || !isToken(t[:eq]) {
		return false
	}
	for rest := t[semi:]; ; {
		rest = strings.TrimLeft(rest[1:], " ")
		for _, a := range setCookieAttrs {
			if len(rest) >= len(a) && strings.EqualFold(rest[:len(a)], a) {
				return true
			}
		}
		next := strings.IndexByte(rest, ';')
		if next < 0 {
			return false
		}
		rest = rest[next:]
	}
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if byteClass[c]&clAlnum == 0 && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return false
		}
	}
	return true
}

// authSchemeProblem checks s, which starts at a word boundary with 'b' or
// 'B', for an Authorization value: "Bearer <token>" or "Basic <base64>".
// The credential must look machine-made (a digit, a symbol or an inner
// capital) so prose such as "basic settings" or "bearer responsibility"
// passes.
func authSchemeProblem(s string) string {
	var basic bool
	switch {
	case len(s) > 7 && strings.EqualFold(s[:7], "bearer "):
		s = s[7:]
	case len(s) > 6 && strings.EqualFold(s[:6], "basic "):
		s, basic = s[6:], true
	default:
		return ""
	}
	s = strings.TrimLeft(s, " ")
	n, machine := 0, false
scan:
	for ; n < len(s); n++ {
		c := s[n]
		switch {
		case c >= 'a' && c <= 'z':
		case c >= 'A' && c <= 'Z':
			machine = machine || n > 0
		case c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			machine = true
		case !basic && (c == '-' || c == '.' || c == '_' || c == '~'):
			machine = true
		default:
			break scan
		}
	}
	if n < 8 || !machine {
		return ""
	}
	if n < len(s) && s[n] != ' ' && s[n] != '\t' && s[n] != ',' && s[n] != ';' && s[n] != '"' && s[n] != '\'' && s[n] != '\r' && s[n] != '\n' {
		return "" // part of a longer word, not a credential
	}
	if basic {
		if n%4 != 0 {
			return ""
		}
		return "looks like an Authorization header (Basic credentials)"
	}
	return "looks like an Authorization header (Bearer token)"
}

// minGuardedString is the length below which stringProblem finds nothing:
// its shortest pattern is seven bytes.
const minGuardedString = 7

// headerFirst, headerSecond and headerThird have a bit for each prefix
// that headerProblem compares the start of a string with, after spaces and
// tabs (headerPrefixes): a string may match only if the bits of its first
// three bytes meet, which rules out almost every string with three table
// look-ups. EqualFold compares as many bytes of the string as the ASCII
// prefix has, so a match is ASCII throughout and ASCII case is all that
// folds. Derived from headerPrefixes, the tables cannot drift apart from
// it.
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

// guardMarkers are the bytes without which contentProblem finds nothing in
// a string shorter than minBase64Run, each with what must stand around it
// (a check of d at the byte's position j, which keeps within d). What each
// rule needs:
//
//   - a PEM block: "-----BEGIN" holds a B;
//   - raw SDP: "v=0" followed by another line, which needs a line break
//     (not listed: JSON strings hold one only through an escape, and
//     hasMarker looks for it itself);
//   - a data URI or a Set-Cookie value: a semicolon;
//   - "Bearer " or "Basic " in any case: a b or B followed by an a or an e
//     in either case (EqualFold compares as many bytes as the ASCII scheme
//     has, so only ASCII matches);
//   - a base64 signature run (base64Magics): each signature holds a B or a
//     G, or is "/9j/".
//
// FuzzGuardFilters and TestMarkersCoverRules hold contentProblem to this
// list. Those bytes are rare in text and strings.IndexByte finds them many
// bytes at a time, so most strings are cleared without contentProblem's
// byte-by-byte scan; the JSON walk even clears all strings of a document
// at once (guardMarks).
var guardMarkers = [numGuardMarkers]struct {
	c      byte
	around func(d string, j int) bool
}{
	{';', nil},
	{'B', nil},
	{'G', nil},
	{'b', func(d string, j int) bool {
		return j+1 < len(d) && (d[j+1]|0x20 == 'a' || d[j+1]|0x20 == 'e')
	}},
	{'/', func(d string, j int) bool { return strings.HasPrefix(d[j:], "/9j/") }},
}

const numGuardMarkers = 5

// hasMarker reports whether s holds one of guardMarkers or a line break.
func hasMarker(s string) bool {
	if strings.IndexByte(s, '\n') >= 0 {
		return true
	}
	var m guardMarks
	m.reset()
	m.update(s, 0)
	return m.next < len(s)
}

// guardMarks are the positions in a text d of the next occurrence of each
// of guardMarkers. The JSON walk reads strings in document order, so a
// marker is searched for again only once a string has begun past it, and
// the document is scanned about once per marker. A string of
// minGuardedString to minBase64Run bytes that stands in the document
// without escapes (its bytes are the string's) is clean, stringProblem
// certainly finding nothing in it, when no mark falls inside it and it
// does not begin like a header (mayBeHeader): str works that out inline
// for almost every string.
type guardMarks struct {
	next int                  // the lowest of at, or -1 before the first update
	at   [numGuardMarkers]int // len(d) when there is no further occurrence
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
			kind := &guardMarkers[k]
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

// mayBeHeader is false when headerProblem certainly finds nothing in s, a
// string of at least three bytes: the start of every header prefix passes
// the tables.
func mayBeHeader(s string) bool {
	return headerFirst[s[0]]&headerSecond[s[1]]&headerThird[s[2]] != 0
}

// indexFrom returns the position of the first c in d at or after from, or
// len(d) when there is none.
func indexFrom(d string, from int, c byte) int {
	if j := strings.IndexByte(d[from:], c); j >= 0 {
		return from + j
	}
	return len(d)
}
