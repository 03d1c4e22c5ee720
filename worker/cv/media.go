package cv

import (
	"context"

	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// Capabilities is what the worker reads of ServerCapabilities: reconcile's
// view of sources (their current session, streams and variants), plus the
// model profiles each source may be analysed with. It is read on every
// pass and never cached across passes.
type Capabilities interface {
	reconcile.Capabilities
	// ModelProfiles returns the model profiles source sourceID may be
	// analysed with now; none while it has no session.
	ModelProfiles(sourceID string) []ModelProfile
}

// ModelProfile is an advertised computer-vision model profile: an ID an
// intent names, and the kind of stream it analyses.
type ModelProfile struct {
	ID        string
	MediaKind intent.MediaKind
}

// Media is what the worker asks of the media server: ordinary
// subscriptions, the frames of its own subscriptions, and the event
// catalog and router, where every event it detects goes (never the state
// store).
type Media interface {
	Subscribe(ctx context.Context, req reconcile.SubscribeRequest) (reconcile.Binding, error)
	Unsubscribe(ctx context.Context, subscriptionID string) error
	// Frames returns the frames of a live subscription this principal made.
	// The channel is closed when the subscription ends, whoever ended it.
	Frames(subscriptionID string) (<-chan Frame, error)
	// PublishEvent hands one event, a document of schemaName that passed
	// validation, to the event catalog and router.
	PublishEvent(ctx context.Context, schemaName string, doc []byte) error
}

// Frame is one decoded frame of a subscription, as a model sees it: in a
// simulation its sequence number is all there is to it.
type Frame struct {
	Seq       uint64 // 1, 2, ... within the subscription
	SessionID string // the source session it came from
}
