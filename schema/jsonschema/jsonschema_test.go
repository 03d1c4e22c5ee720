package jsonschema_test

import (
	"testing"

	"github.com/keeppeek/statestore/schema/jsonschema"
)

func TestNewJSONSchemaValidatorErrors(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"not JSON":          `{"type": }`,
		"external ref":      `{"$ref": "https://example.com/schema.json"}`,
		"file ref":          `{"$ref": "file:///etc/hostname"}`,
		"invalid keyword":   `{"type": "objekt"}`,
		"invalid regexp":    `{"pattern": "("}`,
		"not a schema type": `42`,
	} {
		if _, err := jsonschema.NewJSONSchemaValidator("keeppeek.x.v1", []byte(src)); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}
