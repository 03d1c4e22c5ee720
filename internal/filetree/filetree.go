// Package filetree fingerprints a directory tree, for tests that must show
// an operation changed no file: every file is named by its path relative to
// the root and the SHA-256 of its bytes, every directory by "dir", so a
// file or directory added, removed or changed anywhere shows in Diff.
package filetree

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Hashes fingerprints the tree under root.
func Hashes(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	return out, err
}

// Diff lists, in path order, what differs between two fingerprints:
// "PATH changed or removed" and "PATH added". It is empty when they agree.
func Diff(before, after map[string]string) []string {
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if after[k] != before[k] {
			diff = append(diff, k+" changed or removed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			diff = append(diff, k+" added")
		}
	}
	return diff
}
