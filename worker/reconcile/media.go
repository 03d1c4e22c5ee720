package reconcile

import (
	"context"
	"fmt"

	"github.com/keeppeek/statestore/worker/intent"
)

// Capabilities is the embedder's view of the media server's current
// ServerCapabilities. The reconciler reads it on every pass and never
// caches a source session across passes.
type Capabilities interface {
	// Source resolves a stable source ID to what the source advertises now;
	// ok is false while the source has no session.
	Source(sourceID string) (src Source, ok bool)
	// Changed returns a channel closed at the next change of any
	// advertisement. Take it before reading, so no change is missed.
	Changed() <-chan struct{}
}

// Source is one source's current advertisement.
type Source struct {
	ID        string // stable source ID
	SessionID string // the current source session; changes when the source reconnects
	// Streams are the media kinds the source carries.
	Streams []intent.MediaKind
	// Publishable: the source allows a publication (transcoded output) from it.
	Publishable bool
	// Recordable: the source has recording capability, so a publication
	// with recording_mode "required" can succeed.
	Recordable bool
	// Profiles are the output profiles a publication from this source may
	// produce.
	Profiles []Profile
	// Variants are the variants advertised now (MediaVariantCapability).
	Variants []Variant
}

// Profile is an output profile and the codec it produces.
type Profile struct {
	ID    string
	Codec string
}

// Variant is one advertised media variant.
type Variant struct {
	ID        string
	MediaKind intent.MediaKind
	Codec     string
	// Ready: the variant can be subscribed to. Only a ready variant means
	// the stream exists; an intent naming it does not.
	Ready bool
	// Owner is the principal whose publication produces it ("" for the
	// source's own variants).
	Owner string
}

// HasStream reports whether the source carries kind.
func (s Source) HasStream(kind intent.MediaKind) bool {
	for _, k := range s.Streams {
		if k == kind {
			return true
		}
	}
	return false
}

// Variant returns the advertised variant id.
func (s Source) Variant(id string) (Variant, bool) {
	for _, v := range s.Variants {
		if v.ID == id {
			return v, true
		}
	}
	return Variant{}, false
}

// Profile returns the output profile id.
func (s Source) Profile(id string) (Profile, bool) {
	for _, p := range s.Profiles {
		if p.ID == id {
			return p, true
		}
	}
	return Profile{}, false
}

// Media is the ordinary media commands a worker sends, as the principal it
// authenticated as.
type Media interface {
	Subscribe(ctx context.Context, req SubscribeRequest) (Binding, error)
	Unsubscribe(ctx context.Context, subscriptionID string) error
	StartPublication(ctx context.Context, req PublicationRequest) (Binding, error)
	StopPublication(ctx context.Context, publicationID string) error
}

// SubscribeRequest is a Subscribe command.
type SubscribeRequest struct {
	SourceSessionID string
	MediaKind       intent.MediaKind
	// VariantID is the exact variant; "" asks for ordinary automatic
	// selection.
	VariantID string
}

// PublicationRequest is a StartPublication command.
type PublicationRequest struct {
	SourceSessionID string
	MediaKind       intent.MediaKind
	VariantID       string // the output variant to own
	OutputProfile   string
	// RecordingMode is copied from the intent; the zero value is exactly
	// what the reconciler never sends.
	RecordingMode intent.RecordingMode
	// Group, when set, publishes into a group, which needs membership from
	// a successful join.
	Group string
}

// Binding is what a successful command returned: the actual variant.
type Binding struct {
	ID        string // subscription or publication ID
	VariantID string // the variant actually subscribed to or produced
}

// ErrorCode is a media command's error code, as KeepPeek names it.
type ErrorCode string

// Command error codes.
const (
	PublicationRecordingModeInvalid ErrorCode = "PUBLICATION_ERROR_CODE_RECORDING_MODE_INVALID"
	PublicationConflict             ErrorCode = "PUBLICATION_ERROR_CODE_CONFLICT"
	PublicationPermissionDenied     ErrorCode = "PUBLICATION_ERROR_CODE_PERMISSION_DENIED"
	PublicationSourceUnavailable    ErrorCode = "PUBLICATION_ERROR_CODE_SOURCE_UNAVAILABLE"
	PublicationUnsupported          ErrorCode = "PUBLICATION_ERROR_CODE_UNSUPPORTED"
	PublicationNotFound             ErrorCode = "PUBLICATION_ERROR_CODE_NOT_FOUND"
	SubscribeSourceUnavailable      ErrorCode = "SUBSCRIBE_ERROR_CODE_SOURCE_UNAVAILABLE"
	SubscribeVariantUnavailable     ErrorCode = "SUBSCRIBE_ERROR_CODE_VARIANT_UNAVAILABLE"
	SubscribeNotFound               ErrorCode = "SUBSCRIBE_ERROR_CODE_NOT_FOUND"
)

// CommandError is a media command the server refused.
type CommandError struct {
	Command string // "StartPublication", "Subscribe", ...
	Code    ErrorCode
	Message string
}

// Error names the command and its code.
func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Command, e.Code, e.Message)
}

// Is matches another *CommandError with the same code, so
// errors.Is(err, &CommandError{Code: PublicationConflict}) works.
func (e *CommandError) Is(target error) bool {
	t, ok := target.(*CommandError)
	return ok && t.Code == e.Code
}
