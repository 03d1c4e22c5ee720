package jsonschema_test

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/schema/jsonschema"
)

// TestFingerprints: a JSON schema's fingerprint follows its definition,
// not its spelling (spacing, member order); the built-ins have one of
// their own; a validator without Fingerprint is known by its Go type.
func TestFingerprints(t *testing.T) {
	t.Parallel()
	fp := func(def string) string {
		t.Helper()
		r := schema.NewRegistry()
		v, err := jsonschema.NewJSONSchemaValidator("keeppeek.x.v1", []byte(def))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Register("keeppeek.x.v1", v); err != nil {
			t.Fatal(err)
		}
		return r.Fingerprints()["keeppeek.x.v1"]
	}
	a := fp(`{"type":"object","required":["a"]}`)
	if b := fp("{ \"required\": [\"a\"],\n \"type\": \"object\" }"); a != b {
		t.Fatalf("one definition spelled two ways: %s vs %s", a, b)
	}
	if c := fp(`{"type":"object","required":["b"]}`); a == c {
		t.Fatal("two definitions share a fingerprint")
	}
	all := schema.NewRegistry().Fingerprints()
	if !strings.HasPrefix(all[schema.MediaIntentV1], "mediaIntent+go1:") || !strings.HasPrefix(all[schema.MQTTBridgeV1], "mqttBridge+go1:") ||
		all[schema.MediaIntentV1][len("mediaIntent+"):] == all[schema.MQTTBridgeV1][len("mqttBridge+"):] {
		t.Fatalf("built-in fingerprints %v", all)
	}
	if again := schema.NewRegistry().Fingerprints(); again[schema.MediaIntentV1] != all[schema.MediaIntentV1] || again[schema.MQTTBridgeV1] != all[schema.MQTTBridgeV1] {
		t.Fatalf("built-in fingerprints differ between registries: %v vs %v", all, again)
	}
	r := schema.NewRegistry()
	if err := r.Register("keeppeek.opaque.v1", opaque{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Fingerprints()["keeppeek.opaque.v1"]; got != "go:jsonschema_test.opaque" {
		t.Fatalf("opaque validator's fingerprint %q", got)
	}
}

type opaque struct{}

func (opaque) Validate(map[string]any) error { return nil }
