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
// to every watcher and kept in backups. doc is checked as the JSON that
// encoding/json makes of it (maps in sorted key order), by the same walk
// [Registry.Validate] makes over a document's bytes, so the two cannot
// disagree; a value encoding/json cannot encode is rejected, because it
// could not have come from a document.
//
// The returned *Error names the first offending field in that order, so
// the message is stable from one attempt to the next.
func Guard(doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return &Error{Path: "$", Reason: "not a JSON value: " + err.Error(), Err: err}
	}
	d, perr := parse(b)
	if perr != nil {
		return perr
	}
	defer d.release()
	if _, werr := d.walk(false); werr != nil {
		return werr
	}
	return nil
}

// pathSeg is one step from the root to the value being checked.
type pathSeg struct {
	key   string
	index int // -1 for an object member
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
// large part of the write path's validation time.
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
// string of every document on the write path, so it is a single table-driven
// byte scan; the few bytes that can start a marker ('-' for PEM, 'v' for
// SDP, ';' for data URIs and cookies, 'b' for Bearer and Basic) get a closer
// look where they stand.
func stringProblem(s string) string { return checkString(s, true) }

// checkString is stringProblem for a string that, when markers is false,
// is known to hold no marker (mayHaveMarker): the walk learns that for all
// strings of a document at once.
func checkString(s string, markers bool) string {
	if len(s) < 7 { // shorter than the shortest pattern below
		return ""
	}
	if r := headerProblem(s); r != "" {
		return r
	}
	if len(s) < minBase64Run && (!markers || !mayHaveMarker(s)) {
		return ""
	}
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

// mayHaveMarker reports whether s holds a byte without which no rule past
// the header check can fire in a string shorter than minBase64Run; false
// lets most strings go without the full scan, which costs several times
// more and runs for every string of every write. What each rule needs:
//
//   - a PEM block: "-----BEGIN" holds a B;
//   - raw SDP: "v=0" followed by another line, which needs a line break;
//   - a data URI or a Set-Cookie value: a semicolon;
//   - "Bearer " or "Basic ": a B, or a b followed by an a or an e in either
//     case (strings.EqualFold folds non-ASCII letters too, but a prefix of
//     as many bytes as the ASCII scheme has can only match in ASCII);
//   - a base64 signature (base64Magics): each holds a B or a G, or is
//     "/9j/".
//
// It searches with strings.IndexByte, so that a whole document can be
// cleared at once: the bytes of a document without escapes are all the
// bytes its strings hold. TestMarkersCoverRules holds it to the rules.
func mayHaveMarker(s string) bool {
	for _, c := range []byte{'B', 'G', ';', '\n', '\r'} {
		if strings.IndexByte(s, c) >= 0 {
			return true
		}
	}
	return strings.Contains(s, "/9j/") || hasBaOrBe(s)
}

// hasBaOrBe reports a b followed by an a or an e in either case.
func hasBaOrBe(s string) bool {
	for i := strings.IndexByte(s, 'b'); i >= 0 && i+1 < len(s); {
		if c := s[i+1] | 0x20; c == 'a' || c == 'e' {
			return true
		}
		next := strings.IndexByte(s[i+1:], 'b')
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
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
