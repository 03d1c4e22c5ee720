package schema

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// The rules below catch payloads that no single string shows: binary data
// spread over siblings, written as numbers or in spaced groups, text that
// is a log or SDP without its usual first line, and values that some JSON
// readers cannot represent. Their bounds are stated in the package
// comment; each is chosen so that the documents the store exists for
// (identifiers, small numbers, a sentence or two) stay far below it.

// maxByteArray is the longest array of byte-sized integers (0 to 255) a
// document may hold: longer, it is a binary payload written as numbers (an
// 8,100-byte JPEG was one). The same bound as minBase64Run's 256
// characters, which are 192 bytes.
const maxByteArray = 256

// maxTextLines is the most lines a string may have: a description of a few
// lines is configuration, a longer text is a log or a document, which the
// specification keeps out of state entries.
const maxTextLines = 4

// minLogLines is how many log-record lines (a timestamp or a level first)
// make a string log text even within maxTextLines.
const minLogLines = 2

// Lanes of pieceLanes: counts of one string's characters by class, 12 bits
// each, so one addition per byte counts all five.
const (
	laneUpper  = 0
	laneLower  = 12
	laneDigit  = 24
	laneSym    = 36 // + / = _ -
	laneNonHex = 48 // letters after f, and the symbols
	laneMask   = 1<<12 - 1
	laneImpure = ^uint64(0)
)

// pieceLanes classifies the bytes of a piece: base64 characters (either
// alphabet) by lane, dots and line breaks as separators (0), anything else
// as laneImpure.
var pieceLanes = func() (t [256]uint64) {
	for c := range t {
		t[c] = laneImpure
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = 1 << laneUpper
		t[c+'a'-'A'] = 1 << laneLower
		if c > 'F' {
			t[c] |= 1 << laneNonHex
			t[c+'a'-'A'] |= 1 << laneNonHex
		}
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = 1 << laneDigit
	}
	for _, c := range "+/=_-" {
		t[c] = 1<<laneSym | 1<<laneNonHex
	}
	for _, c := range ".\r\n" {
		t[c] = 0
	}
	return t
}()

// pieceStats counts the characters of the pieces among a container's
// strings: strings of nothing but base64 characters, dots and line breaks,
// which joined could be one base64 or hex text.
type pieceStats struct {
	pieces                           int
	upper, lower, digit, sym, nonhex int
}

// add counts s if it is a piece and reports whether it was.
func (st *pieceStats) add(s string) bool {
	var sum pieceStats
	for len(s) > 0 {
		chunk := s[:min(len(s), laneMask)] // no lane can overflow
		var acc uint64
		for i := 0; i < len(chunk); i++ {
			x := pieceLanes[chunk[i]]
			if x == laneImpure {
				return false
			}
			acc += x
		}
		sum.addLanes(acc)
		s = s[len(chunk):]
	}
	sum.pieces = 1
	st.pieces += sum.pieces
	st.upper += sum.upper
	st.lower += sum.lower
	st.digit += sum.digit
	st.sym += sum.sym
	st.nonhex += sum.nonhex
	return true
}

// addLanes counts one piece whose pieceLanes sum to acc (over fewer than
// laneMask bytes).
func (st *pieceStats) addLanes(acc uint64) {
	st.pieces++
	st.upper += int(acc >> laneUpper & laneMask)
	st.lower += int(acc >> laneLower & laneMask)
	st.digit += int(acc >> laneDigit & laneMask)
	st.sym += int(acc >> laneSym & laneMask)
	st.nonhex += int(acc >> laneNonHex & laneMask)
}

// splitProblem says whether the pieces, joined, are encoded data: two
// pieces or more, minBase64Run characters or more, and either hex (digits
// and letters a-f only, each at least an eighth) or base64 by its mix
// (upper and lower case at least a quarter each, digits at least a
// sixteenth: random base64 has about 41%, 41% and 16%). The mix is what
// keeps lists of identifiers, labels and camelCase names, which are long
// too when joined, out of it; a list of random mixed-case tokens of 256
// characters or more reads as base64 and is refused.
func (st *pieceStats) splitProblem(across string) string {
	n := st.upper + st.lower + st.digit + st.sym
	if st.pieces < 2 || n < minBase64Run {
		return ""
	}
	kind := ""
	switch {
	case st.nonhex == 0 && st.digit*8 >= n && (st.upper+st.lower)*8 >= n:
		kind = "hex"
	case st.upper*4 >= n && st.lower*4 >= n && st.digit*16 >= n:
		kind = "base64"
	default:
		return ""
	}
	return kind + " split across " + across + " (" + commas(n) + " characters joined)"
}

// commas writes n with thousands separators, as the messages do.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// byteSized reports whether a JSON number is an integer from 0 to 255,
// however it is spelled ("7", "7.0", "7e0").
func byteSized(num string) bool {
	if len(num) <= 3 && num[0] != '-' {
		v := 0
		for i := 0; i < len(num); i++ {
			if num[i] < '0' || num[i] > '9' {
				return byteSizedFloat(num)
			}
			v = v*10 + int(num[i]-'0')
		}
		return v <= 255
	}
	return byteSizedFloat(num)
}

func byteSizedFloat(num string) bool {
	f, err := strconv.ParseFloat(num, 64)
	return err == nil && f >= 0 && f <= 255 && f == math.Trunc(f)
}

// arrayProblem is the guard's rule for an array as a whole: not binary
// data as numbers, not base64 or hex split across its strings.
func arrayProblem(a []any) string {
	if len(a) > maxByteArray {
		bytes := true
		for _, v := range a {
			switch v := v.(type) {
			case json.Number:
				bytes = byteSized(string(v))
			case float64:
				bytes = v >= 0 && v <= 255 && v == math.Trunc(v)
			default:
				bytes = false
			}
			if !bytes {
				break
			}
		}
		if bytes {
			return "an array of " + commas(len(a)) + " byte-sized numbers (binary data)"
		}
	}
	var st pieceStats
	for _, v := range a {
		if s, ok := v.(string); ok {
			st.add(s)
		}
	}
	return st.splitProblem("array elements")
}

// objectProblem is the guard's rule for an object as a whole: not base64
// or hex split across its member names, nor across its string values.
func objectProblem(m map[string]any) string {
	var names, values pieceStats
	for k, v := range m {
		names.add(k)
		if s, ok := v.(string); ok {
			values.add(s)
		}
	}
	if r := names.splitProblem("member names"); r != "" {
		return r
	}
	return values.splitProblem("member values")
}

// numberProblem returns why a JSON number must not be stored: one that is
// not finite in float64 (1e999) is stored by a reader of arbitrary
// precision and refused by encoding/json and JavaScript's JSON.parse
// alike, so a document holding one does not decode everywhere.
func numberProblem(num string) string {
	if len(num) <= 308 && !strings.ContainsAny(num, "eE") {
		return "" // under 309 digits and no exponent: finite
	}
	if f, _ := strconv.ParseFloat(num, 64); !math.IsInf(f, 0) {
		return ""
	}
	if len(num) > 24 {
		num = num[:21] + "..."
	}
	return "is a number that is not finite in float64 (" + num + ")"
}

// floatProblem is numberProblem for a float64 given to Guard by Go code.
func floatProblem(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "is a number that is not finite in float64 (" + strconv.FormatFloat(f, 'g', -1, 64) + ")"
	}
	return ""
}

// textProblem checks a string with a line break: raw SDP by any of its
// lines, log text, and text of more than maxTextLines lines.
func textProblem(s string) string {
	lines, logLines := 0, 0
	sdpLines, sdpStrong := 0, ""
	for rest := s; ; {
		end := strings.IndexAny(rest, "\r\n")
		line := rest
		if end >= 0 {
			line = rest[:end]
		}
		line = strings.TrimLeft(line, " \t")
		if kind := sdpLineKind(line); kind != "" {
			if attr := sdpSecretAttr(line); attr != "" {
				return "looks like raw SDP (" + attr + ")"
			}
			sdpLines++
			if sdpStrong == "" && strings.IndexByte("vom", kind[0]) >= 0 {
				sdpStrong = kind
			}
		}
		if logRecord(line) {
			logLines++
		}
		lines++
		if end < 0 {
			break
		}
		if rest[end] == '\r' && end+1 < len(rest) && rest[end+1] == '\n' {
			end++
		}
		rest = rest[end+1:]
		if rest == "" {
			break // a final line break ends the last line, it starts none
		}
	}
	switch {
	case sdpLines >= 2 && sdpStrong != "":
		return "looks like raw SDP (" + sdpStrong + ")"
	case logLines >= minLogLines:
		return "looks like log text (" + strconv.Itoa(lines) + " lines)"
	case lines > maxTextLines:
		return "is multi-line text (" + strconv.Itoa(lines) + " lines, at most " + strconv.Itoa(maxTextLines) + ")"
	}
	return ""
}

// sdpLineKind returns "x=" for an SDP line of type x (RFC 8866's letters),
// or "".
func sdpLineKind(line string) string {
	if len(line) >= 3 && line[1] == '=' && strings.IndexByte("vosiuepcbtrzkam", line[0]) >= 0 && line[2] != ' ' {
		return line[:2]
	}
	return ""
}

// sdpSecrets are the SDP attributes that carry what a session needs to be
// joined or impersonated: refused on any line, alone or not.
var sdpSecrets = []string{"a=ice-pwd:", "a=ice-ufrag:", "a=fingerprint:", "a=crypto:", "a=candidate:"}

func sdpSecretAttr(line string) string {
	for _, a := range sdpSecrets {
		if len(line) >= len(a) && strings.EqualFold(line[:len(a)], a) {
			return a[:len(a)-1]
		}
	}
	return ""
}

// logLevels start log records.
var logLevels = []string{"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "ERR", "FATAL", "PANIC", "CRITICAL"}

// logRecord reports a line that starts like a log record: an ISO date
// (2026-01-02), a clock time (12:34:56), a level (INFO, [WARN], level=...)
// or a logfmt time (time=, ts=).
func logRecord(line string) bool {
	line = strings.TrimPrefix(line, "[")
	digits := func(s string, pattern string) bool {
		if len(s) < len(pattern) {
			return false
		}
		for i := 0; i < len(pattern); i++ {
			if pattern[i] == 'd' {
				if s[i] < '0' || s[i] > '9' {
					return false
				}
			} else if s[i] != pattern[i] {
				return false
			}
		}
		return true
	}
	if digits(line, "dddd-dd-dd") || digits(line, "dd:dd:dd") {
		return true
	}
	for _, p := range []string{"level=", "time=", "ts=", "lvl="} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	for _, l := range logLevels {
		if strings.HasPrefix(line, l) && (len(line) == len(l) || strings.IndexByte(" :]|", line[len(l)]) >= 0) {
			return true
		}
	}
	return false
}

func isB64URL(c byte) bool {
	return byteClass[c]&clAlnum != 0 || c == '-' || c == '_'
}

// jwtAt reports a JSON Web Token at s[0:], which starts "eyJ" (a JSON
// header's "{" in base64url) at a word boundary: header, payload and
// signature segments joined by dots (the signature may be empty).
func jwtAt(s string) bool {
	seg := func(i int) int {
		j := i
		for j < len(s) && isB64URL(s[j]) {
			j++
		}
		return j
	}
	h := seg(0)
	if h < 10 || h >= len(s) || s[h] != '.' {
		return false
	}
	p := seg(h + 1)
	if p-(h+1) < 4 || p >= len(s) || s[p] != '.' {
		return false
	}
	return true
}

// awsKeyIDAt reports an AWS access key id at s[0:] (at a word boundary):
// AKIA (long-term) or ASIA (temporary) and 16 more upper-case letters or
// digits, ending there.
func awsKeyIDAt(s string) bool {
	if len(s) < 20 || s[0] != 'A' || (s[1] != 'K' && s[1] != 'S') || s[2] != 'I' || s[3] != 'A' {
		return false
	}
	for i := 4; i < 20; i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return len(s) == 20 || byteClass[s[20]]&clAlnum == 0
}

// hasAWSSecret reports a run of exactly 40 characters of standard base64
// without padding, mixed as a secret access key is, anywhere in s.
func hasAWSSecret(s string) bool {
	for i := 0; i < len(s); {
		j := i
		upper, lower, digit := false, false, false
		for j < len(s) && (byteClass[s[j]]&clAlnum != 0 || s[j] == '+' || s[j] == '/') {
			c := s[j]
			upper = upper || c >= 'A' && c <= 'Z'
			lower = lower || c >= 'a' && c <= 'z'
			digit = digit || c >= '0' && c <= '9' || c == '+' || c == '/'
			j++
		}
		if j-i == 40 && upper && lower && digit {
			return true
		}
		i = j + 1
	}
	return false
}

// groupSep marks the bytes that may separate the groups of a spaced
// base64 or hex text ("/9j/ 4AAQ", "ff d8 ff", "0xff, 0xd8").
var groupSep = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, ',': true, ':': true, ';': true}

// groupedProblem finds base64 or hex written in groups: minBase64Run
// characters or more in tokens of base64 characters separated by one or
// two of groupSep's bytes, the tokens either all of one length of two or
// more (the last may be shorter) or all hex of at most 8 digits (an
// optional 0x before each), and at least half of them unlike the token
// before. Words of prose differ in length and are not hex, and a word
// repeated is not data, so no text comes near.
func groupedProblem(s string) string {
	var g group
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && byteClass[s[j]]&clB64 != 0 {
			j++
		}
		if j == i { // a byte that is neither a group's nor a separator
			if r := g.end(); r != "" {
				return r
			}
			i++
			continue
		}
		if !g.add(s[i:j]) {
			if r := g.end(); r != "" {
				return r
			}
			g.add(s[i:j])
		}
		k := j
		for k < len(s) && groupSep[s[k]] {
			k++
		}
		if k-j != 1 && k-j != 2 {
			if r := g.end(); r != "" {
				return r
			}
		}
		i = k
	}
	return g.end()
}

// group is the run of groups groupedProblem is reading.
type group struct {
	total, width, tokens, changes int
	prev                          string
	sameLen, hex, short           bool
}

// add extends the run with tok, or reports that tok cannot extend it.
func (g *group) add(tok string) bool {
	h := strings.TrimPrefix(strings.TrimPrefix(tok, "0x"), "0X")
	isHexTok := len(h) > 0 && len(h) <= 8 && isHex(h)
	if g.tokens == 0 {
		*g = group{total: len(tok), width: len(tok), tokens: 1, prev: tok, sameLen: len(tok) >= 2, hex: isHexTok}
		return true
	}
	same := g.sameLen && !g.short && len(tok) <= g.width
	hex := g.hex && isHexTok
	if !same && !hex {
		return false
	}
	g.sameLen, g.hex = same, hex
	g.short = g.short || len(tok) < g.width
	if tok != g.prev {
		g.changes++
	}
	g.tokens++
	g.total += len(tok)
	g.prev = tok
	return true
}

// end returns the run's verdict and starts a new one.
func (g *group) end() string {
	r := ""
	if g.total >= minBase64Run && g.tokens >= 2 && (g.sameLen || g.hex) && g.changes*2 >= g.tokens-1 {
		what := "base64"
		if g.hex {
			what = "hex"
		}
		r = what + " in spaced groups (" + commas(g.total) + " characters)"
	}
	*g = group{}
	return r
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}
