package schema

import "errors"

// ErrInvalid is matched by every [*Error], so a caller can map every
// rejection to one error code without inspecting the reason.
var ErrInvalid = errors.New("schema: document rejected")

// ErrUnknownSchema is wrapped by the [*Error] that [Registry.Validate] returns
// for a schema name that is not registered; such an error matches
// [ErrInvalid] as well, because to the writer it is just as much a bad
// document.
var ErrUnknownSchema = errors.New("schema: unknown schema")

// Error reports why a document or schema name was rejected, naming the field
// so the writer can fix it without guessing.
type Error struct {
	// Schema is the schema name the document was checked against; empty
	// when no schema was involved (Guard or CheckName on their own).
	Schema string
	// Path locates the offending field as a JSON path such as
	// "$.parameters.password" or `$.parameters["transcoder.scale"]`, or is
	// "schema" when the schema name itself is at fault.
	Path string
	// Reason is a short human-readable explanation; it never repeats the
	// offending value, which may be large or sensitive.
	Reason string
	// Err is the underlying cause when there is one (ErrUnknownSchema, a
	// JSON syntax error, a jsonschema validation error), else nil.
	Err error
}

// Error formats as "schema <name>: <path>: <reason>", leaving out the schema
// part when no schema was involved.
func (e *Error) Error() string {
	if e.Schema == "" {
		return e.Path + ": " + e.Reason
	}
	return "schema " + e.Schema + ": " + e.Path + ": " + e.Reason
}

// Unwrap exposes the underlying cause, notably ErrUnknownSchema.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrInvalid whatever its cause.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
