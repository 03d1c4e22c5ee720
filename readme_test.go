package statestore_test

import (
	"bytes"
	"go/ast"
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

// TestReadmeClientExampleIsTheExample holds the README's "Connect from Go"
// block to ExampleDial exactly as client/example_test.go has it, doc
// comment and Output included, so the README shows code that
// go test ./client runs and checks.
func TestReadmeClientExampleIsTheExample(t *testing.T) {
	t.Parallel()
	const file, name = "client/example_test.go", "ExampleDial"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
			from := fd.Pos()
			if fd.Doc != nil {
				from = fd.Doc.Pos()
			}
			want = string(src[fset.Position(from).Offset:fset.Position(fd.End()).Offset]) + "\n"
		}
	}
	if want == "" {
		t.Fatalf("%s has no func %s", file, name)
	}
	if got := readmeProgram(t, "Connect from Go"); got != want {
		t.Errorf("the README's \"Connect from Go\" block differs from %s in %s; replace the block with:\n%s", name, file, want)
	}
}

// layoutRows returns the folders README's layout table names (the
// backticked paths of each row's first cell), and whether each is marked
// as coming.
func layoutRows(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		first := cells[1]
		coming := len(cells) > 2 && strings.Contains(cells[2], "*coming*")
		for _, part := range strings.Split(first, "`")[1:] {
			if p := strings.TrimSuffix(part, "/"); p != "" && !strings.ContainsAny(p, " ,()") {
				rows[p] = coming
			}
		}
	}
	return rows
}

// TestReadmeLayoutFollowsTheTree holds README's layout table to the tree:
// every package directory is a row (the bench module as a whole), every
// row that is not marked coming exists, and at most 16 top-level folders
// hold Go code.
func TestReadmeLayoutFollowsTheTree(t *testing.T) {
	t.Parallel()
	rows := layoutRows(t)
	top := map[string]bool{}
	for _, p := range loadPackages(t, ".") {
		if p.dir == "." {
			continue
		}
		top[strings.Split(p.dir, "/")[0]] = true
		if _, ok := rows[p.dir]; !ok && !strings.HasPrefix(p.dir, "bench/") {
			t.Errorf("package %s is not in README's layout table", p.dir)
		}
	}
	for row, coming := range rows {
		if row == "statestore" || coming {
			continue
		}
		if st, err := os.Stat(row); err != nil || !st.IsDir() {
			t.Errorf("README's layout table names %s, which is not a folder", row)
		}
	}
	if len(top) > 16 {
		t.Errorf("%d top-level folders hold Go code, over 16: %v", len(top), top)
	}
}
