package cv

import (
	_ "embed"
	"sync"

	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/intent"
)

// EventSchema names the event document a worker publishes to the event
// catalog.
const EventSchema = "keeppeek.cv-event.v1"

//go:embed cv-event.v1.json
var eventSchemaJSON []byte

var eventCodec = typeddoc.Codec[Event]{Name: EventSchema, JSONSchema: eventSchemaJSON}

// eventRegistry is the registry events are validated through: the guard
// and keeppeek.cv-event.v1, and nothing else. It is the package's own,
// never a store's: event truth lives in the event catalog and router, so
// no registry RegisterSchemas builds can hold this schema, and a store
// refuses a PUT of an event as an unregistered schema.
var eventRegistry = sync.OnceValue(func() *schema.Registry {
	var r schema.Registry // empty: no state document is an event
	if err := eventCodec.Register(&r); err != nil {
		panic("cv: embedded " + EventSchema + " does not compile: " + err.Error())
	}
	return &r
})

// Event is one keeppeek.cv-event.v1 document: a detection of a model
// profile in one frame of a stable source's stream.
type Event struct {
	SourceID  string           `json:"source_id"`
	MediaKind intent.MediaKind `json:"media_kind"`
	// VariantID is the variant actually analysed, as the subscription
	// returned it.
	VariantID    string  `json:"variant_id"`
	Model        string  `json:"model"`
	Label        string  `json:"label"`
	Confidence   float64 `json:"confidence"`
	Box          *Box    `json:"box,omitempty"`
	Frame        uint64  `json:"frame"` // the frame's sequence number in its subscription
	ObservedAtMs int64   `json:"observed_at_ms"`
	Worker       string  `json:"worker"` // the worker instance (Holder) that saw it
}

// EncodeEvent renders ev as a document that passed keeppeek.cv-event.v1
// and the content guard, or says which field did not.
func EncodeEvent(ev Event) ([]byte, error) { return eventCodec.Encode(eventRegistry(), ev) }

// ParseEvent decodes an event document after validating it, for the
// catalog's side.
func ParseEvent(doc []byte) (Event, error) { return eventCodec.Decode(eventRegistry(), doc) }
