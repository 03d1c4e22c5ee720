package serialwork

import (
	"context"
	"fmt"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

// Owners is the number of the specification's simulated owner IDs, one
// document each; 30 rounds of Owners operations are its 3,810 per variant.
const Owners = 127

// Key is the one intent key every owner writes, in its own namespace.
const Key = "intents/front-door-video-browser-h264-720p"

// Owner is one of the specification's simulated owner IDs: a user
// principal writing one intent key in its own namespace, by compare-and-set
// on the revision it last wrote.
type Owner struct {
	Principal statestore.Principal
	Namespace string
	// Rev is the revision the owner last wrote, 0 before its first write
	// (which is then create-only).
	Rev uint64
	// Doc is the owner's schema-valid document of harness.DocBytes bytes.
	Doc []byte
}

// NewOwners makes n owners, owner-000 onwards, each with its own document.
func NewOwners(n int) []*Owner {
	owners := make([]*Owner, n)
	for i := range owners {
		id := fmt.Sprintf("owner-%03d", i)
		owners[i] = &Owner{Principal: statestore.Principal{ID: id}, Namespace: "user/" + id, Doc: testdoc.MediaIntent(harness.DocBytes, i)}
	}
	return owners
}

// Request is the owner's next compare-and-set: create-only on the first
// round, then on the revision it last wrote.
func (o *Owner) Request() statestore.PutRequest {
	x := statestore.CreateOnly
	if o.Rev != 0 {
		x = statestore.IfRevision(o.Rev)
	}
	return statestore.PutRequest{Namespace: o.Namespace, Key: Key, Schema: schema.MediaIntentV1, Document: o.Doc, Expect: x}
}

// CAS performs the owner's next compare-and-set on s and records the new
// revision.
func (o *Owner) CAS(s *statestore.Store) error {
	e, err := s.Put(context.Background(), o.Principal, o.Request())
	if err != nil {
		return err
	}
	o.Rev = e.Revision
	return nil
}
