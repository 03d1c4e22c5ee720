package statestore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// Settings-backed namespaces: live configuration kept in
// the [state_store] section of the media server's config.toml
// (Options.Settings) instead of the journal, so it travels inside the
// configuration ZIP. Which namespaces are settings-backed is declared in
// that section itself (`namespaces = [...]`, see package settings): the
// declaration travels and restores with the entries it governs, and is
// fixed while the store is open.
//
// Every call on a declared namespace takes the same path as on a journal
// namespace up to admission — identifiers, policy, document size, schema
// (Put, Get, Delete, Watch do them before routing) — and admission is the
// same code too (batch.admit: compare-and-set, quotas), run against the
// settings view. Then, instead of the journal:
//
//	exclusive section (no journal batch is admitted or in flight, so the
//	    quotas, which count both kinds together, see one exact state)
//	  -> configuration lock (settingsBackend.mu)
//	  -> admit against the settings view
//	  -> config.toml rewritten atomically (temp, fsync, rename, dir fsync)
//	  -> settings view published, watch updates fanned out
//	  -> reply
//
// A failed rewrite answers STORAGE and publishes nothing: memory and file
// keep the old state. A watch snapshot of a settings namespace is captured
// and registered under the configuration lock, so no committed mutation
// falls between the two. Settings entries carry no lease: any TTL is
// TTL_INVALID, so no EXPIRE ever reaches their watches. Settings writes
// stall journal admission for one file rewrite; configuration changes are
// rare and the exactness of the combined quotas is worth it.
//
// Runtime Backup and Restore cover only the journal's state: a backup never
// holds a settings namespace, and Restore refuses a backup that does. A
// Restore still closes settings watches with RESTORED, like every watch:
// no watch carries on across a restore, whichever state it covered.

// settingsBackend is the open config.toml and the entries it holds.
type settingsBackend struct {
	declared map[string]bool // fixed at Open: read without locks
	names    []string        // the declaration, as rendered back

	mu     sync.Mutex // the configuration lock
	file   *settings.File
	closed bool
	// view is the published settings state: never mutated after
	// publication, read without locks (Get, quota checks).
	view atomic.Pointer[materialize.View]
}

// isSettings reports whether namespace is settings-backed.
func (s *Store) isSettings(namespace string) bool {
	return s.settings != nil && s.settings.declared[namespace]
}

// SettingsNamespaces returns the settings-backed namespaces, sorted; none
// without Options.Settings.
func (s *Store) SettingsNamespaces() []string {
	if s.settings == nil {
		return nil
	}
	return append([]string(nil), s.settings.names...)
}

// openSettings opens Options.Settings, validates its section with the rules
// of journal replay and checks the quotas over both kinds of namespace
// together. The journal's state is loaded; nothing is served yet. On error
// nothing is left held.
func (s *Store) openSettings() error {
	if s.opts.Settings == "" {
		return nil
	}
	f, err := settings.Open(s.opts.Settings)
	if err != nil {
		return fmt.Errorf("settings %s: %w", s.opts.Settings, err)
	}
	sb, err := s.loadSettings(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("settings %s: %w", s.opts.Settings, err)
	}
	s.settings = sb
	return nil
}

func (s *Store) loadSettings(f *settings.File) (*settingsBackend, error) {
	raw, err := f.Read()
	if err != nil {
		return nil, err
	}
	sec, err := settings.Parse(raw)
	if err != nil {
		return nil, err
	}
	v, err := s.checker().SettingsView(sec)
	if err != nil {
		return nil, err
	}
	jv := s.view.Load()
	for _, ns := range sec.Namespaces {
		if n := jv.Namespace(ns); n.Revision != 0 {
			return nil, fmt.Errorf("namespace %q is declared in [%s] but the journal holds its revision %d: a namespace is settings-backed or journal-backed, never both", ns, settings.SectionName, n.Revision)
		}
	}
	if err := checkCombined(s.limits, jv, v); err != nil {
		return nil, err
	}
	sb := &settingsBackend{declared: map[string]bool{}, names: slices.Sorted(slices.Values(sec.Namespaces)), file: f}
	for _, ns := range sec.Namespaces {
		sb.declared[ns] = true
	}
	sb.view.Store(v)
	return sb, nil
}

// SettingsView builds the settings state of a parsed [state_store] section
// with the checks a checkpoint image gets at load (identifiers, registered
// schemas, owners, revisions within their namespace counters, duplicates,
// bounds) plus a full validation of every document, as admission did.
// Errors name the entry at fault (a *settings.EntryError).
func (c *ReplayChecker) SettingsView(sec *settings.Section) (*materialize.View, error) {
	declared := map[string]bool{}
	for _, ns := range sec.Namespaces {
		if err := checkNamespace(ns, c.limits.MaxNamespaceBytes); err != nil {
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
		if err := c.CheckDocument(rec); err != nil {
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

// errorField is the field an *Error names, or def.
func errorField(err error, def string) string {
	var e *Error
	if errors.As(err, &e) && e.Field != "" {
		return e.Field
	}
	return def
}

// checkCombined applies the store-wide bounds to the journal's and the
// settings' state together, as admission counts them.
func checkCombined(l quota.Limits, a, b *materialize.View) error {
	_, ab, an := a.Totals()
	_, bb, bn := b.Totals()
	if an+bn > l.MaxNamespaces {
		return &quota.Exceeded{Bound: quota.BoundNamespaces, Limit: int64(l.MaxNamespaces), Value: int64(an + bn)}
	}
	if ab+bb > l.MaxTotalBytes {
		return &quota.Exceeded{Bound: quota.BoundTotalBytes, Limit: l.MaxTotalBytes, Value: ab + bb}
	}
	return nil
}

// otherUsage adds to u, the usage counted in the view that holds namespace,
// the usage of the other kind of namespace, so the quotas count both kinds
// together.
func (s *Store) otherUsage(u quota.Usage, namespace string) quota.Usage {
	if s.settings == nil {
		return u
	}
	other := s.settings.view.Load()
	if s.isSettings(namespace) {
		other = s.view.Load()
	}
	_, bytes, nss := other.Totals()
	u.TotalBytes += bytes
	u.Namespaces += nss
	return u
}

// commitOp commits o through the backend of its namespace.
func (s *Store) commitOp(o *op) (Entry, error) {
	if !s.isSettings(o.ns) {
		return s.submit(o)
	}
	if o.ttl != 0 {
		return Entry{}, newErr(TTLInvalid, "ttl", "namespace %q is settings-backed: live configuration takes no TTL", o.ns)
	}
	var res Entry
	err := s.exclusive(func() error {
		sb := s.settings
		sb.mu.Lock()
		defer sb.mu.Unlock()
		if sb.closed {
			return newErr(Unavailable, "store", "the store is closed")
		}
		b := s.newBatch(sb.view.Load())
		e, err := b.admit(o)
		if err != nil {
			return err
		}
		section, err := settings.Render(sectionOf(sb.names, b.view))
		if err == nil {
			err = sb.file.Replace(section)
		}
		if err != nil {
			return &Error{Code: Storage, Field: "config.toml", Message: fmt.Sprintf("rewrite %s: %v", sb.file.Path(), err), Err: err}
		}
		// Durable: only now does anyone see it.
		sb.view.Store(b.view)
		s.watches.Publish(b.events())
		res = *e
		return nil
	})
	return res, err
}

// sectionOf renders the settings view back into its section.
func sectionOf(names []string, v *materialize.View) *settings.Section {
	sec := &settings.Section{Namespaces: names, Revisions: map[string]uint64{}}
	v.Namespaces(func(name string, n materialize.Namespace) bool {
		sec.Revisions[name] = n.Revision
		return true
	})
	v.All(func(e *Entry) bool {
		sec.Entries = append(sec.Entries, settings.Entry{Namespace: e.Namespace, Key: e.Key, Schema: e.Schema,
			Owner: e.Owner, Revision: e.Revision, CreatedMs: e.CreatedMs, UpdatedMs: e.UpdatedMs, Document: e.Document})
		return true
	})
	return sec
}

// readView returns the published view holding namespace.
func (s *Store) readView(namespace string) *materialize.View {
	if s.isSettings(namespace) {
		return s.settings.view.Load()
	}
	return s.view.Load()
}

// watchSettings registers a watch on a settings namespace: snapshot and
// registration under the configuration lock, which every settings commit
// holds until its updates are published.
func (s *Store) watchSettings(ss *Session, req WatchRequest) (WatchResult, error) {
	sb := s.settings
	sb.mu.Lock()
	defer sb.mu.Unlock()
	v := sb.view.Load()
	snap, _ := s.capture(v, req, 0) // settings entries never expire
	return s.register(ss, req, v.Namespace(req.Namespace).Revision, snap)
}

// closeSettings waits for a settings commit in progress and releases the
// configuration lock.
func (s *Store) closeSettings() error {
	if s.settings == nil {
		return nil
	}
	sb := s.settings
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		return nil
	}
	sb.closed = true
	return sb.file.Close()
}

// checkNoSettings refuses a runtime backup that holds a settings-backed
// namespace: those travel with the configuration, never with the runtime
// store.
func (s *Store) checkNoSettings(v *materialize.View) error {
	if s.settings == nil {
		return nil
	}
	var err error
	v.Namespaces(func(name string, _ materialize.Namespace) bool {
		if s.isSettings(name) {
			err = fmt.Errorf("the backup holds namespace %q, which is settings-backed here: settings travel in config.toml, not in a runtime backup", name)
		}
		return err == nil
	})
	return err
}

// totals are the entries, value bytes and namespaces holding entries of
// both kinds of namespace together.
func (s *Store) totals() (entries int, bytes int64, namespaces int) {
	entries, bytes, namespaces = s.view.Load().Totals()
	if s.settings != nil {
		e, b, n := s.settings.view.Load().Totals()
		entries, bytes, namespaces = entries+e, bytes+b, namespaces+n
	}
	return entries, bytes, namespaces
}
