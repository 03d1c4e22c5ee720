package webclient

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is where the manifest's paths start.
const repoRoot = ".."

// manifest reads dist/MANIFEST.sha256: path -> hash, by section.
func manifest(t *testing.T) (inputs, outputs map[string]string) {
	t.Helper()
	f, err := os.Open("dist/MANIFEST.sha256")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inputs, outputs = map[string]string{}, map[string]string{}
	cur := map[string]string(nil)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); line {
		case "# inputs":
			cur = inputs
		case "# outputs":
			cur = outputs
		default:
			sum, path, ok := strings.Cut(line, "  ")
			if !ok || cur == nil {
				t.Fatalf("manifest line %q: want a section header or \"sha256  path\"", line)
			}
			cur[path] = sum
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return inputs, outputs
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatalf("%v (the manifest lists it; rebuild: cd wire/webclient && npm ci && npm run build)", err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestBundleIsCurrent(t *testing.T) {
	t.Parallel()
	inputs, outputs := manifest(t)
	if len(inputs) == 0 || len(outputs) != 3 {
		t.Fatalf("manifest lists %d inputs and %d outputs, want some inputs and 3 outputs", len(inputs), len(outputs))
	}
	for _, m := range []map[string]string{inputs, outputs} {
		for path, want := range m {
			if got := sha(t, path); got != want {
				t.Errorf("%s changed since the bundle was built (sha256 %s, built from %s): run cd wire/webclient && npm ci && npm run build, and commit dist/", path, got, want)
			}
		}
	}
	// A source file the build never saw is as stale as a changed one.
	err := filepath.WalkDir("src", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, ok := inputs[filepath.ToSlash(filepath.Join("webclient", p))]; !ok {
			t.Errorf("%s is not in dist/MANIFEST.sha256: the bundle was built without it; rebuild", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAssetsServeTheBuiltFiles(t *testing.T) {
	t.Parallel()
	_, outputs := manifest(t)
	var names []string
	err := fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"inspector.html", "inspector.js", "keeppeek.mjs"}
	if !slices.Equal(names, want) {
		t.Fatalf("Assets() holds %v, want %v", names, want)
	}
	for _, n := range names {
		b, err := fs.ReadFile(Assets(), n)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		if got := hex.EncodeToString(s[:]); got != outputs["webclient/dist/"+n] {
			t.Errorf("embedded %s has sha256 %s, the manifest %s", n, got, outputs["webclient/dist/"+n])
		}
	}
}
