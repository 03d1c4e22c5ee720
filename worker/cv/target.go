package cv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/keeppeek/statestore/worker/intent"
)

// The parameters of a computer-vision intent, under the media intent's
// namespaced parameters object.
const (
	// ParamModel names the model profile: a string identifier, required.
	ParamModel = "cv.model"
	// ParamMinConfidence drops detections below it before they become
	// events: a number from 0 to 1, optional (0: none dropped).
	ParamMinConfidence = "cv.min_confidence"
)

// Target is what a computer-vision intent asks for: a model profile run
// over a stable source's stream.
type Target struct {
	SourceID  string
	MediaKind intent.MediaKind
	// VariantID is the exact variant to analyse; "" leaves the choice to
	// the subscription's automatic selection.
	VariantID     string
	Model         string
	MinConfidence float64
}

// TargetOf reads a computer-vision intent: a subscribe intent whose
// parameters name the model profile (cv.model) and optionally a minimum
// confidence (cv.min_confidence). Any other cv.* parameter is refused, so
// a setting this worker would ignore is not silently dropped; parameters
// of other services are left to them. Errors are *intent.ValidationError
// naming the field.
func TargetOf(in intent.Intent) (Target, error) {
	if err := in.Check(); err != nil {
		return Target{}, err
	}
	if in.Role != intent.Subscribe {
		return Target{}, &intent.ValidationError{Field: "role", Reason: fmt.Sprintf("a computer-vision intent subscribes to its source: role %q, want subscribe", string(in.Role))}
	}
	t := Target{SourceID: in.SourceID, MediaKind: in.MediaKind, VariantID: in.VariantID}
	// In name order, so the field reported is the same on every read.
	for _, name := range slices.Sorted(maps.Keys(in.Parameters)) {
		raw, field := in.Parameters[name], "parameters."+name
		switch {
		case name == ParamModel:
			if err := strictJSON(raw, &t.Model); err != nil || !identifier(t.Model) {
				return Target{}, &intent.ValidationError{Field: field, Reason: "must name a model profile: a string of 1 to 128 of [A-Za-z0-9._-], not . or .."}
			}
		case name == ParamMinConfidence:
			if err := strictJSON(raw, &t.MinConfidence); err != nil || math.IsNaN(t.MinConfidence) || t.MinConfidence < 0 || t.MinConfidence > 1 {
				return Target{}, &intent.ValidationError{Field: field, Reason: "must be a number from 0 to 1"}
			}
		case strings.HasPrefix(name, "cv."):
			return Target{}, &intent.ValidationError{Field: field, Reason: fmt.Sprintf("unknown computer-vision parameter (this worker reads %s and %s)", ParamModel, ParamMinConfidence)}
		}
	}
	if t.Model == "" {
		return Target{}, &intent.ValidationError{Field: "parameters." + ParamModel, Reason: "required: the model profile to run"}
	}
	return t, nil
}

// Intent returns the media intent asking for t, desired.
func (t Target) Intent() intent.Intent {
	in := intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: t.SourceID, MediaKind: t.MediaKind, VariantID: t.VariantID,
		Parameters: map[string]json.RawMessage{}}
	in.Parameters[ParamModel], _ = json.Marshal(t.Model)
	if t.MinConfidence != 0 {
		in.Parameters[ParamMinConfidence], _ = json.Marshal(t.MinConfidence)
	}
	return in
}

// strictJSON decodes raw into v, refusing a value of another type.
func strictJSON(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// identifier is the schemas' identifier rule.
func identifier(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
