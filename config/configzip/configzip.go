// Package configzip writes and reads the media server's format-3
// configuration ZIP: exactly two files, config.toml and plaintext
// secrets.toml, with the manifest in the ZIP comment. It holds no database
// and no media; the state store's settings-backed entries travel in it
// because they live in config.toml's [state_store] section.
//
// The manifest is the ZIP comment, one line of JSON:
//
//	{"format":3,"files":[
//	  {"name":"config.toml","size":1234,"sha256":"<64 hex digits>"},
//	  {"name":"secrets.toml","size":56,"sha256":"<64 hex digits>"}]}
//
// # Invariants
//
//  1. Write produces exactly those two entries, in that order, and a
//     manifest naming each with its size and SHA-256.
//     Code: Write, info.
//     Tests: TestRoundTrip.
//  2. Read accepts an archive only if it holds exactly those two entries,
//     the comment is a format-3 manifest naming exactly them, and every
//     size and digest matches; anything else is an error naming what
//     disagrees, and nothing is returned.
//     Code: Read.
//     Tests: TestReadRefuses, TestRoundTrip.
//  3. Sizes are bounded (MaxFileBytes) before anything is decompressed in
//     full, so a hostile archive cannot exhaust memory.
//     Code: readBounded, MaxFileBytes, Write.
//     Tests: TestReadBoundsBeforeDecompressing.
package configzip

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/keeppeek/statestore/internal/disk"
)

// Format is the configuration ZIP format this package writes and reads.
const Format = 3

// The two files of a format-3 archive.
const (
	ConfigName  = "config.toml"
	SecretsName = "secrets.toml"
)

// MaxFileBytes bounds each file of an archive.
const MaxFileBytes = 16 << 20

// Manifest is the archive's ZIP comment.
type Manifest struct {
	Format int        `json:"format"`
	Files  []FileInfo `json:"files"`
}

// FileInfo describes one file of the archive.
type FileInfo struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lower-case hex
}

// Files are the contents of a configuration ZIP.
type Files struct {
	Config  []byte // config.toml
	Secrets []byte // secrets.toml (plaintext)
}

// ErrInvalid is wrapped by every refusal of Read.
var ErrInvalid = errors.New("invalid configuration ZIP")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func info(name string, b []byte) FileInfo {
	sum := sha256.Sum256(b)
	return FileInfo{Name: name, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

// Write writes f as a format-3 configuration ZIP to w.
func Write(w io.Writer, f Files) error {
	for _, c := range []struct {
		name string
		b    []byte
	}{{ConfigName, f.Config}, {SecretsName, f.Secrets}} {
		if len(c.b) > MaxFileBytes {
			return fmt.Errorf("%s: %d bytes exceeds the %d-byte limit", c.name, len(c.b), MaxFileBytes)
		}
	}
	m := Manifest{Format: Format, Files: []FileInfo{info(ConfigName, f.Config), info(SecretsName, f.Secrets)}}
	comment, err := json.Marshal(m)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, c := range []struct {
		name string
		b    []byte
	}{{ConfigName, f.Config}, {SecretsName, f.Secrets}} {
		fw, err := zw.Create(c.name)
		if err != nil {
			return err
		}
		if _, err := fw.Write(c.b); err != nil {
			return err
		}
	}
	if err := zw.SetComment(string(comment)); err != nil {
		return err
	}
	return zw.Close()
}

// Read reads and verifies a configuration ZIP of size bytes.
func Read(r io.ReaderAt, size int64) (Files, Manifest, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return Files{}, Manifest{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader([]byte(zr.Comment)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Files{}, Manifest{}, invalid("ZIP comment is not a manifest: %v", err)
	}
	if m.Format != Format {
		return Files{}, m, invalid("manifest format %d, want %d", m.Format, Format)
	}
	want := []string{ConfigName, SecretsName}
	var names []string
	for _, fi := range m.Files {
		names = append(names, fi.Name)
	}
	if !slices.Equal(names, want) {
		return Files{}, m, invalid("manifest lists %q, want exactly %q", names, want)
	}
	names = names[:0]
	for _, zf := range zr.File {
		names = append(names, zf.Name)
	}
	if !slices.Equal(names, want) {
		return Files{}, m, invalid("archive holds %q, want exactly %q", names, want)
	}
	var out [2][]byte
	for i, zf := range zr.File {
		b, err := readBounded(zf)
		if err != nil {
			return Files{}, m, err
		}
		if got := info(zf.Name, b); got != m.Files[i] {
			return Files{}, m, invalid("%s: size %d sha256 %s, manifest says size %d sha256 %s", zf.Name, got.Size, got.SHA256, m.Files[i].Size, m.Files[i].SHA256)
		}
		out[i] = b
	}
	return Files{Config: out[0], Secrets: out[1]}, m, nil
}

// readBounded reads one entry, refusing more than MaxFileBytes whatever
// its header claims.
func readBounded(zf *zip.File) ([]byte, error) {
	if zf.UncompressedSize64 > MaxFileBytes {
		return nil, invalid("%s: %d bytes exceeds the %d-byte limit", zf.Name, zf.UncompressedSize64, MaxFileBytes)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, zf.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, zf.Name, err)
	}
	if len(b) > MaxFileBytes {
		return nil, invalid("%s: more than %d bytes", zf.Name, MaxFileBytes)
	}
	return b, nil
}

// Install writes f's files to configPath and secretsPath, each atomically
// and durably (config.toml with mode 0644, secrets.toml 0600, as the
// plaintext secrets must be private). config.toml goes first: the state
// store reads only it.
func Install(f Files, configPath, secretsPath string) error {
	for _, c := range []struct {
		path string
		perm os.FileMode
		b    []byte
	}{{configPath, 0o644, f.Config}, {secretsPath, 0o600, f.Secrets}} {
		err := disk.WriteAtomicPerm(c.path, c.perm, func(w io.Writer) error {
			_, err := w.Write(c.b)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
