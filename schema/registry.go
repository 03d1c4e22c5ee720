package schema

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/valyala/fastjson"
)

// MediaIntentV1 names the standard orchestration schema, built into every
// registry from [NewRegistry].
const MediaIntentV1 = "keeppeek.media-intent.v1"

// Validator checks a decoded document against one schema. doc holds what
// json.Decoder with UseNumber would produce (map[string]any, []any, string,
// json.Number, bool, nil), so numbers keep their exact spelling, and it has
// already passed [Guard]. A Registry calls Validate from many goroutines at
// once. A returned [*Error] is passed on with its Schema set to the
// registered name; any other error is wrapped in one at path "$".
type Validator interface {
	Validate(doc map[string]any) error
}

// Registry maps allowed schema names to validators. A name that is not
// registered is refused, so clients cannot invent schemas that escape
// validation. Safe for concurrent use; the zero value is an empty registry
// without the built-in schema.
type Registry struct {
	mu         sync.RWMutex
	validators map[string]Validator
}

// NewRegistry returns a registry holding the built-in [MediaIntentV1].
func NewRegistry() *Registry {
	return &Registry{validators: map[string]Validator{MediaIntentV1: mediaIntentValidator()}}
}

// Register allows documents of schema name, checked by v. Names are never
// replaced: a second registration under the same name is almost certainly a
// wiring mistake, and silently swapping rules under stored documents would
// let replay accept what the original write refused (or the reverse).
func (r *Registry) Register(name string, v Validator) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("schema: register %s: nil validator", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.validators[name]; dup {
		return fmt.Errorf("schema: register %s: already registered", name)
	}
	if r.validators == nil {
		r.validators = make(map[string]Validator)
	}
	r.validators[name] = v
	return nil
}

// Names lists the registered schema names in sorted order, for capability
// advertisement and diagnostics.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.validators))
	for n := range r.validators {
		names = append(names, n)
	}
	r.mu.RUnlock()
	slices.Sort(names)
	return names
}

// Validate accepts doc only if it may be stored under schema name; see the
// package comment for what acceptance guarantees. Every error is an
// [*Error] matching [ErrInvalid]; an unregistered name also matches
// [ErrUnknownSchema].
func (r *Registry) Validate(name string, doc []byte) error {
	r.mu.RLock()
	v, ok := r.validators[name]
	r.mu.RUnlock()
	if !ok {
		if err := CheckName(name); err != nil {
			e := err.(*Error)
			e.Err = ErrUnknownSchema
			return e
		}
		return &Error{Schema: name, Path: "schema", Reason: "not registered", Err: ErrUnknownSchema}
	}
	if err := validate(v, doc); err != nil {
		err.Schema = name
		return err
	}
	return nil
}

// validate parses doc, walks it once (shape rules and [Guard]) and lets v
// decide: through its quick answer when it has one and is sure, else on the
// document's Go values, so every reason for a rejection comes from the walk
// or from v.Validate.
func validate(v Validator, doc []byte) *Error {
	d, err := parse(doc)
	if err != nil {
		return err
	}
	defer d.release()
	root, oerr := d.root.Object()
	if oerr != nil {
		return &Error{Path: "$", Reason: "document must be a JSON object, not " + jsonKind(d.root.Type())}
	}
	q, quick := v.(quickAccepter)
	obj, err := d.walk(!quick)
	if err != nil {
		return err
	}
	if quick {
		if q.quickAccept(root) {
			return nil
		}
		obj, _ = d.walk(true)
	}
	return validatorError(v.Validate(obj.(map[string]any)))
}

// validatorError turns what a Validator returned into an *Error, passing
// one on as it is (copied: the Validator may keep it).
func validatorError(verr error) *Error {
	if verr == nil {
		return nil
	}
	var e *Error
	if errors.As(verr, &e) {
		c := *e
		return &c
	}
	return &Error{Path: "$", Reason: verr.Error(), Err: verr}
}

func jsonKind(t fastjson.Type) string {
	switch t {
	case fastjson.TypeArray:
		return "an array"
	case fastjson.TypeString:
		return "a string"
	case fastjson.TypeNumber:
		return "a number"
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return "a boolean"
	}
	return "null"
}
