package intent_test

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/intent"
)

func TestParseSpecificationExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("testdata/publish.json")
	if err != nil {
		t.Fatal(err)
	}
	in, err := intent.Parse(schema.NewRegistry(), doc)
	if err != nil {
		t.Fatal(err)
	}
	want := intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video,
		VariantID: "browser-h264-720p", OutputProfile: "browser-h264-720p", Priority: 100, RecordingMode: intent.RecordingDisabled}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("parsed %+v, want %+v", in, want)
	}
	again, err := intent.Encode(schema.NewRegistry(), in)
	if err != nil {
		t.Fatal(err)
	}
	back, err := intent.Parse(schema.NewRegistry(), again)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	base := intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video, RecordingMode: intent.RecordingRequired}
	tests := []struct {
		name   string
		mod    func(*intent.Intent)
		field  string
		schema bool // the registry, not Check, refused it
	}{
		{"publish without recording_mode", func(in *intent.Intent) { in.RecordingMode = "" }, "recording_mode", false},
		{"publish with unknown recording_mode", func(in *intent.Intent) { in.RecordingMode = "sometimes" }, "recording_mode", false},
		{"unknown role", func(in *intent.Intent) { in.Role = "relay" }, "role", false},
		{"missing source", func(in *intent.Intent) { in.SourceID = "" }, "source_id", false},
		{"unknown media kind", func(in *intent.Intent) { in.MediaKind = "subtitles" }, "media_kind", true},
		{"source id with a slash", func(in *intent.Intent) { in.SourceID = "front/door" }, "source_id", true},
		{"priority above 1000", func(in *intent.Intent) { in.Priority = 1001 }, "priority", true},
		{"parameter not namespaced", func(in *intent.Intent) {
			in.Parameters = map[string]json.RawMessage{"scale": json.RawMessage(`2`)}
		}, "parameters.scale", true},
		{"credential in parameters", func(in *intent.Intent) {
			in.Parameters = map[string]json.RawMessage{"transcoder.password": json.RawMessage(`"x"`)}
		}, `parameters["transcoder.password"]`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := base
			tc.mod(&in)
			doc, err := intent.Encode(schema.NewRegistry(), in)
			var ve *intent.ValidationError
			if !errors.As(err, &ve) || doc != nil {
				t.Fatalf("want a ValidationError and no document, got %q %v", doc, err)
			}
			if ve.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", ve.Field, tc.field, err)
			}
			if got := errors.Is(err, schema.ErrInvalid); got != tc.schema {
				t.Fatalf("registry decided: %v, want %v (%v)", got, tc.schema, err)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, field string }{
		{"publish without recording_mode", `{"role":"publish","desired":true,"source_id":"a","media_kind":"video"}`, "recording_mode"},
		{"zero recording_mode", `{"role":"publish","desired":true,"source_id":"a","media_kind":"video","recording_mode":""}`, "recording_mode"},
		{"transient session id", `{"role":"subscribe","desired":true,"source_id":"a","media_kind":"video","source_session_id":"s-17"}`, "source_session_id"},
		{"not an object", `[1]`, "document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := intent.Parse(schema.NewRegistry(), []byte(tc.doc))
			var ve *intent.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("want a ValidationError on %q, got %v", tc.field, err)
			}
		})
	}
}

// TestCheckCatchesWhatARegistryMissed: a registry without the publish rule
// (an embedder's own, say) accepts a publish intent without a mode; Parse
// still refuses it, so it can never become a zero-value StartPublication.
func TestCheckCatchesWhatARegistryMissed(t *testing.T) {
	t.Parallel()
	lax := &schema.Registry{}
	if err := lax.Register(intent.Schema, anyObject{}); err != nil {
		t.Fatal(err)
	}
	_, err := intent.Parse(lax, []byte(`{"role":"publish","desired":true,"source_id":"a","media_kind":"video"}`))
	var ve *intent.ValidationError
	if !errors.As(err, &ve) || ve.Field != "recording_mode" || errors.Is(err, schema.ErrInvalid) {
		t.Fatalf("want the worker's own recording_mode error, got %v", err)
	}
}

type anyObject struct{}

func (anyObject) Validate(map[string]any) error { return nil }
