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
	var p jsonPath
	return guardValue(&p, doc)
}

func guardValue(p *jsonPath, v any) *Error {
	switch v.(type) {
	case map[string]any, []any:
		if p.n >= maxDepth {
			return p.fail(tooDeep)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if reason := objectProblem(v); reason != "" {
			return p.fail(reason)
		}
		// Map order is random: of the offending members, report the least
		// name, which no member past it can displace.
		var first *Error
		var firstKey string
		for k, child := range v {
			if first != nil && k > firstKey {
				continue
			}
			p.push(k, -1)
			var err *Error
			if reason := memberNameProblem(k); reason != "" {
				err = p.fail(reason)
			} else {
				err = guardValue(p, child)
			}
			p.n--
			if err != nil {
				first, firstKey = err, k
			}
		}
		return first
	case []any:
		if reason := arrayProblem(v); reason != "" {
			return p.fail(reason)
		}
		for i, child := range v {
			p.push("", i)
			err := guardValue(p, child)
			p.n--
			if err != nil {
				return err
			}
		}
	case string:
		if reason := stringProblem(v); reason != "" {
			return p.fail("value " + reason)
		}
	case json.Number:
		if reason := numberProblem(string(v)); reason != "" {
			return p.fail("value " + reason)
		}
	case float64:
		if reason := floatProblem(v); reason != "" {
			return p.fail("value " + reason)
		}
	case bool, nil:
	default:
		return p.fail(fmt.Sprintf("%T is not a JSON value", v))
	}
	return nil
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

// nameClean is memberNameProblem(k) == "" given str's verdict on k.
func nameClean(k string, clean bool) bool {
	return credentialWord(k) == "" && (clean || stringProblem(k) == "")
}

// paramNameClean is nameClean for a member of parameters, which must
// match matchParamName too: one pass over the name does the pattern, the
// normalisation credentialWord needs and the counts of names (a name of
// the pattern is always a piece).
func paramNameClean(k string, clean bool, names *pieceStats) bool {
	var norm [64]byte
	n, lanes, match := paramName(k, &norm)
	if !match {
		return false
	}
	if len(k) > len(norm) {
		names.add(k)
		return nameClean(k, clean)
	}
	names.addLanes(lanes)
	return credentialIn(norm[:n]) == "" && (clean || stringProblem(k) == "")
}

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

// AppendMemberPath appends member key to a path as this package's errors
// spell it (Error.Path), for a validator of another package whose errors
// must read alike: dot notation where it is unambiguous, a quoted bracket
// otherwise (so a namespaced parameter such as "transcoder.scale" is not
// mistaken for two levels of nesting), names over 64 bytes cut.
func AppendMemberPath(b *strings.Builder, key string) { appendKey(b, key) }

// appendKey is AppendMemberPath.
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
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// credentialWords are matched anywhere in a normalised member name (lower
// case, separators removed), indexed by first byte so a name is scanned
// once. Substring matching is what catches "x_api_key", "refresh_token" and
// "session_secret"; the price is false positives such as
// "tokens_per_second", which is refused (see the package comment).
var credentialWords = [256][]string{
	'a': {"apikey", "accesskey", "authorization", "authheader", "authtoken"},
	'b': {"bearer"},
	'c': {"cookie", "credential"},
	'p': {"password", "passwd", "passphrase", "passcode", "privatekey", "privkey"},
	's': {"secret"},
	't': {"token"},
}

// minCredentialWord is the length of the shortest credentialWords entry
// (a shorter one makes credentialShift's set-up panic).
const minCredentialWord = 5

// credentialSuffixes are matched only at the end of a normalised name:
// as substrings they would hit ordinary words ("author", "bypass").
var credentialSuffixes = []string{"pwd", "auth", "jwt"}

// credentialNames are matched only as the whole normalised name.
var credentialNames = []string{"pass", "pw"}

// leetA and leetB are the letters a digit or symbol stands for in a name
// spelt to look unlike itself ("passw0rd", "s3cr3t", "t0k3n", "p@$$"), 0
// for the bytes that stand for none; '1' stands for i or l. Every
// credential word, suffix and name also matches with these substituted.
var leetA, leetB = func() (a, b [256]byte) {
	for c, l := range map[byte]byte{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's'} {
		a[c] = l
	}
	b['1'] = 'l'
	return a, b
}()

// leetEqual reports whether normalised bytes n spell w, each byte itself
// or one of leetA and leetB.
func leetEqual(n []byte, w string) bool {
	for k := 0; k < len(w); k++ {
		if c := n[k]; c != w[k] && leetA[c] != w[k] && leetB[c] != w[k] {
			return false
		}
	}
	return true
}

// credentialStarts lists, for each byte, the credential words it may
// begin: those beginning with it or with a letter it stands for.
var credentialStarts = func() (t [256][]string) {
	for c := range 256 {
		t[c] = slices.Clone(credentialWords[c])
		for _, l := range []byte{leetA[c], leetB[c]} {
			if l != 0 {
				t[c] = append(t[c], credentialWords[l]...)
			}
		}
	}
	return t
}()

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
	// A byte that stands for a letter has the letter's symbol; '1' stands
	// for two, so i and l share one (a shared symbol only makes shifts
	// shorter, never skips a word).
	if sym['l'] != 0 && sym['i'] != 0 {
		l := sym['l']
		for c := range sym {
			if sym[c] == l {
				sym[c] = sym['i']
			}
		}
	}
	for c := range 256 {
		if l := leetA[c]; l != 0 {
			sym[c] = sym[l]
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

// credentialLast marks the last bytes of credentialSuffixes and
// credentialNames: most names end in none of them, and then neither list
// needs a look.
var credentialLast = func() (t [256]bool) {
	for _, w := range slices.Concat(credentialSuffixes, credentialNames) {
		for c := range 256 {
			if leetEqual([]byte{byte(c)}, w[len(w)-1:]) {
				t[c] = true
			}
		}
	}
	return t
}()

func credentialWord(name string) string {
	var buf [64]byte
	return credentialIn(normalizeName(buf[:0], name))
}

// credentialIn returns the credential word normalised name n contains, or
// "".
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
		for _, w := range credentialStarts[n[i]] {
			if len(n)-i >= len(w) && leetEqual(n[i:i+len(w)], w) {
				return w
			}
		}
		i++
	}
	if len(n) == 0 || !credentialLast[n[len(n)-1]] {
		return ""
	}
	for _, w := range credentialSuffixes {
		if len(n) >= len(w) && leetEqual(n[len(n)-len(w):], w) {
			return w
		}
	}
	for _, w := range credentialNames {
		if len(n) == len(w) && leetEqual(n, w) {
			return w
		}
	}
	return ""
}

// normalizeName lower-cases name and drops the separators people put
// between words, so "Api-Key", "api_key" and "API.KEY" all read "apikey".
// Non-ASCII letters are case-folded to their ASCII counterpart where one
// exists (the Kelvin sign K, the long s), so a look-alike spelling cannot
// slip past.
func normalizeName(dst []byte, name string) []byte {
	if len(name) <= cap(dst)-len(dst) {
		// Room for all of name: ASCII without a branch or a capacity check
		// per byte; bytes dropped are written and then overwritten.
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
		if c := name[i]; c < utf8.RuneSelf {
			if asciiKeep[c] != 0 {
				dst = append(dst, asciiNorm[c])
			}
			i++
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

// asciiNorm and asciiKeep are normalizeName's rules for ASCII: the byte it
// writes, and whether it writes one.
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

func asciiFold(r rune) byte {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return byte(unicode.ToLower(f))
		}
	}
	return 0
}

// Byte classes of contentProblem's scan.
const (
	clB64     = 1 << iota // base64 or base64url alphabet, or '=' padding
	clNewline             // line breaks inside wrapped base64 continue a run
	clAlnum               // word characters, for word boundaries
	clSpecial             // may start a marker that needs a closer look
)

var byteClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			t[c] = clB64 | clAlnum
		}
	}
	for _, c := range "+/-_=" {
		t[c] |= clB64
	}
	t['\n'], t['\r'] = clNewline, clNewline
	for _, c := range "-;bBAJ" {
		t[c] |= clSpecial
	}
	return t
}()

// base64Magics are the base64 spellings of file signatures: JPEG, PNG, GIF,
// RIFF (WebP, WAV, AVI) and PDF.
var base64Magics = []string{"/9j/", "iVBORw0KGgo", "R0lGOD", "UklGR", "JVBERi0"}

// stringProblem returns why s must not be stored, or "". It runs for every
// string of the full path and every one the fast path cannot clear, so a
// short string without guardMarkers is cleared with a few IndexByte calls
// and only the rest gets contentProblem's scan.
func stringProblem(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		// Refused by C string APIs and Postgres, truncated by others: not
		// the same text in every reader.
		return "contains a NUL character"
	}
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

// contentProblem is stringProblem's rules but the header's in one byte
// scan, in which the few bytes that can start a marker ('-' for PEM, 'v'
// for SDP, ';' for data URIs and cookies, 'b' for Bearer and Basic) get a
// closer look where they stand.
func contentProblem(s string) string {
	run, runStart := 0, 0
	prev := uint8(0)
	sawSemicolon, sawBreak := false, false
	for i := 0; i <= len(s); i++ {
		c, cl := byte(0), uint8(0) // past the end: a byte that ends the run
		if i < len(s) {
			c, cl = s[i], byteClass[s[i]]
		}
		if cl&clSpecial != 0 {
			switch c {
			case '-':
				if strings.HasPrefix(s[i:], "-----BEGIN") {
					return "contains a PEM block"
				}
			case 'A':
				if prev&clAlnum == 0 && awsKeyIDAt(s[i:]) {
					if hasAWSSecret(s) {
						return "holds an AWS access key id and secret"
					}
					return "holds an AWS access key id"
				}
			case 'J':
				if i >= 2 && s[i-2:i] == "ey" && (i == 2 || !isB64URL(s[i-3])) && jwtAt(s[i-2:]) {
					return "holds a JSON Web Token"
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
			sawBreak = true
		default:
			sawBreak = sawBreak || cl&clNewline != 0
			if run >= minMagicRun {
				if r := runProblem(s[runStart:], run); r != "" {
					return r
				}
			}
			run = 0
		}
		prev = cl
	}
	if sawSemicolon && isSetCookie(s) {
		return cookieValue
	}
	if sawBreak {
		if r := textProblem(s); r != "" {
			return r
		}
	}
	if len(s) >= minBase64Run {
		return groupedProblem(s)
	}
	return ""
}

func runProblem(s string, run int) string {
	if run >= minBase64Run {
		return fmt.Sprintf("contains a base64-like run of %d characters (binary payload)", run)
	}
	for _, m := range base64Magics {
		if strings.HasPrefix(s, m) {
			return "contains base64-encoded image or file data"
		}
	}
	return ""
}

// headerPrefixes mark a whole HTTP header line, or a cookie whose name says
// it carries a session, compared in any ASCII case after spaces and tabs.
var headerPrefixes = []struct{ prefix, reason string }{
	{"authorization:", authHeader}, {"proxy-authorization:", authHeader},
	{"cookie:", cookieValue}, {"set-cookie:", cookieValue},
	{"asp.net_sessionid=", cookieValue}, {"phpsessid=", cookieValue}, {"connect.sid=", cookieValue},
	{"jsessionid=", cookieValue}, {"__secure-", cookieValue}, {"__host-", cookieValue},
	// A single SDP line carrying a session's secrets (textProblem reads
	// every line of a longer text).
	{"a=ice-pwd:", "looks like raw SDP (a=ice-pwd)"}, {"a=ice-ufrag:", "looks like raw SDP (a=ice-ufrag)"},
	{"a=fingerprint:", "looks like raw SDP (a=fingerprint)"}, {"a=crypto:", "looks like raw SDP (a=crypto)"},
	{"a=candidate:", "looks like raw SDP (a=candidate)"},
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
	t := strings.TrimLeft(s, " \t")
	for _, h := range headerPrefixes {
		// As many bytes as the ASCII prefix: a match is ASCII throughout.
		if len(t) >= len(h.prefix) && strings.EqualFold(t[:len(h.prefix)], h.prefix) {
			return h.reason
		}
	}
	return ""
}

// isSetCookie reports a Set-Cookie value: name=value; Path=/; HttpOnly...
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
	if n < len(s) && strings.IndexByte(" \t,;\"'\r\n", s[n]) < 0 {
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

// headerBits[i] has a bit for each of headerPrefixes whose byte i is c in
// either case, the lowest bit for any byte after a leading space or tab:
// a string may match a prefix only if the bits of its first three bytes
// meet (mayBeHeader), which rules out almost every string with three table
// look-ups.
var headerBits = func() (t [3][256]uint32) {
	t[0][' '], t[0]['\t'] = 1, 1
	for c := range 256 {
		t[1][c], t[2][c] = 1, 1
	}
	for k, h := range headerPrefixes {
		bit := uint32(2) << k
		if bit == 0 {
			panic("schema: too many header prefixes for headerBits")
		}
		for i := range t {
			c := h.prefix[i]
			t[i][c] |= bit
			t[i][unicode.ToUpper(rune(c))] |= bit
		}
	}
	return t
}()

// mayBeHeader is false when headerProblem certainly finds nothing in s
// (of three bytes or more).
func mayBeHeader(s string) bool {
	return headerBits[0][s[0]]&headerBits[1][s[1]]&headerBits[2][s[2]] != 0
}

// guardMarkers are the bytes without which contentProblem finds nothing in
// a string shorter than minBase64Run, each with what must stand around it
// (a check of d at the byte's position j, which keeps within d). What each
// rule needs:
//
//   - a PEM block: "-----BEGIN" holds a B;
//   - raw SDP over several lines, log text and text of many lines: a line
//     break (not listed: JSON strings hold one only through an escape, and
//     hasMarker looks for it itself; one SDP line is a header prefix);
//   - a JSON Web Token: "eyJ" holds a J after "ey";
//   - an AWS access key id: an A followed by KIA or SIA;
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
	{'J', func(d string, j int) bool { return j >= 2 && d[j-2] == 'e' && d[j-1] == 'y' }},
	{'A', func(d string, j int) bool {
		return j+3 < len(d) && (d[j+1] == 'K' || d[j+1] == 'S') && d[j+2] == 'I' && d[j+3] == 'A'
	}},
}

const numGuardMarkers = 7

// hasMarker reports whether s holds one of guardMarkers or a line break.
func hasMarker(s string) bool {
	if strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0 {
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
// minGuardedString to minBase64Run bytes without escapes is clean,
// stringProblem certainly finding nothing in it, when no mark falls inside
// it and it does not begin like a header: str works that out inline.
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
				if i := strings.IndexByte(d[j:], kind.c); i >= 0 {
					j += i
				} else {
					j = len(d)
				}
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
