// Package typeddoc binds a Go type to a JSON Schema registered in the
// store's schema registry, for the small documents workers write beside
// intents (leases, observed status, preferences).
//
// # Invariants
//
//  1. Encode returns only bytes the registry accepts under the codec's
//     schema name, and Decode only decodes bytes it accepts, so a worker
//     neither writes what the store would reject nor acts on what it would
//     not have stored.
//     Code: Codec.Encode, Codec.Decode.
//     Tests: TestCodec.
package typeddoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/schema/jsonschema"
)

// Codec is the schema name and JSON Schema text of documents of type T.
type Codec[T any] struct {
	Name       string // keeppeek.<name>.v<N>
	JSONSchema []byte
}

// Register adds the codec's schema to r; a store must be opened with a
// registry holding it before such documents can be written or replayed.
func (c Codec[T]) Register(r *schema.Registry) error {
	v, err := jsonschema.NewJSONSchemaValidator(c.Name, c.JSONSchema)
	if err != nil {
		return fmt.Errorf("typeddoc: compile %s: %w", c.Name, err)
	}
	return r.Register(c.Name, v)
}

// Error is a document of the codec's schema that was refused, naming the
// field at fault.
type Error struct {
	Schema string
	Field  string // JSON field name, "document" for the whole
	Err    error
}

// Error names the schema and the field.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Schema, e.Field, e.Err)
}

// Unwrap returns the registry's or the decoder's error.
func (e *Error) Unwrap() error { return e.Err }

// Encode marshals v and validates it through r.
func (c Codec[T]) Encode(r *schema.Registry, v T) ([]byte, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Schema: c.Name, Field: "document", Err: err}
	}
	if err := r.Validate(c.Name, doc); err != nil {
		return nil, c.refused(err)
	}
	return doc, nil
}

// Decode validates doc through r and unmarshals it.
func (c Codec[T]) Decode(r *schema.Registry, doc []byte) (T, error) {
	var v T
	if err := r.Validate(c.Name, doc); err != nil {
		return v, c.refused(err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, &Error{Schema: c.Name, Field: "document", Err: err}
	}
	return v, nil
}

func (c Codec[T]) refused(err error) error {
	field := "document"
	var se *schema.Error
	if errors.As(err, &se) && strings.HasPrefix(se.Path, "$.") {
		field = se.Path[2:]
	}
	return &Error{Schema: c.Name, Field: field, Err: err}
}
