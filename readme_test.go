package statestore_test

import (
	"bytes"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// readmeProgram returns the code block of the README section titled
// heading: the lines between the first ```go fence after it and the
// closing fence.
func readmeProgram(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, code, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatalf("README section %q has no ```go block", heading)
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok {
		t.Fatalf("README section %q: the ```go block is not closed", heading)
	}
	return code + "\n"
}

// TestReadmeProgramIsTheExample holds the README's program to
// Example_readme as godoc shows it (the runnable program go/doc derives
// from the whole-file example), so the README cannot drift from code that
// go test runs and checks the output of.
func TestReadmeProgramIsTheExample(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_readme_test.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var play bytes.Buffer
	var output string
	for _, ex := range doc.Examples(f) {
		if ex.Name == "_readme" && ex.Play != nil {
			if err := format.Node(&play, fset, ex.Play); err != nil {
				t.Fatal(err)
			}
			output = ex.Output
		}
	}
	if play.Len() == 0 {
		t.Fatal("example_readme_test.go yields no runnable Example_readme program")
	}
	got := readmeProgram(t, "Use it from Go")
	if got != play.String() {
		t.Errorf("the README's program differs from Example_readme; replace the README's block with:\n%s", play.String())
	}
	// The output the README shows is the output the example is checked against.
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	indented := "    " + strings.ReplaceAll(strings.TrimSuffix(output, "\n"), "\n", "\n    ") + "\n"
	if output == "" || !strings.Contains(string(b), "It prints:\n\n"+indented) {
		t.Errorf("the README does not show Example_readme's output; after \"It prints:\" it should read:\n%s", indented)
	}
}
