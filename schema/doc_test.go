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

// TestDocExampleIsTestdata holds the media-intent.v1 example in the package
// documentation to the testdata file it names, and both to Validate.
func TestDocExampleIsTestdata(t *testing.T) {
	t.Parallel()
	text := packageDoc(t)
	const intro = "testdata/accept/spec-example.json"
	_, rest, ok := strings.Cut(text, intro)
	if !ok {
		t.Fatalf("the package doc does not point at %s", intro)
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
	want, err := os.ReadFile("testdata/" + strings.TrimPrefix(intro, "testdata/"))
	if err != nil {
		t.Fatal(err)
	}
	if example.String() != string(want) {
		t.Errorf("the doc's example differs from %s:\ndoc:\n%s\nfile:\n%s", intro, example.String(), want)
	}
	if err := schema.NewRegistry().Validate(schema.MediaIntentV1, example.Bytes()); err != nil {
		t.Errorf("the doc's example is rejected: %v", err)
	}
}

// TestDocFieldTableMatchesSchema holds the field table in the package
// documentation to the JSON Schema's properties and required list.
func TestDocFieldTableMatchesSchema(t *testing.T) {
	t.Parallel()
	var js struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	b, err := os.ReadFile("media-intent.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	text := packageDoc(t)
	_, table, ok := strings.Cut(text, "\tfield ")
	if !ok {
		t.Fatal("the package doc has no field table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	documented := map[string]string{} // field -> required column
	for _, line := range strings.Split(table, "\n")[1:] {
		cols := strings.Fields(line)
		if len(cols) < 3 || !slices.Contains([]string{"string", "boolean", "integer", "object"}, cols[1]) {
			continue // a continuation line
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
}
