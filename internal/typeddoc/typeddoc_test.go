package typeddoc_test

import (
	"errors"
	"testing"

	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
)

type note struct {
	Text string `json:"text"`
}

var codec = typeddoc.Codec[note]{Name: "keeppeek.note.v1", JSONSchema: []byte(`{
  "type": "object", "required": ["text"], "additionalProperties": false,
  "properties": {"text": {"type": "string", "maxLength": 8}}}`)}

func TestCodec(t *testing.T) {
	t.Parallel()
	reg := schema.NewRegistry()
	if _, err := codec.Encode(reg, note{Text: "hi"}); !errors.Is(err, schema.ErrUnknownSchema) {
		t.Fatalf("encode before Register: %v", err)
	}
	if err := codec.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := codec.Register(reg); err == nil {
		t.Fatal("a second registration was accepted")
	}
	doc, err := codec.Encode(reg, note{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := codec.Decode(reg, doc); err != nil || n.Text != "hi" {
		t.Fatalf("decode %+v %v", n, err)
	}
	tests := []struct {
		name, doc, field string
	}{
		{"too long", `{"text":"far too long"}`, "text"},
		{"unknown field", `{"text":"a","extra":1}`, "extra"},
		{"credential", `{"text":"a","password":"x"}`, "password"},
		{"not json", `{`, "document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := codec.Decode(reg, []byte(tc.doc))
			var te *typeddoc.Error
			if !errors.As(err, &te) || te.Field != tc.field || !errors.Is(err, schema.ErrInvalid) {
				t.Fatalf("want an Error on %q matching schema.ErrInvalid, got %v", tc.field, err)
			}
		})
	}
	if _, err := codec.Encode(reg, note{Text: "far too long"}); err == nil {
		t.Fatal("encoded a document the registry refuses")
	}
}
