package configzip

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var files = Files{Config: []byte("[server]\nx = 1\n"), Secrets: []byte("[turn]\npassword = \"p\"\n")}

func written(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, files); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := written(t)
	got, m, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Config, files.Config) || !bytes.Equal(got.Secrets, files.Secrets) {
		t.Fatalf("files %q", got)
	}
	if m.Format != 3 || len(m.Files) != 2 || m.Files[0].Size != int64(len(files.Config)) || len(m.Files[1].SHA256) != 64 {
		t.Fatalf("manifest %+v", m)
	}
}

// rezip rebuilds an archive from entries and a comment.
func rezip(t *testing.T, comment string, entries ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		w, _ := zw.Create(e[0])
		w.Write([]byte(e[1]))
	}
	zw.SetComment(comment)
	zw.Close()
	return b.Bytes()
}

func TestReadRefuses(t *testing.T) {
	t.Parallel()
	good := written(t)
	zr, _ := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	manifest := zr.Comment
	cfg, sec := string(files.Config), string(files.Secrets)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"not a zip", []byte("PK nonsense"), "zip"},
		{"no manifest", rezip(t, "", [2]string{ConfigName, cfg}, [2]string{SecretsName, sec}), "manifest"},
		{"format 2", rezip(t, strings.Replace(manifest, `"format":3`, `"format":2`, 1), [2]string{ConfigName, cfg}, [2]string{SecretsName, sec}), "format 2"},
		{"extra file", rezip(t, manifest, [2]string{ConfigName, cfg}, [2]string{SecretsName, sec}, [2]string{"state-store.db", "x"}), "archive holds"},
		{"missing secrets", rezip(t, manifest, [2]string{ConfigName, cfg}), "archive holds"},
		{"config altered", rezip(t, manifest, [2]string{ConfigName, cfg + "#"}, [2]string{SecretsName, sec}), "config.toml: size"},
		{"secrets altered", rezip(t, manifest, [2]string{ConfigName, cfg}, [2]string{SecretsName, "[turn]\npassword = \"q\"\n"}), "secrets.toml: size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := Read(bytes.NewReader(c.b), int64(len(c.b)))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want ErrInvalid naming %q, got %v", c.want, err)
			}
			if got.Config != nil || got.Secrets != nil {
				t.Fatalf("a refused archive returned files %q", got)
			}
		})
	}
}

// TestReadBoundsBeforeDecompressing: an entry whose header claims more
// than MaxFileBytes is refused on the header alone; its data, garbage that
// no inflater would accept, is never read.
func TestReadBoundsBeforeDecompressing(t *testing.T) {
	t.Parallel()
	good := written(t)
	zr, _ := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: ConfigName, Method: zip.Deflate, CompressedSize64: 5, UncompressedSize64: MaxFileBytes + 1})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff})
	w, _ = zw.Create(SecretsName)
	w.Write(files.Secrets)
	zw.SetComment(zr.Comment)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = Read(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "exceeds the 16777216-byte limit") {
		t.Fatalf("want the header's size refused, got %v", err)
	}
}

func TestInstall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, s := filepath.Join(dir, "config.toml"), filepath.Join(dir, "secrets.toml")
	os.WriteFile(c, []byte("old"), 0o644)
	if err := Install(files, c, s); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
		perm os.FileMode
	}{{c, files.Config, 0o644}, {s, files.Secrets, 0o600}} {
		b, err := os.ReadFile(f.path)
		st, _ := os.Stat(f.path)
		if err != nil || !bytes.Equal(b, f.want) || st.Mode().Perm() != f.perm {
			t.Fatalf("%s: %q %v %v", f.path, b, st.Mode(), err)
		}
	}
}
