package statestore

import (
	"errors"
	"fmt"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/schema"
)

// Code is a result code of the state store, as the wire protocol's
// STATE_STORE_ERROR_CODE_* names it.
type Code int

// Result codes. The numeric values are not a wire format; use String.
const (
	OK Code = iota
	NotFound
	Conflict
	TTLInvalid
	PermissionDenied
	InvalidArgument
	SchemaInvalid
	ValueTooLarge
	QuotaExceeded
	WatchTooBroad
	WatchLimit
	Storage
	Unavailable
)

var codeNames = [...]string{
	OK: "OK", NotFound: "NOT_FOUND", Conflict: "CONFLICT", TTLInvalid: "TTL_INVALID",
	PermissionDenied: "PERMISSION_DENIED", InvalidArgument: "INVALID_ARGUMENT",
	SchemaInvalid: "SCHEMA_INVALID", ValueTooLarge: "VALUE_TOO_LARGE", QuotaExceeded: "QUOTA_EXCEEDED",
	WatchTooBroad: "WATCH_TOO_BROAD", WatchLimit: "WATCH_LIMIT", Storage: "STORAGE", Unavailable: "UNAVAILABLE",
}

// String returns the specification's name for the code.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("CODE(%d)", int(c))
}

// Error is the one error type the store returns from its operations. Match
// a code with errors.Is(err, statestore.ErrConflict) (or any Err* below) or
// read it with errors.As / CodeOf.
type Error struct {
	Code Code
	// Field names the request field or bound at fault: "namespace", "key",
	// "expected_revision", "ttl", "document", "$.recording_mode", "total
	// value bytes", ...
	Field   string
	Message string
	// CurrentRevision is the entry's revision when Code is Conflict (0 when
	// the key does not exist).
	CurrentRevision uint64
	Err             error // the cause, if any
}

func (e *Error) Error() string {
	msg := e.Code.String()
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Code == Conflict {
		msg += fmt.Sprintf(" (current revision %d)", e.CurrentRevision)
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same code, so the Err* sentinels match
// any error of their code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Field == "" && t.Message == ""
}

// Sentinels for errors.Is, one per code.
var (
	ErrNotFound         = &Error{Code: NotFound}
	ErrConflict         = &Error{Code: Conflict}
	ErrTTLInvalid       = &Error{Code: TTLInvalid}
	ErrPermissionDenied = &Error{Code: PermissionDenied}
	ErrInvalidArgument  = &Error{Code: InvalidArgument}
	ErrSchemaInvalid    = &Error{Code: SchemaInvalid}
	ErrValueTooLarge    = &Error{Code: ValueTooLarge}
	ErrQuotaExceeded    = &Error{Code: QuotaExceeded}
	ErrWatchTooBroad    = &Error{Code: WatchTooBroad}
	ErrWatchLimit       = &Error{Code: WatchLimit}
	ErrStorage          = &Error{Code: Storage}
	ErrUnavailable      = &Error{Code: Unavailable}
)

// DocumentError is the cause inside an Open refused (UNAVAILABLE) or a
// backup refused by Restore or RestoreDir (INVALID_ARGUMENT, field
// "backup") because a stored document breaks this build's document rules:
// it names the namespace and key, the journal index or the image, and, in
// Err, the *schema.Error with the field path and the rule. Match it with
// errors.As. See "Stored documents" in the package comment.
type DocumentError = recovery.DocumentError

// CodeOf returns the code of err: OK for nil, the *Error's code, and
// Unavailable for any other error.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unavailable
}

// wrapErr is the *Error for a cause from a package below: err's text is
// the message, and err stays reachable through errors.Is and errors.As.
func wrapErr(code Code, field string, err error) *Error {
	return &Error{Code: code, Field: field, Message: err.Error(), Err: err}
}

func newErr(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ruleErr is the store's answer to a broken identifier rule (package
// rules): INVALID_ARGUMENT naming the rule's field, with its reason.
func ruleErr(err error) error {
	if err == nil {
		// Before re is declared: errors.As makes it escape, and every
		// successful request would allocate it.
		return nil
	}
	var re *rules.Error
	if !errors.As(err, &re) {
		return err
	}
	code := InvalidArgument
	if re.Schema {
		code = SchemaInvalid
	}
	return &Error{Code: code, Field: re.Field, Message: re.Reason, Err: re}
}

// schemaErr turns a schema rejection into SCHEMA_INVALID. The JSON path
// goes in Field alone: the message is the schema's reason and name, so the
// formatted error says the path once.
func schemaErr(err error) *Error {
	var se *schema.Error
	if !errors.As(err, &se) {
		return wrapErr(SchemaInvalid, "document", err)
	}
	field, msg := se.Path, se.Reason
	if field == "" {
		field = "document"
	}
	if se.Schema != "" {
		msg += " (schema " + se.Schema + ")"
	}
	return &Error{Code: SchemaInvalid, Field: field, Message: msg, Err: err}
}
