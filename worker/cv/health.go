package cv

import (
	_ "embed"

	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/lease"
)

// HealthSchema names the health document a worker writes for each intent
// it follows, under its own status key.
const HealthSchema = "keeppeek.cv-health.v1"

//go:embed cv-health.v1.json
var healthSchemaJSON []byte

var healthCodec = typeddoc.Codec[Health]{Name: HealthSchema, JSONSchema: healthSchemaJSON}

// RegisterSchemas adds the state documents a worker writes,
// keeppeek.cv-health.v1 and (unless r already holds it, as after
// reconcile.RegisterSchemas) keeppeek.worker-lease.v1, to r. A store must
// be opened with a registry holding them. The event schema is not among
// them: events are never state entries.
func RegisterSchemas(r *schema.Registry) error {
	if !r.Has(lease.Schema) {
		if err := lease.RegisterSchema(r); err != nil {
			return err
		}
	}
	return healthCodec.Register(r)
}

// State is what a worker observed of one intent.
type State string

// States of a health document.
const (
	// Active: subscribed, and the model is analysing the frames.
	Active State = "active"
	// Waiting: the capabilities do not allow subscribing yet (no source
	// session, no ready variant, the model profile not advertised).
	Waiting State = "waiting"
	// Standby: another worker holds the intent's lease.
	Standby State = "standby"
	// Invalid: the intent cannot be acted on as written.
	Invalid State = "invalid"
	// Failed: the media server refused the subscription.
	Failed State = "failed"
	// Stopped: the intent is no longer desired; nothing is analysed.
	Stopped State = "stopped"
)

// Health is the keeppeek.cv-health.v1 document. The counters run from
// when this worker instance began following the intent, across
// resubscriptions.
type Health struct {
	IntentKey      string `json:"intent_key"`
	IntentRevision uint64 `json:"intent_revision"`
	Worker         string `json:"worker"`
	Model          string `json:"model,omitempty"`
	State          State  `json:"state"`
	Reason         string `json:"reason,omitempty"`
	SubscriptionID string `json:"subscription_id,omitempty"`
	VariantID      string `json:"variant_id,omitempty"`
	Counters
}

// Counters are an analysis's running totals.
type Counters struct {
	Frames uint64 `json:"frames"` // frames the model analysed
	// EventsPublished are events that passed validation and that the
	// catalog took.
	EventsPublished uint64 `json:"events_published"`
	// EventsRejected failed validation and were never published.
	EventsRejected uint64 `json:"events_rejected"`
	// PublishFailures passed validation but the catalog refused them.
	PublishFailures uint64 `json:"publish_failures"`
	// LastRejection says why the latest rejected event was refused.
	LastRejection string `json:"last_rejection,omitempty"`
}

// add returns the sum of c and d, with d's rejection if it has one.
func (c Counters) add(d Counters) Counters {
	c.Frames += d.Frames
	c.EventsPublished += d.EventsPublished
	c.EventsRejected += d.EventsRejected
	c.PublishFailures += d.PublishFailures
	if d.LastRejection != "" {
		c.LastRejection = d.LastRejection
	}
	return c
}

// ParseHealth decodes a health document through r.
func ParseHealth(r *schema.Registry, doc []byte) (Health, error) {
	return healthCodec.Decode(r, doc)
}
