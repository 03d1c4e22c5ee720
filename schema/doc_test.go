package schema_test

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

// packageDoc returns the package comment of doc.go as go doc shows it.
func packageDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		t.Fatalf("doc.go has no package comment: %v", err)
	}
	return f.Doc.Text()
}

// docSchemas are the built-in schemas the package documentation describes:
// the testdata file its example is kept in, and its JSON Schema.
var docSchemas = []struct{ name, example, jsonSchema string }{
	{schema.MediaIntentV1, "testdata/accept/spec-example.json", "media-intent.v1.json"},
	{schema.MQTTBridgeV1, "testdata/mqtt-bridge/front-door.json", "mqtt-bridge.v1.json"},
}

// docSection returns the package documentation's section on schema name,
// from its heading to the next.
func docSection(t *testing.T, name string) string {
	t.Helper()
	_, section, ok := strings.Cut(packageDoc(t), "\n# "+name+"\n")
	if !ok {
		t.Fatalf("the package doc has no section # %s", name)
	}
	section, _, _ = strings.Cut(section, "\n# ")
	return section
}

// TestDocExampleIsTestdata holds each schema's example in the package
// documentation to the testdata file it names, and both to Validate.
func TestDocExampleIsTestdata(t *testing.T) {
	t.Parallel()
	for _, ds := range docSchemas {
		t.Run(ds.name, func(t *testing.T) {
			t.Parallel()
			_, rest, ok := strings.Cut(docSection(t, ds.name), ds.example)
			if !ok {
				t.Fatalf("the section does not point at %s", ds.example)
			}
			start := strings.Index(rest, "\t{\n")
			end := strings.Index(rest, "\t}\n")
			if start < 0 || end < start {
				t.Fatal("no indented JSON example follows the pointer to the testdata file")
			}
			var example bytes.Buffer
			for _, line := range strings.SplitAfter(rest[start:end+3], "\n") {
				example.WriteString(strings.TrimPrefix(line, "\t"))
			}
			want, err := os.ReadFile(ds.example)
			if err != nil {
				t.Fatal(err)
			}
			if example.String() != string(want) {
				t.Errorf("the doc's example differs from %s:\ndoc:\n%s\nfile:\n%s", ds.example, example.String(), want)
			}
			if err := schema.NewRegistry().Validate(ds.name, example.Bytes()); err != nil {
				t.Errorf("the doc's example is rejected: %v", err)
			}
		})
	}
}

// TestDocFieldTableMatchesSchema holds each schema's field table in the
// package documentation to the JSON Schema's top-level properties and
// required list (indented rows describe members of a nested object).
func TestDocFieldTableMatchesSchema(t *testing.T) {
	t.Parallel()
	for _, ds := range docSchemas {
		t.Run(ds.name, func(t *testing.T) {
			t.Parallel()
			var js struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			}
			b, err := os.ReadFile(ds.jsonSchema)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &js); err != nil {
				t.Fatal(err)
			}
			_, table, ok := strings.Cut(docSection(t, ds.name), "\tfield ")
			if !ok {
				t.Fatal("the section has no field table")
			}
			table, _, _ = strings.Cut(table, "\n\n")
			documented := map[string]string{} // field -> required column
			for _, line := range strings.Split(table, "\n")[1:] {
				cols := strings.Fields(line)
				if strings.HasPrefix(line, "\t ") || len(cols) < 3 || !slices.Contains([]string{"string", "boolean", "integer", "object", "array"}, cols[1]) {
					continue // a continuation line, or a nested object's member
				}
				documented[cols[0]] = cols[2]
			}
			if got, want := slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(js.Properties)); !slices.Equal(got, want) {
				t.Errorf("documented fields %v, the schema's properties %v", got, want)
			}
			for _, f := range js.Required {
				if documented[f] != "yes" {
					t.Errorf("%s is required by the schema, documented as %q", f, documented[f])
				}
			}
		})
	}
}
