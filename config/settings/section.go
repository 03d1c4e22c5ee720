package settings

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// SectionName is the top-level table of config.toml this package owns.
const SectionName = "state_store"

// Section is the decoded state_store section.
type Section struct {
	// Namespaces are the declared settings-backed namespaces, sorted.
	Namespaces []string
	// Revisions are the namespace revision counters; a namespace that never
	// saw a mutation has none.
	Revisions map[string]uint64
	// Entries are the settings-backed entries in (namespace, key) order.
	Entries []Entry
}

// Entry is one settings-backed entry as the section holds it.
type Entry struct {
	Namespace string
	Key       string
	Schema    string
	Owner     string
	Revision  uint64
	CreatedMs int64
	UpdatedMs int64
	Document  []byte
}

// EntryError names the entry of the section at fault, and the field.
type EntryError struct {
	Index     int    // position in state_store.entries
	Namespace string // as written, possibly empty
	Key       string
	Field     string
	Err       error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("%s.entries[%d] (namespace %q, key %q): %s: %v", SectionName, e.Index, e.Namespace, e.Key, e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// SyntaxError is a config.toml that is not valid TOML, or whose
// state_store section cannot be decoded; it carries the parser's error.
type SyntaxError struct {
	Err error
}

func (e *SyntaxError) Error() string { return "config.toml: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *SyntaxError) Unwrap() error { return e.Err }

// ErrMissing is wrapped by an EntryError for a required field left out.
var ErrMissing = errors.New("required field is missing")

// The TOML shape of the section. Field tags are the file's spelling.
type fileDoc struct {
	StateStore sectionDoc `toml:"state_store"`
}

type sectionDoc struct {
	Namespaces []string          `toml:"namespaces" comment:"Settings-backed namespaces: live configuration written by the KeepPeek state store.\nDeclare a namespace here to back it by this file; the store rewrites the rest of this section."`
	Revisions  map[string]uint64 `toml:"revisions,omitempty"`
	Entries    []entryDoc        `toml:"entries,omitempty"`
}

type entryDoc struct {
	Namespace   string `toml:"namespace"`
	Key         string `toml:"key"`
	Schema      string `toml:"schema"`
	Owner       string `toml:"owner"`
	Revision    uint64 `toml:"revision"`
	CreatedAtMs int64  `toml:"created_at_ms"`
	UpdatedAtMs int64  `toml:"updated_at_ms"`
	Document    string `toml:"document"`
}

// Parse decodes the state_store section of a whole config.toml. A file
// without the section declares no namespaces. The whole file must be
// valid TOML: a file the media server could not read is not one the store
// should rewrite.
func Parse(config []byte) (*Section, error) {
	spans, err := locate(config)
	if err != nil {
		return nil, err
	}
	var whole map[string]any
	if err := toml.Unmarshal(config, &whole); err != nil {
		return nil, &SyntaxError{Err: err}
	}
	sec := &Section{Revisions: map[string]uint64{}}
	if len(spans) == 0 {
		return sec, nil
	}
	var own []byte
	for _, sp := range spans {
		own = append(own, config[sp.start:sp.end]...)
		own = append(own, '\n')
	}
	// Types first, over the whole file, so positions are the file's.
	var doc fileDoc
	if err := toml.Unmarshal(config, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			err = fmt.Errorf("line %d, column %d, key %s: %w", row, col, strings.Join(de.Key(), "."), err)
		}
		return nil, &SyntaxError{Err: fmt.Errorf("section [%s]: %w", SectionName, err)}
	}
	// Then the section's own bytes strictly: a misspelt field in the
	// section is an error, while other sections stay the media server's.
	dec := toml.NewDecoder(bytes.NewReader(own))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fileDoc{}); err != nil {
		// The strict error's own message does not say which field; its
		// String does, with the line of each.
		var sme *toml.StrictMissingError
		if errors.As(err, &sme) {
			err = fmt.Errorf("%w:\n%s", err, sme.String())
		}
		return nil, &SyntaxError{Err: fmt.Errorf("section [%s]: %w", SectionName, err)}
	}
	sec.Namespaces = slices.Clone(doc.StateStore.Namespaces)
	for ns, rev := range doc.StateStore.Revisions {
		sec.Revisions[ns] = rev
	}
	for i, d := range doc.StateStore.Entries {
		e := Entry{Namespace: d.Namespace, Key: d.Key, Schema: d.Schema, Owner: d.Owner, Revision: d.Revision,
			CreatedMs: d.CreatedAtMs, UpdatedMs: d.UpdatedAtMs, Document: []byte(d.Document)}
		for _, f := range []struct{ name, v string }{
			{"namespace", d.Namespace}, {"key", d.Key}, {"schema", d.Schema}, {"owner", d.Owner}, {"document", d.Document},
		} {
			if f.v == "" {
				return nil, &EntryError{Index: i, Namespace: d.Namespace, Key: d.Key, Field: f.name, Err: ErrMissing}
			}
		}
		if d.Revision == 0 {
			return nil, &EntryError{Index: i, Namespace: d.Namespace, Key: d.Key, Field: "revision", Err: ErrMissing}
		}
		sec.Entries = append(sec.Entries, e)
	}
	return sec, nil
}

// Render encodes sec as the state_store section: namespaces sorted,
// revisions (nonzero only) sorted by namespace, entries in (namespace,
// key) order, so the same state always renders to the same bytes. The
// result ends with exactly one newline after its last line of content,
// which keeps Splice idempotent.
func Render(sec *Section) ([]byte, error) {
	doc := fileDoc{StateStore: sectionDoc{Namespaces: slices.Sorted(slices.Values(sec.Namespaces))}}
	if doc.StateStore.Namespaces == nil {
		doc.StateStore.Namespaces = []string{}
	}
	for ns, rev := range sec.Revisions {
		if rev == 0 {
			continue
		}
		if doc.StateStore.Revisions == nil {
			doc.StateStore.Revisions = map[string]uint64{}
		}
		doc.StateStore.Revisions[ns] = rev
	}
	entries := slices.Clone(sec.Entries)
	slices.SortFunc(entries, func(a, b Entry) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, e := range entries {
		doc.StateStore.Entries = append(doc.StateStore.Entries, entryDoc{Namespace: e.Namespace, Key: e.Key,
			Schema: e.Schema, Owner: e.Owner, Revision: e.Revision, CreatedAtMs: e.CreatedMs,
			UpdatedAtMs: e.UpdatedMs, Document: string(e.Document)})
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render [%s]: %w", SectionName, err)
	}
	return append(bytes.TrimRight(out, "\r\n"), '\n'), nil
}
