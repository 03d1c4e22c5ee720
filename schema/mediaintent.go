package schema

import (
	_ "embed"
	"sync"
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
// become a zero-value StartPublication that KeepPeek rejects. It is also a
// [RawValidator]; see fastpath.go.
type mediaIntent struct{ schema Validator }

func (m mediaIntent) Validate(doc map[string]any) error {
	if doc["role"] == "publish" {
		if _, ok := doc["recording_mode"]; !ok {
			return &Error{Schema: MediaIntentV1, Path: "$.recording_mode", Reason: "publish intent requires recording_mode"}
		}
	}
	return m.schema.Validate(doc)
}
