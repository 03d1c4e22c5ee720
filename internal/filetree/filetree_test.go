package filetree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDiffSeesEveryChange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(root string) error
		want   []string
	}{
		{"nothing", func(string) error { return nil }, nil},
		{"a byte changed", func(r string) error { return os.WriteFile(filepath.Join(r, "a"), []byte("A"), 0o644) }, []string{"a changed or removed"}},
		{"a file removed", func(r string) error { return os.Remove(filepath.Join(r, "sub", "b")) }, []string{"sub/b changed or removed"}},
		{"a file added", func(r string) error { return os.WriteFile(filepath.Join(r, "c"), nil, 0o644) }, []string{"c added"}},
		{"a directory added", func(r string) error { return os.Mkdir(filepath.Join(r, "d"), 0o755) }, []string{"d added"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644)
			os.Mkdir(filepath.Join(root, "sub"), 0o755)
			os.WriteFile(filepath.Join(root, "sub", "b"), []byte("b"), 0o644)
			before, err := Hashes(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.change(root); err != nil {
				t.Fatal(err)
			}
			after, err := Hashes(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := Diff(before, after); !slices.Equal(got, tc.want) {
				t.Fatalf("Diff = %q, want %q", got, tc.want)
			}
		})
	}
}
