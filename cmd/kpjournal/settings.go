package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/materialize"
)

// Settings-backed namespaces live in the media server's config.toml, not in
// the store directory; stat and dump show them when given --config, each
// marked "settings" so nobody looks for them in the journal.

// backingSettings marks a namespace or entry kept in config.toml.
const backingSettings = "settings"

// configFlag adds --config.
func (c *cli) configFlag() *string {
	return c.FS.String("config", "", "the media server's config.toml: also show its settings-backed namespaces, marked \""+backingSettings+"\"")
}

type settingsNamespace struct {
	Namespace string `json:"namespace"`
	Backing   string `json:"backing"`
	Revision  uint64 `json:"revision"`
	Entries   int    `json:"entries"`
	Bytes     int64  `json:"bytes"`
}

type settingsEntry struct {
	Backing   string          `json:"backing"`
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Revision  uint64          `json:"revision"`
	UpdatedMs int64           `json:"updated_ms"`
	Updated   string          `json:"updated"`
	Schema    string          `json:"schema"`
	Owner     string          `json:"owner"`
	Size      int             `json:"size"`
	Document  json.RawMessage `json:"document,omitempty"`
}

// settingsDoc is what --config adds to a report.
type settingsDoc struct {
	Config     string              `json:"config"`
	Namespaces []settingsNamespace `json:"namespaces"`
	Entries    []settingsEntry     `json:"entries,omitempty"`
}

// loadSettings reads config.toml's [state_store] section and checks it as
// Open does; entries and docs say what to list besides the namespaces.
func loadSettings(path string, chk *recovery.Checker, entries, docs bool) (*settingsDoc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sec, err := settings.Parse(raw)
	if err != nil {
		return nil, err
	}
	v, err := chk.SettingsView(sec)
	if err != nil {
		return nil, err
	}
	d := &settingsDoc{Config: path, Namespaces: []settingsNamespace{}}
	for _, ns := range sec.Namespaces {
		n := v.Namespace(ns)
		d.Namespaces = append(d.Namespaces, settingsNamespace{ns, backingSettings, n.Revision, n.Entries, n.Bytes})
	}
	if entries {
		v.All(func(e *materialize.Entry) bool {
			se := settingsEntry{Backing: backingSettings, Namespace: e.Namespace, Key: e.Key, Revision: e.Revision,
				UpdatedMs: e.UpdatedMs, Updated: msTime(e.UpdatedMs), Schema: e.Schema, Owner: e.Owner, Size: len(e.Document)}
			if docs {
				se.Document = documentJSON(e.Document)
			}
			d.Entries = append(d.Entries, se)
			return true
		})
	}
	return d, nil
}

// settingsProblem reports a config.toml that would keep the store closed.
func settingsProblem(path string, err error) problem {
	return problem{Severity: corruption, File: path, Offset: -1, Reason: "settings-backed namespaces: " + err.Error()}
}

func (d *settingsDoc) print(w io.Writer, docs bool) error {
	fmt.Fprintf(w, "\nsettings-backed namespaces (in %s, not in the journal):\n", d.Config)
	t := newTable(w, "NAMESPACE", "BACKING", "REVISION", "ENTRIES", "BYTES")
	for _, n := range d.Namespaces {
		t.row(n.Namespace, n.Backing, n.Revision, n.Entries, n.Bytes)
	}
	if len(d.Namespaces) == 0 {
		t.row("(none declared)", "-", "-", "-", "-")
	}
	if err := t.flush(); err != nil || d.Entries == nil {
		return err
	}
	fmt.Fprintln(w)
	cols := []string{"BACKING", "NAMESPACE", "KEY", "REVISION", "UPDATED", "SCHEMA", "OWNER", "SIZE"}
	if docs {
		cols = append(cols, "DOCUMENT")
	}
	t = newTable(w, cols...)
	for _, e := range d.Entries {
		cells := []any{e.Backing, e.Namespace, e.Key, e.Revision, e.Updated, e.Schema, e.Owner, e.Size}
		if docs {
			cells = append(cells, string(e.Document))
		}
		t.row(cells...)
	}
	return t.flush()
}
