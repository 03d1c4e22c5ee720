package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"unicode/utf8"
)

//go:embed media-intent.v1.json
var mediaIntentSchema []byte

// mediaIntentValidator is the built-in validator; it holds nothing, so
// every registry shares it and nothing is set up before a document comes.
func mediaIntentValidator() Validator { return mediaIntent{} }

// mediaIntent is media-intent.v1.json written in Go (mediaIntentRules), so
// no JSON Schema engine is linked for it, with the publish rule ahead of
// it, which the schema states too (if/then), so the error says why
// recording_mode is needed rather than only that it is missing: a publish
// intent without it would become a zero-value StartPublication that
// KeepPeek rejects. It is also a [RawValidator]: one check-mode walk
// applies the reader's rules and the guard to every byte and this schema's
// rules to the top-level members (topMember).
type mediaIntent struct{}

func (m mediaIntent) Validate(doc map[string]any) error {
	if doc["role"] == "publish" {
		if _, ok := doc["recording_mode"]; !ok {
			return &Error{Schema: MediaIntentV1, Path: "$.recording_mode", Reason: "publish intent requires recording_mode"}
		}
	}
	return mediaIntentRules(doc)
}

// mediaIntentFastSpec is media-intent.v1.json as the fast path implements
// it: annotations (title, description, $comment) removed, keys sorted. A
// change to the schema turns the fast path off (TestFastPathEnabled fails)
// until the rules below and this constant are brought up to date.
const mediaIntentFastSpec = `{"$defs":{"identifier":{"maxLength":128,"minLength":1,"not":{"enum":[".",".."]},"pattern":"^[A-Za-z0-9._-]+$","type":"string"}},"$id":"https://keeppeek.invalid/schema/keeppeek.media-intent.v1","$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"if":{"properties":{"role":{"const":"publish"}},"required":["role"]},"properties":{"desired":{"type":"boolean"},"media_kind":{"enum":["video","audio"]},"output_profile":{"$ref":"#/$defs/identifier"},"parameters":{"additionalProperties":false,"patternProperties":{"^[a-z0-9-]+(\\.[a-zA-Z0-9_-]+)+$":true},"type":"object"},"priority":{"maximum":1000,"minimum":0,"type":"integer"},"recording_mode":{"enum":["inherit","disabled","required"]},"role":{"enum":["publish","subscribe"]},"source_id":{"$ref":"#/$defs/identifier"},"variant_id":{"$ref":"#/$defs/identifier"}},"required":["role","desired","source_id","media_kind"],"then":{"required":["recording_mode"]},"type":"object"}`

// Limits of the identifier definition and of priority (whose minimum is 0).
const (
	identifierMinLen = 1
	identifierMaxLen = 128
	priorityMax      = 1000
)

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

// topEnums are the values of the enum members; newFastPath checks once that
// the guard passes all of them and every name of topFieldNames, so that
// neither needs a look of the guard again.
var topEnums = [numTopFields][]string{
	fRole:          {"publish", "subscribe"},
	fMediaKind:     {"video", "audio"},
	fRecordingMode: {"inherit", "disabled", "required"},
}

const requiredFields = 1<<fRole | 1<<fDesired | 1<<fSourceID | 1<<fMediaKind

// topField is the index in topFieldNames of k, or -1: a switch, which is
// markedly faster than a search of the table for every member.
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
	scratch       sync.Pool // *scratch
	keySeed       uint64
	enabledReason string // why the fast path is off, "" when on
}

var mediaIntentFast = sync.OnceValue(func() *fastPath {
	return newFastPath(mediaIntentSchema)
})

// newFastPath returns the fast path for schemaJSON; it is switched off
// (enabledReason set, every answer "not sure") unless schemaJSON is the
// schema the fast path implements and every name and value it lets through
// without a guard check passes the guard.
func newFastPath(schemaJSON []byte) *fastPath {
	fp := &fastPath{keySeed: rand.Uint64()}
	fp.scratch.New = func() any { return new(scratch) }
	canon, err := canonicalSchema(schemaJSON)
	switch {
	case err != nil:
		fp.enabledReason = "schema does not parse: " + err.Error()
	case canon != mediaIntentFastSpec:
		fp.enabledReason = "schema is not the one the fast path implements: " + canon
	}
	for f, s := range topFieldNames {
		if memberNameProblem(s) != "" {
			fp.enabledReason = "member name " + s + " fails the guard"
		}
		for _, v := range topEnums[f] {
			if stringProblem(v) != "" {
				fp.enabledReason = "enum value " + v + " fails the guard"
			}
		}
	}
	return fp
}

// AcceptRaw implements [RawValidator] for MediaIntentV1: true only for one
// object of MediaIntentV1 that the full path accepts too; anything the
// walk does not handle is "not sure".
func (mediaIntent) AcceptRaw(doc []byte) bool {
	fp := mediaIntentFast()
	if fp.enabledReason != "" {
		return false
	}
	s := fp.scratch.Get().(*scratch)
	p := checker(doc, s, fp.keySeed)
	p.skipSpace()
	ok := p.topObject() && p.end() &&
		p.seen&requiredFields == requiredFields &&
		(!p.publish || p.seen&(1<<fRecordingMode) != 0) // the Go rule and the schema's if/then alike
	s.trim()
	fp.scratch.Put(s)
	return ok
}

// topObject reads the document's object, its members by this schema's
// rules. A loop of its own rather than a mode of object, which would cost
// the whole walk some 5%.
func (p *walker) topObject() bool {
	if p.pos >= len(p.d) || p.d[p.pos] != '{' {
		return false
	}
	p.pos++
	p.skipSpace()
	// The guard's objectProblem: the names are fixed, and the string
	// values can join into minBase64Run characters only through long
	// identifiers, which no writer sends; then the full path judges.
	strLen := 0
	for more := true; more; {
		if p.pos >= len(p.d) || p.d[p.pos] != '"' {
			return false // includes {}, which lacks required members
		}
		k, _, ok := p.str()
		f := topField(k)
		if !ok || f < 0 || p.seen&(1<<f) != 0 || !p.separator(':') {
			return false
		}
		p.seen |= 1 << f
		switch f {
		case fRole, fMediaKind, fRecordingMode:
			// An enum value needs no guard (newFastPath).
			if p.pos >= len(p.d) || p.d[p.pos] != '"' {
				return false
			}
			v, _, ok := p.str()
			strLen += len(v)
			switch f {
			case fRole:
				p.publish = v == "publish"
				ok = ok && (p.publish || v == "subscribe")
			case fMediaKind:
				ok = ok && (v == "video" || v == "audio")
			default:
				ok = ok && (v == "inherit" || v == "disabled" || v == "required")
			}
			if !ok {
				return false
			}
		case fDesired:
			if !p.literal("true", nil) && !p.literal("false", nil) {
				return false
			}
		case fSourceID, fVariantID, fOutputProfile:
			if !p.identifier() {
				return false
			}
			strLen += len(p.strVal)
		case fPriority:
			if !p.priority() {
				return false
			}
		case fParameters:
			if p.pos >= len(p.d) || p.d[p.pos] != '{' || !p.object(2, true) {
				return false
			}
		}
		if more = p.separator(','); !more && !p.closing('}', "") {
			return false
		}
	}
	return strLen < minBase64Run
}

// identifier checks the string value at p.pos against the schema's
// identifier definition and the guard.
func (p *walker) identifier() bool {
	if p.pos >= len(p.d) || p.d[p.pos] != '"' {
		return false
	}
	v, clean, ok := p.str()
	p.strVal = v
	if !ok || !matchIdentifier(v) || v == "." || v == ".." {
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
func (p *walker) priority() bool {
	start := p.pos
	if !p.number() || p.pos-start > 4 {
		return false
	}
	v := 0
	for _, c := range []byte(p.d[start:p.pos]) {
		if c < '0' || c > '9' {
			return false
		}
		v = v*10 + int(c-'0')
	}
	return v <= priorityMax
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

// stripAnnotations removes annotations from schema s and its subschemas
// under the keywords mediaIntentFastSpec uses: under any other keyword,
// annotations or not, the schema cannot equal it.
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
		case "properties", "patternProperties", "$defs":
			sub, _ := v.(map[string]any)
			for _, c := range sub {
				stripAnnotations(c)
			}
		case "not", "if", "then":
			stripAnnotations(v)
		}
	}
}

var mediaIntentFingerprint = sync.OnceValue(func() string {
	return builtinFingerprint("mediaIntent", mediaIntentSchema)
})

// Fingerprint names the Go rules' version and hashes the embedded JSON
// schema they implement: the wrapper's own rules come with the build.
func (mediaIntent) Fingerprint() string { return mediaIntentFingerprint() }
