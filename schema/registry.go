package schema

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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

// RawValidator is an optional fast path a [Validator] may implement. Before
// decoding anything, [Registry.Validate] calls AcceptRaw with the raw
// document; true ends validation with acceptance, false runs the full path
// (decoding, [Guard], Validate) as if there were no fast path.
//
// So AcceptRaw answers "accepted" or "not sure", never "rejected": it may
// return true only for a document the full path accepts, whatever the
// bytes, and it may return false for any document at all. Error messages
// come from the full path alone. Like Validate, AcceptRaw is called from
// many goroutines at once and must not keep doc.
type RawValidator interface {
	AcceptRaw(doc []byte) bool
}

// Registry maps allowed schema names to validators. A name that is not
// registered is refused, so clients cannot invent schemas that escape
// validation. Safe for concurrent use; the zero value is an empty registry
// without the built-in schemas.
type Registry struct {
	mu         sync.RWMutex
	validators map[string]Validator
}

// NewRegistry returns a registry holding the built-in schemas,
// [MediaIntentV1] and [MQTTBridgeV1].
func NewRegistry() *Registry {
	return &Registry{validators: map[string]Validator{
		MediaIntentV1: mediaIntentValidator(),
		MQTTBridgeV1:  mqttBridgeValidator(),
	}}
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

// Has reports whether name is registered. Replay uses it to refuse records
// whose schema this build does not know without re-validating documents.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.validators[name]
	return ok
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
// package comment for what acceptance guarantees. A validator that is a
// [RawValidator] gets the first look; a document it does not accept, and
// every document of other validators, takes the full path: JSON syntax and
// shape, [Guard], then the schema's validator. Every error is an [*Error]
// matching [ErrInvalid]; an unregistered name also matches
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
	if rv, ok := v.(RawValidator); ok && rv.AcceptRaw(doc) {
		return nil
	}
	return validateFull(name, v, doc)
}

// validateFull is the full path of [Registry.Validate], the one source of
// its verdicts' reasons and the oracle any fast path is tested against.
func validateFull(name string, v Validator, doc []byte) error {
	obj, err := decodeObject(doc)
	if err == nil {
		err = guard(obj)
	}
	if err != nil {
		err.Schema = name
		return err
	}
	if verr := v.Validate(obj); verr != nil {
		var e *Error
		if errors.As(verr, &e) {
			c := *e
			c.Schema = name
			return &c
		}
		return &Error{Schema: name, Path: "$", Reason: verr.Error(), Err: verr}
	}
	return nil
}

// Fingerprinter is an optional interface of a [Validator]: a stable string
// that differs when the rules differ (a JSON schema's is its definition's
// hash), so replicas can tell they validate alike.
type Fingerprinter interface {
	Fingerprint() string
}

// Fingerprints maps every registered name to its validator's fingerprint:
// [Fingerprinter]'s, or else the validator's Go type, which tells apart
// different validators but not two configurations of one type.
func (r *Registry) Fingerprints() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]string, len(r.validators))
	for n, v := range r.validators {
		if f, ok := v.(Fingerprinter); ok {
			out[n] = f.Fingerprint()
		} else {
			out[n] = fmt.Sprintf("go:%T", v)
		}
	}
	return out
}
