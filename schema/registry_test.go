package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/schema/jsonschema"
)

func TestUnknownSchema(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	doc := readFixture(t, "accept/spec-example.json")
	for _, name := range []string{"keeppeek.media-intent.v2", "keeppeek.other.v1", "media-intent", ""} {
		err := r.Validate(name, doc)
		if !errors.Is(err, schema.ErrUnknownSchema) || !errors.Is(err, schema.ErrInvalid) {
			t.Errorf("Validate(%q) = %v; want ErrUnknownSchema and ErrInvalid", name, err)
		}
		var e *schema.Error
		if !errors.As(err, &e) || e.Path != "schema" {
			t.Errorf("Validate(%q) = %v; want *Error at path schema", name, err)
		}
	}
	var zero schema.Registry
	if err := zero.Validate(schema.MediaIntentV1, doc); !errors.Is(err, schema.ErrUnknownSchema) {
		t.Errorf("zero Registry: %v", err)
	}
}

type rejectAll struct{ err error }

func (v rejectAll) Validate(map[string]any) error { return v.err }

func TestRegister(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	v, err := jsonschema.NewJSONSchemaValidator("keeppeek.observed-status.v1", []byte(`{
		"type": "object", "required": ["state"], "additionalProperties": false,
		"properties": {"state": {"enum": ["running", "stopped"]}, "detail": {"type": "string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.observed-status.v1", v); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.observed-status.v1", v); err == nil {
		t.Error("duplicate Register accepted")
	}
	if err := r.Register(schema.MediaIntentV1, v); err == nil {
		t.Error("Register over the built-in schema accepted")
	}
	if err := r.Register("observed-status", v); err == nil {
		t.Error("Register with a bad name accepted")
	}
	if err := r.Register("keeppeek.nil.v1", nil); err == nil {
		t.Error("Register of a nil validator accepted")
	}
	if err := r.Register("keeppeek.plain-error.v1", rejectAll{errors.New("nope")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.schema-error.v1", rejectAll{&schema.Error{Path: "$.x", Reason: "bad x"}}); err != nil {
		t.Fatal(err)
	}

	want := []string{"keeppeek.media-intent.v1", "keeppeek.mqtt-bridge.v1", "keeppeek.observed-status.v1", "keeppeek.plain-error.v1", "keeppeek.schema-error.v1"}
	if got := r.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Names() = %v, want %v", got, want)
	}

	if err := r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"running","detail":"ok"}`)); err != nil {
		t.Errorf("valid observed-status rejected: %v", err)
	}
	mustReject(t, r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"paused"}`)), "$.state", "must be one of running, stopped")
	// The guard applies to registered schemas too, before their validator.
	mustReject(t, r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"running","secret":"s"}`)), "$.secret", "credential")

	err = r.Validate("keeppeek.plain-error.v1", []byte(`{}`))
	mustReject(t, err, "$", "nope")
	var e *schema.Error
	if errors.As(err, &e) && e.Schema != "keeppeek.plain-error.v1" {
		t.Errorf("Schema = %q", e.Schema)
	}
	err = r.Validate("keeppeek.schema-error.v1", []byte(`{}`))
	if err == nil || err.Error() != "schema keeppeek.schema-error.v1: $.x: bad x" {
		t.Errorf("got %v", err)
	}
}

// BenchmarkValidateMediaIntent measures the write-path check for the
// store's standard 2,193-byte document.
func BenchmarkValidateMediaIntent(b *testing.B) {
	docs := make([][]byte, 64)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(2193, i)
	}
	b.SetBytes(2193)
	benchValidate(b, docs)
}

// BenchmarkValidateMediaIntentSmall measures the 150- to 200-byte
// documents kpjournal's verify throughput test replays, where the fixed
// cost of a call weighs more than the bytes.
func BenchmarkValidateMediaIntentSmall(b *testing.B) {
	docs := make([][]byte, 64)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(150+i*50/len(docs), i)
	}
	benchValidate(b, docs)
}

// benchValidate validates docs in turn, each of which must be accepted.
func benchValidate(b *testing.B, docs [][]byte) {
	r := schema.NewRegistry()
	for _, doc := range docs {
		if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := r.Validate(schema.MediaIntentV1, docs[i%len(docs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
