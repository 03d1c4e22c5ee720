// Package grouppref stores a client's group preferences (preferred group,
// local mute layout, selected audio device) in its private state
// namespace, user/<owner-id>/.
//
// # Invariants
//
//  1. A preference is only a preference. It is written under the client's
//     own user namespace, never under group/ (which non-administrators
//     cannot write), and nothing reads it as membership or permission:
//     those facts come only from the media server's GroupState after a
//     successful join. So an expired preference or a malicious shared-state
//     write can never become a media authorization decision.
//     Code: Namespace, Save, Load, Parse.
//     Tests: TestScenario6PreferredGroupGrantsNothing, TestSaveConflictAndRejects.
package grouppref

import (
	"context"
	_ "embed"
	"errors"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// Schema names the preference document.
const Schema = "keeppeek.group-preference.v1"

// Key is where a client's preferences live in its user namespace.
const Key = "preferences/group"

//go:embed group-preference.v1.json
var schemaJSON []byte

var codec = typeddoc.Codec[Preferences]{Name: Schema, JSONSchema: schemaJSON}

// RegisterSchema adds keeppeek.group-preference.v1 to r.
func RegisterSchema(r *schema.Registry) error { return codec.Register(r) }

// Preferences is the keeppeek.group-preference.v1 document.
type Preferences struct {
	PreferredGroup string   `json:"preferred_group,omitempty"`
	MuteLayout     []string `json:"mute_layout,omitempty"`
	AudioDevice    string   `json:"audio_device,omitempty"`
}

// Namespace is owner's private namespace.
func Namespace(owner string) string { return "user/" + owner }

// Load reads owner's preferences; none stored is the zero value.
func Load(ctx context.Context, c stateclient.Client, reg *schema.Registry, owner string) (Preferences, uint64, error) {
	e, err := c.Get(ctx, Namespace(owner), Key)
	if errors.Is(err, statestore.ErrNotFound) {
		return Preferences{}, 0, nil
	}
	if err != nil {
		return Preferences{}, 0, err
	}
	p, err := Parse(reg, e.Document)
	return p, e.Revision, err
}

// Parse decodes a preference document, for a client that follows Key with
// a watch instead of reading it.
func Parse(reg *schema.Registry, doc []byte) (Preferences, error) {
	return codec.Decode(reg, doc)
}

// Save writes owner's preferences with compare-and-set on revision (0:
// create only, as Load returns for none stored) and returns the new
// revision. A CONFLICT means another of the owner's devices saved first:
// Load again and merge.
func Save(ctx context.Context, c stateclient.Client, reg *schema.Registry, owner string, p Preferences, revision uint64) (uint64, error) {
	doc, err := codec.Encode(reg, p)
	if err != nil {
		return 0, err
	}
	e, err := c.Put(ctx, statestore.PutRequest{Namespace: Namespace(owner), Key: Key, Schema: Schema, Document: doc, Expect: statestore.IfRevision(revision)})
	return e.Revision, err
}
