package recovery

import (
	"errors"
	"fmt"

	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// SettingsView builds the settings state of a parsed [state_store] section
// with the checks a checkpoint image gets at load (identifiers, registered
// schemas, owners, revisions within their namespace counters, duplicates,
// bounds) plus a full validation of every document, as admission did.
// Errors name the entry at fault (a *settings.EntryError).
func (c *Checker) SettingsView(sec *settings.Section) (*materialize.View, error) {
	declared := map[string]bool{}
	for _, ns := range sec.Namespaces {
		if err := rules.Namespace(ns, c.limits.MaxNamespaceBytes); err != nil {
			return nil, fmt.Errorf("[%s] namespaces: %w", settings.SectionName, err)
		}
		if declared[ns] {
			return nil, fmt.Errorf("[%s] namespaces: %q is declared twice", settings.SectionName, ns)
		}
		declared[ns] = true
	}
	counters := map[string]materialize.Namespace{}
	for ns, rev := range sec.Revisions {
		if !declared[ns] {
			return nil, fmt.Errorf("[%s.revisions]: namespace %q is not declared in namespaces", settings.SectionName, ns)
		}
		counters[ns] = materialize.Namespace{Revision: rev}
	}
	entries := make([]*materialize.Entry, len(sec.Entries))
	seen := map[[2]string]int{}
	for i, se := range sec.Entries {
		fail := func(field string, err error) error {
			return &settings.EntryError{Index: i, Namespace: se.Namespace, Key: se.Key, Field: field, Err: err}
		}
		if !declared[se.Namespace] {
			return nil, fail("namespace", errors.New("not a declared settings namespace"))
		}
		if j, dup := seen[[2]string{se.Namespace, se.Key}]; dup {
			return nil, fail("key", fmt.Errorf("the key of entries[%d] again", j))
		}
		seen[[2]string{se.Namespace, se.Key}] = i
		rec := &journal.Record{Kind: journal.KindPut, Namespace: se.Namespace, Key: se.Key, Schema: se.Schema,
			Owner: se.Owner, Revision: se.Revision, CreatedMs: se.CreatedMs, UpdatedMs: se.UpdatedMs, Document: se.Document}
		// Metadata before the document, as replay does.
		if err := c.CheckMetadata(rec); err != nil {
			return nil, fail(errorField(err, "entry"), err)
		}
		if se.CreatedMs <= 0 || se.UpdatedMs < se.CreatedMs {
			return nil, fail("updated_at_ms", fmt.Errorf("timestamps created %d, updated %d: want 0 < created <= updated", se.CreatedMs, se.UpdatedMs))
		}
		if err := c.limits.CheckDocument(len(se.Document)); err != nil {
			return nil, fail("document", err)
		}
		if err := c.schemas.Validate(rec.Schema, rec.Document); err != nil {
			return nil, fail("document", err)
		}
		n := counters[se.Namespace]
		n.Entries++
		n.Bytes += int64(len(se.Document))
		counters[se.Namespace] = n
		entries[i] = &materialize.Entry{Namespace: se.Namespace, Key: se.Key, Schema: se.Schema, Owner: se.Owner,
			Revision: se.Revision, CreatedMs: se.CreatedMs, UpdatedMs: se.UpdatedMs, Document: se.Document}
	}
	v, err := materialize.Restore(counters, entries)
	if err == nil {
		err = c.CheckView(v)
	}
	if err != nil {
		var ae *materialize.ApplyError
		if errors.As(err, &ae) {
			for i, se := range sec.Entries {
				if se.Namespace == ae.Namespace && se.Key == ae.Key {
					return nil, &settings.EntryError{Index: i, Namespace: se.Namespace, Key: se.Key, Field: "revision", Err: err}
				}
			}
		}
		return nil, fmt.Errorf("[%s]: %w", settings.SectionName, err)
	}
	return v, nil
}

// errorField is the field a broken rule names, or def.
func errorField(err error, def string) string {
	var e *rules.Error
	if errors.As(err, &e) && e.Field != "" {
		return e.Field
	}
	return def
}
