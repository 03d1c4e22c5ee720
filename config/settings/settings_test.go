package settings

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/disk"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// section is the rendered section the splice tests put into every fixture.
func section(t *testing.T) []byte {
	t.Helper()
	b, err := Render(&Section{
		Namespaces: []string{"system/config", "group/living-room"},
		Revisions:  map[string]uint64{"group/living-room": 3, "system/config": 0},
		Entries: []Entry{
			{Namespace: "group/living-room", Key: "z", Schema: "keeppeek.media-intent.v1", Owner: "ops", Revision: 3, CreatedMs: 1, UpdatedMs: 2, Document: []byte(`{"a":"it's \"quoted\"\n"}`)},
			{Namespace: "group/living-room", Key: "a", Schema: "keeppeek.media-intent.v1", Owner: "ops", Revision: 1, CreatedMs: 1, UpdatedMs: 1, Document: []byte(`{}`)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpliceGolden splices one section into each fixture and compares the
// result with its golden file; splicing again changes nothing, and parsing
// the result gives the section back.
func TestSpliceGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"config",             // comments, a multi-line array and string whose lines start with '[', arrays of tables
		"config-interleaved", // state_store tables split by another table
		"config-none",        // no state_store yet: appended
		"config-eof",         // state_store last, no newline at the end
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(filepath.Join("testdata", name+".toml"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Splice(in, section(t))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				os.WriteFile(golden, out, 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("splice differs from %s:\n%s", golden, out)
			}
			again, err := Splice(out, section(t))
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("second splice not idempotent (%v):\n%s", err, again)
			}
			sec, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(sec.Entries) != 2 || sec.Entries[0].Key != "a" || string(sec.Entries[1].Document) != `{"a":"it's \"quoted\"\n"}` ||
				sec.Revisions["group/living-room"] != 3 || len(sec.Revisions) != 1 || strings.Join(sec.Namespaces, ",") != "group/living-room,system/config" {
				t.Fatalf("parsed back %+v", sec)
			}
		})
	}
}

// TestSpliceKeepsOutside checks the fixture with comments by search, not
// golden bytes: everything before the header and from the comment above
// the next table on is untouched.
func TestSpliceKeepsOutside(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile("testdata/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(in, []byte("\n[state_store]\nnamespaces"))
	j := bytes.Index(in, []byte("\n# Comments above the next table"))
	out, err := Splice(in, section(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, in[:i+1]) || !bytes.HasSuffix(out, in[j:]) || !bytes.Contains(out, section(t)) {
		t.Fatalf("outside bytes changed:\n%s", out)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	const entry = "[[state_store.entries]]\nnamespace = 'group/a'\nkey = 'k'\nschema = 's'\nowner = 'o'\nrevision = 1\ncreated_at_ms = 1\nupdated_at_ms = 1\ndocument = '{}'\n"
	cases := []struct {
		name, text string
		entry      int    // -1: not an EntryError
		field      string // EntryError's field, or a substring of the error
	}{
		{"syntax elsewhere", "[server]\nx = \n", -1, "config.toml"},
		{"duplicate table elsewhere", "[a]\nx=1\n[a]\ny=2\n[state_store]\nnamespaces=[]\n", -1, "config.toml"},
		{"root key", "state_store = { namespaces = [] }\n", -1, "not as a root key"},
		{"unknown field", "[state_store]\nnamespace = ['group/a']\n", -1, "namespace"},
		{"wrong type", "[state_store]\nnamespaces = 'group/a'\n", -1, "namespaces"},
		{"negative revision", "[state_store.revisions]\n'group/a' = -1\n", -1, "revisions"},
		{"missing owner", strings.Replace(entry, "owner = 'o'\n", "", 1), 0, "owner"},
		{"empty document", "[[state_store.entries]]\n" + strings.Replace(entry, "document = '{}'", "document = ''", 1)[24:], 0, "document"},
		{"zero revision", entry + strings.Replace(entry, "revision = 1", "revision = 0", 1), 1, "revision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(c.text))
			if err == nil {
				t.Fatal("parsed")
			}
			var ee *EntryError
			if c.entry >= 0 {
				if !errors.As(err, &ee) || ee.Index != c.entry || ee.Field != c.field || !errors.Is(err, ErrMissing) {
					t.Fatalf("want entries[%d] field %s, got %v", c.entry, c.field, err)
				}
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("want a syntax error naming %q, got %v", c.field, err)
			}
		})
	}
}

func TestParseNoSection(t *testing.T) {
	t.Parallel()
	sec, err := Parse([]byte("[server]\nx = 1\n"))
	if err != nil || len(sec.Namespaces) != 0 || len(sec.Entries) != 0 {
		t.Fatalf("%+v %v", sec, err)
	}
}

func TestFileReplace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	in, err := os.ReadFile("testdata/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, in, 0o640); err != nil {
		t.Fatal(err)
	}
	// A temporary file a killed rewrite left behind.
	stale := filepath.Join(dir, ".config.toml.tmp-123")
	os.WriteFile(stale, []byte("half"), 0o600)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temporary file kept: %v", err)
	}
	if _, err := Open(path); !errors.Is(err, disk.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := f.Replace(section(t)); err != nil {
		t.Fatal(err)
	}
	got, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Splice(in, section(t))
	if !bytes.Equal(got, want) {
		t.Fatalf("file after Replace:\n%s", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 kept", st.Mode())
	}
	if names, _ := filepath.Glob(filepath.Join(dir, ".config.toml.tmp-*")); len(names) != 0 {
		t.Fatalf("temporary files left: %v", names)
	}
	if _, err := Open(filepath.Join(dir, "missing.toml")); !os.IsNotExist(err) {
		t.Fatalf("Open of a missing file: %v", err)
	}
}
