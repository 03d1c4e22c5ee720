package reconcile

import (
	_ "embed"

	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/lease"
)

// StatusSchema names the observed-status document.
const StatusSchema = "keeppeek.media-status.v1"

//go:embed media-status.v1.json
var statusSchemaJSON []byte

var statusCodec = typeddoc.Codec[Status]{Name: StatusSchema, JSONSchema: statusSchemaJSON}

// RegisterSchemas adds the documents a reconciler writes
// (keeppeek.worker-lease.v1 and keeppeek.media-status.v1) to r. A store
// must be opened with a registry holding them, or it refuses the writes
// (and, on reopen, the replay of what was written).
func RegisterSchemas(r *schema.Registry) error {
	if err := lease.RegisterSchema(r); err != nil {
		return err
	}
	return statusCodec.Register(r)
}

// State is what a worker observed of one intent.
type State string

// States of an observed status.
const (
	// Active: the command succeeded; VariantID is the actual variant.
	Active State = "active"
	// Waiting: the capabilities do not allow acting yet (source without a
	// session, variant not ready); the worker acts when they change.
	Waiting State = "waiting"
	// Invalid: the intent cannot be acted on as written.
	Invalid State = "invalid"
	// Failed: the media server refused the command (a conflict, say).
	Failed State = "failed"
	// Stopped: the intent is no longer desired; nothing is bound.
	Stopped State = "stopped"
)

// Status is the keeppeek.media-status.v1 document.
type Status struct {
	IntentKey      string `json:"intent_key"`
	IntentRevision uint64 `json:"intent_revision"`
	Worker         string `json:"worker"`
	State          State  `json:"state"`
	Reason         string `json:"reason,omitempty"`
	VariantID      string `json:"variant_id,omitempty"`
	BindingID      string `json:"binding_id,omitempty"`
}

// ParseStatus decodes an observed-status document through r.
func ParseStatus(r *schema.Registry, doc []byte) (Status, error) {
	return statusCodec.Decode(r, doc)
}
