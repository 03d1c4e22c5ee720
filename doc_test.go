package statestore_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The invariant index. A package comment that lists invariants does so
// under the heading "# Invariants", one list item each ("1." or "-"), and
// every item names the code that keeps it and the tests that pin it, each
// as a list ending with a period that may run over several lines:
//
//	Code: Store.publish, batch.answer, journal.Journal.Sync.
//	Tests: TestFailedSyncChangesNothing, journal.TestSyncAcknowledges.
//
// A name is resolved in the package itself (a function, type, variable or
// constant; Type.Method or Type.Field), or, when its first part is not
// declared there, in the module's package of that name (its directory's
// base name, or a path such as wire/dispatch when two share it). A test
// name must be a Test, Fuzz, Benchmark or Example function of the
// package's test files.

// indexLine finds the start of a Code: or Tests: list.
var indexLine = regexp.MustCompile(`^\s*(Code|Tests):\s*(.*)$`)

// itemStart finds the start of a list item of the Invariants section.
var itemStart = regexp.MustCompile(`^\s*(\d+\.|-)\s+\S`)

// indexName is one name of a Code: or Tests: list.
var indexName = regexp.MustCompile(`^([a-z0-9_]+(/[a-z0-9_]+)*\.)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// goPackage is what the index resolves names against: one directory's
// declarations.
type goPackage struct {
	dir   string // relative to the repository root
	name  string // package name of the non-test files
	doc   *ast.CommentGroup
	decls map[string]bool // top-level names, Type.Method and Type.Field, of non-test files
	tests map[string]bool // Test/Fuzz/Benchmark/Example functions of the test files
}

// loadPackages parses every Go package under root (both modules,
// testdata and node_modules left out).
func loadPackages(t *testing.T, root string) []*goPackage {
	t.Helper()
	var pkgs []*goPackage
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); path != root && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
			return filepath.SkipDir
		}
		p, err := parseDir(root, path)
		if err != nil {
			return err
		}
		if p != nil {
			pkgs = append(pkgs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func parseDir(root, dir string) (*goPackage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, dir)
	p := &goPackage{dir: filepath.ToSlash(rel), decls: map[string]bool{}, tests: map[string]bool{}}
	fset := token.NewFileSet()
	found := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		found = true
		if strings.HasSuffix(e.Name(), "_test.go") {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && isTestName(fd.Name.Name) {
					p.tests[fd.Name.Name] = true
				}
			}
			continue
		}
		p.name = f.Name.Name
		if f.Doc != nil {
			p.doc = f.Doc
		}
		addDecls(p.decls, f)
	}
	if !found {
		return nil, nil
	}
	return p, nil
}

func isTestName(n string) bool {
	for _, prefix := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// addDecls records the names f declares.
func addDecls(decls map[string]bool, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				decls[d.Name.Name] = true
				continue
			}
			decls[receiverName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					decls[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								decls[s.Name.Name+"."+n.Name] = true
							}
							if len(fl.Names) == 0 {
								decls[s.Name.Name+"."+receiverName(fl.Type)] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						decls[n.Name] = true
					}
				}
			}
		}
	}
}

// receiverName is the type name of a receiver or embedded field: T for T,
// *T, T[P] and pkg.T.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// invariantItem is one item of an Invariants section: its first line,
// and the names its Code: and Tests: lists give.
type invariantItem struct {
	title       string
	code, tests []string
	errs        []string
}

// invariantSection returns the items under "# Invariants" in doc, and
// whether the heading is there.
func invariantSection(doc string) ([]*invariantItem, bool) {
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, "# Invariants")
	if start < 0 {
		return nil, false
	}
	var items []*invariantItem
	var cur *invariantItem
	var list *[]string // the list being read, until its closing period
	for _, line := range lines[start+1:] {
		if strings.HasPrefix(line, "# ") {
			break
		}
		if list != nil {
			*list = append(*list, line)
			if strings.HasSuffix(strings.TrimSpace(line), ".") {
				list = nil
			}
			continue
		}
		if m := indexLine.FindStringSubmatch(line); m != nil && cur != nil {
			target := &cur.code
			if m[1] == "Tests" {
				target = &cur.tests
			}
			if len(*target) > 0 {
				cur.errs = append(cur.errs, "a second "+m[1]+": list")
			}
			*target = append(*target, m[2])
			if !strings.HasSuffix(strings.TrimSpace(m[2]), ".") {
				list = target
			}
			continue
		}
		if itemStart.MatchString(line) && !strings.HasPrefix(line, "\t") {
			cur = &invariantItem{title: strings.TrimSpace(line)}
			items = append(items, cur)
		}
	}
	if list != nil {
		cur.errs = append(cur.errs, "a list that never ends with a period")
	}
	for _, it := range items {
		it.code = splitNames(it.code, &it.errs)
		it.tests = splitNames(it.tests, &it.errs)
	}
	return items, true
}

// splitNames turns the lines of one list into its names.
func splitNames(lines []string, errs *[]string) []string {
	text := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, " ")), ".")
	if text == "" {
		return nil
	}
	var names []string
	for n := range strings.SplitSeq(text, ",") {
		n = strings.TrimSpace(n)
		if !indexName.MatchString(n) {
			*errs = append(*errs, fmt.Sprintf("%q is not a name (want Name, Type.Method or pkg.Name)", n))
			continue
		}
		names = append(names, n)
	}
	return names
}

// index resolves names across the module's packages.
type index struct {
	byDir  map[string]*goPackage
	byName map[string][]*goPackage
}

// resolve reports whether name exists for p, as code (tests false) or as a
// test function.
func (ix *index) resolve(p *goPackage, name string, tests bool) error {
	set := func(q *goPackage) map[string]bool {
		if tests {
			return q.tests
		}
		return q.decls
	}
	if set(p)[name] {
		return nil
	}
	first, rest, qualified := strings.Cut(name, ".")
	if qualified {
		var cands []*goPackage
		if strings.Contains(first, "/") {
			if q := ix.byDir[first]; q != nil {
				cands = []*goPackage{q}
			}
		} else {
			cands = ix.byName[first]
		}
		if len(cands) > 1 {
			var dirs []string
			for _, q := range cands {
				dirs = append(dirs, q.dir)
			}
			return fmt.Errorf("%s: package %q is ambiguous (%s); qualify it by path", name, first, strings.Join(dirs, ", "))
		}
		if len(cands) == 1 && set(cands[0])[rest] {
			return nil
		}
	}
	kind := "code"
	if tests {
		kind = "test"
		if !isTestName(name[strings.LastIndex(name, ".")+1:]) {
			return fmt.Errorf("%s: a test name starts with Test, Fuzz, Benchmark or Example", name)
		}
	}
	return fmt.Errorf("%s: no such %s in %s or the package its first part names", name, kind, p.dir)
}

// TestInvariantIndex checks every package comment of the repository: an
// Invariants section is a heading whose every item names its code and its
// tests, and every name exists. A package that lists invariants another
// way fails, so no list escapes the check.
func TestInvariantIndex(t *testing.T) {
	t.Parallel()
	pkgs := loadPackages(t, ".")
	ix := &index{byDir: map[string]*goPackage{}, byName: map[string][]*goPackage{}}
	for _, p := range pkgs {
		ix.byDir[p.dir] = p
		base := p.dir[strings.LastIndex(p.dir, "/")+1:]
		if p.dir == "." {
			base = p.name
		}
		ix.byName[base] = append(ix.byName[base], p)
	}
	indexed := 0
	for _, p := range pkgs {
		if p.doc == nil {
			continue
		}
		doc := p.doc.Text()
		items, ok := invariantSection(doc)
		if !ok {
			if regexp.MustCompile(`\bInvariants?\b`).MatchString(doc) {
				t.Errorf("%s: the package comment lists invariants without the \"# Invariants\" heading", p.dir)
			}
			continue
		}
		if len(items) == 0 {
			t.Errorf("%s: \"# Invariants\" holds no list item", p.dir)
		}
		for _, it := range items {
			indexed++
			fail := func(format string, args ...any) {
				t.Errorf("%s: invariant %q: %s", p.dir, it.title, fmt.Sprintf(format, args...))
			}
			for _, e := range it.errs {
				fail("%s", e)
			}
			if len(it.code) == 0 {
				fail("no Code: list")
			}
			if len(it.tests) == 0 {
				fail("no Tests: list")
			}
			for _, n := range it.code {
				if err := ix.resolve(p, n, false); err != nil {
					fail("%v", err)
				}
			}
			for _, n := range it.tests {
				if err := ix.resolve(p, n, true); err != nil {
					fail("%v", err)
				}
			}
		}
	}
	t.Logf("%d invariants indexed in %d packages", indexed, len(pkgs))
}

// TestInvariantSectionParsing pins the parser on a small comment: items,
// lists over several lines, and the errors a malformed item gets.
func TestInvariantSectionParsing(t *testing.T) {
	t.Parallel()
	doc := "Package x.\n\n# Invariants\n\n" +
		"  1. First: held.\n     Code: Store.Put, journal.Journal.Sync.\n     Tests: TestA,\n     TestB.\n" +
		"  2. Second, no lists.\n" +
		"  3. Third: a bad name.\n     Code: not a name.\n     Tests: TestC.\n" +
		"\n# Other\n\n  4. Not an invariant.\n"
	items, ok := invariantSection(doc)
	if !ok || len(items) != 3 {
		t.Fatalf("got %d items (heading %v), want 3", len(items), ok)
	}
	if got := items[0]; !slices.Equal(got.code, []string{"Store.Put", "journal.Journal.Sync"}) || !slices.Equal(got.tests, []string{"TestA", "TestB"}) || len(got.errs) > 0 {
		t.Errorf("item 1: code %q tests %q errs %q", got.code, got.tests, got.errs)
	}
	if got := items[1]; got.code != nil || got.tests != nil {
		t.Errorf("item 2: code %q tests %q, want none", got.code, got.tests)
	}
	if got := items[2]; len(got.errs) != 1 || !strings.Contains(got.errs[0], "not a name") {
		t.Errorf("item 3: errs %q, want one naming the bad name", got.errs)
	}
}
