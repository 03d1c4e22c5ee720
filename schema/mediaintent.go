package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"sync"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

//go:embed media-intent.v1.json
var mediaIntentSchema []byte

// mediaIntentValidator compiles the embedded schema once per process; the
// compiled schema is immutable and shared by every registry.
var mediaIntentValidator = sync.OnceValue(func() Validator {
	v, err := NewJSONSchemaValidator(MediaIntentV1, mediaIntentSchema)
	if err != nil {
		panic("schema: embedded " + MediaIntentV1 + " does not compile: " + err.Error())
	}
	return mediaIntent{schema: v}
})

// mediaIntent adds the publish rule in Go ahead of the JSON Schema, which
// states it too (if/then), so the error says why recording_mode is needed
// rather than only that it is missing: a publish intent without it would
// become a zero-value StartPublication that KeepPeek rejects.
//
// It also answers quickly for the documents writers send (quickAccept):
// running the JSON Schema library costs tens of microseconds and hundreds
// of allocations, too much for the store's write path.
type mediaIntent struct{ schema Validator }

func (m mediaIntent) Validate(doc map[string]any) error {
	if doc["role"] == "publish" {
		if _, ok := doc["recording_mode"]; !ok {
			return &Error{Schema: MediaIntentV1, Path: "$.recording_mode", Reason: "publish intent requires recording_mode"}
		}
	}
	return m.schema.Validate(doc)
}

// quickAccepter is a validator's optional shortcut: quickAccept sees a
// document that has passed the walk (shape rules and [Guard]) and answers
// "accepted" or "not sure", never "rejected". It may return true only for
// a document Validate accepts; anything else, every rejection included,
// goes to Validate, which alone writes error messages.
type quickAccepter interface {
	quickAccept(root *fastjson.Object) bool
}

// mediaIntentQuickSpec is media-intent.v1.json as quickAccept implements
// it: annotations (title, description, $comment) removed, keys sorted. A
// change to the schema switches quickAccept off (TestQuickAcceptEnabled
// fails) until its rules and this constant are brought up to date, so the
// JSON Schema stays the specification.
const mediaIntentQuickSpec = `{"$defs":{"identifier":{"maxLength":128,"minLength":1,"not":{"enum":[".",".."]},"pattern":"^[A-Za-z0-9._-]+$","type":"string"}},"$id":"https://keeppeek.invalid/schema/keeppeek.media-intent.v1","$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"if":{"properties":{"role":{"const":"publish"}},"required":["role"]},"properties":{"desired":{"type":"boolean"},"media_kind":{"enum":["video","audio"]},"output_profile":{"$ref":"#/$defs/identifier"},"parameters":{"additionalProperties":false,"patternProperties":{"^[a-z0-9-]+(\\.[a-zA-Z0-9_-]+)+$":true},"type":"object"},"priority":{"maximum":1000,"minimum":0,"type":"integer"},"recording_mode":{"enum":["inherit","disabled","required"]},"role":{"enum":["publish","subscribe"]},"source_id":{"$ref":"#/$defs/identifier"},"variant_id":{"$ref":"#/$defs/identifier"}},"required":["role","desired","source_id","media_kind"],"then":{"required":["recording_mode"]},"type":"object"}`

// Limits of the schema's identifier definition and priority.
const (
	identifierMaxLen = 128
	priorityMax      = 1000
)

// quickOff says why quickAccept is switched off for the embedded schema,
// "" when it is on.
var quickOff = sync.OnceValue(func() string { return quickOffReason(mediaIntentSchema) })

func quickOffReason(schemaJSON []byte) string {
	canon, err := canonicalSchema(schemaJSON)
	switch {
	case err != nil:
		return "schema does not parse: " + err.Error()
	case canon != mediaIntentQuickSpec:
		return "schema is not the one quickAccept implements: " + canon
	}
	return ""
}

// Top-level members, one bit each.
const (
	fRole = 1 << iota
	fDesired
	fSourceID
	fMediaKind
	fRecordingMode

	requiredFields = fRole | fDesired | fSourceID | fMediaKind
)

func (mediaIntent) quickAccept(root *fastjson.Object) bool {
	if quickOff() != "" {
		return false
	}
	// The walk has rejected duplicate names and every guard offence; what
	// is left are the schema's rules. The patterns are the functions the
	// JSON Schema library runs (fastPatterns).
	var seen uint
	publish, ok := false, true
	root.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		switch view(key) {
		case "role":
			seen |= fRole
			s := quickString(v)
			ok = s == "publish" || s == "subscribe"
			publish = s == "publish"
		case "desired":
			seen |= fDesired
			t := v.Type()
			ok = t == fastjson.TypeTrue || t == fastjson.TypeFalse
		case "source_id":
			seen |= fSourceID
			ok = quickIdentifier(v)
		case "variant_id", "output_profile":
			ok = quickIdentifier(v)
		case "media_kind":
			seen |= fMediaKind
			s := quickString(v)
			ok = s == "video" || s == "audio"
		case "recording_mode":
			seen |= fRecordingMode
			s := quickString(v)
			ok = s == "inherit" || s == "disabled" || s == "required"
		case "priority":
			// Only the plain spelling: "1e2" or "100.0" are integers to
			// the schema too, but no writer sends them.
			n, err := v.Int()
			ok = err == nil && n >= 0 && n <= priorityMax
		case "parameters":
			o, err := v.Object()
			ok = err == nil
			o.Visit(func(name []byte, _ *fastjson.Value) {
				ok = ok && matchParamName(view(name))
			})
		default:
			ok = false
		}
	})
	return ok && seen&requiredFields == requiredFields && (!publish || seen&fRecordingMode != 0)
}

// quickString is v's text, or "" for anything but a string (which no rule
// accepts).
func quickString(v *fastjson.Value) string {
	b, err := v.StringBytes()
	if err != nil {
		return ""
	}
	return view(b)
}

// quickIdentifier is the schema's identifier definition.
func quickIdentifier(v *fastjson.Value) bool {
	s := quickString(v)
	// minLength and maxLength count characters, as the library does; the
	// pattern admits ASCII only, but the count does not rely on it.
	n := utf8.RuneCountInString(s)
	return matchIdentifier(s) && s != "." && s != ".." && n >= 1 && n <= identifierMaxLen
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
