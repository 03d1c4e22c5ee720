package intent

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
)

// Schema is the schema name every intent is stored under.
const Schema = schema.MediaIntentV1

// Role says whether the intent asks for a publication or a subscription.
type Role string

// Roles of an intent.
const (
	Publish   Role = "publish"
	Subscribe Role = "subscribe"
)

// MediaKind is the kind of stream the intent is about.
type MediaKind string

// Media kinds.
const (
	Video MediaKind = "video"
	Audio MediaKind = "audio"
)

// RecordingMode is what a publish intent asks of recording. The zero value
// is "no mode given", which is never valid for a publish intent.
type RecordingMode string

// Recording modes a publish intent may carry.
const (
	RecordingInherit  RecordingMode = "inherit"
	RecordingDisabled RecordingMode = "disabled"
	RecordingRequired RecordingMode = "required"
)

// Valid reports whether m is one of the three modes the specification names.
func (m RecordingMode) Valid() bool {
	switch m {
	case RecordingInherit, RecordingDisabled, RecordingRequired:
		return true
	}
	return false
}

// Intent is one keeppeek.media-intent.v1 document.
type Intent struct {
	Role      Role      `json:"role"`
	Desired   bool      `json:"desired"`
	SourceID  string    `json:"source_id"`
	MediaKind MediaKind `json:"media_kind"`
	// VariantID names the exact variant; empty lets a subscriber's
	// automatic selection choose, and lets a publisher name its output by
	// OutputProfile alone.
	VariantID     string        `json:"variant_id,omitempty"`
	OutputProfile string        `json:"output_profile,omitempty"`
	Priority      int           `json:"priority,omitempty"`
	RecordingMode RecordingMode `json:"recording_mode,omitempty"`
	// Parameters is service-specific declarative configuration; member
	// names are namespaced, such as "transcoder.scale".
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
}

// ValidationError is an intent a worker must not act on (or write),
// naming the field at fault.
type ValidationError struct {
	Field  string // JSON field name, e.g. "recording_mode"
	Reason string
	Err    error // the schema registry's *schema.Error, when it decided
}

// Error names the field and the reason.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("media intent: %s: %s", e.Field, e.Reason)
}

// Unwrap returns the registry's error, if any.
func (e *ValidationError) Unwrap() error { return e.Err }

// Check applies the worker-side rules that do not need the registry: the
// role is known and a publish intent carries a valid recording mode. It is
// what stands between a decoded intent and a StartPublication.
func (in Intent) Check() error {
	switch in.Role {
	case Publish:
		if !in.RecordingMode.Valid() {
			reason := "publish intent requires recording_mode (inherit, disabled or required)"
			if in.RecordingMode != "" {
				reason = fmt.Sprintf("unknown recording_mode %q (want inherit, disabled or required)", string(in.RecordingMode))
			}
			return &ValidationError{Field: "recording_mode", Reason: reason}
		}
	case Subscribe:
	default:
		return &ValidationError{Field: "role", Reason: fmt.Sprintf("unknown role %q (want publish or subscribe)", string(in.Role))}
	}
	if in.SourceID == "" {
		return &ValidationError{Field: "source_id", Reason: "required"}
	}
	return nil
}

// codec validates through the registry; the schema itself is built in.
var codec = typeddoc.Codec[Intent]{Name: Schema}

// Encode renders the intent as a document the registry accepts, or a
// *ValidationError naming the field the store would reject.
func Encode(reg *schema.Registry, in Intent) ([]byte, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	doc, err := codec.Encode(reg, in)
	if err != nil {
		return nil, refused(err)
	}
	return doc, nil
}

// Parse decodes a stored document after the registry accepts it, then
// applies Check, so a document some other registry let through still
// cannot reach a media command with a missing recording mode.
func Parse(reg *schema.Registry, doc []byte) (Intent, error) {
	in, err := codec.Decode(reg, doc)
	if err != nil {
		return Intent{}, refused(err)
	}
	return in, in.Check()
}

// refused turns the codec's error into a ValidationError on its field.
func refused(err error) error {
	field := "document"
	var te *typeddoc.Error
	if errors.As(err, &te) {
		field = te.Field
	}
	return &ValidationError{Field: field, Reason: "rejected by " + Schema, Err: err}
}
