package statestore

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/keeppeek/statestore/config/settings"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
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
//	    quotas, which count both homes together, see one exact state)
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

// settingsBackend is the open config.toml and the entries it holds: the
// home of the settings-backed namespaces.
type settingsBackend struct {
	declared map[string]bool // fixed at Open: read without locks
	names    []string        // the declaration, as rendered back
	adm      admission
	pipe     *pipeline       // its exclusive sections stop journal commits
	watches  *watch.Registry // nil until Open has finished

	mu     sync.Mutex // the configuration lock
	file   *settings.File
	closed bool
	// view is the published settings state: never mutated after
	// publication, read without locks (Get, quota checks).
	view atomic.Pointer[materialize.View]
}

// openSettings opens the config.toml at path, validates its section with
// the rules of journal replay and checks the quotas over both homes
// together (journal is the journal's replayed state). Nothing is served
// yet. On error nothing is left held.
func openSettings(path string, chk *recovery.Checker, journal *materialize.View) (*settingsBackend, error) {
	f, err := settings.Open(path)
	if err != nil {
		return nil, fmt.Errorf("settings %s: %w", path, err)
	}
	sb, err := loadSettings(f, chk, journal)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("settings %s: %w", path, err)
	}
	return sb, nil
}

func loadSettings(f *settings.File, chk *recovery.Checker, jv *materialize.View) (*settingsBackend, error) {
	raw, err := f.Read()
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
	for _, ns := range sec.Namespaces {
		if n := jv.Namespace(ns); n.Revision != 0 {
			return nil, fmt.Errorf("namespace %q is declared in [%s] but the journal holds its revision %d: a namespace is settings-backed or journal-backed, never both", ns, settings.SectionName, n.Revision)
		}
	}
	if err := checkCombined(chk.Limits(), jv, v); err != nil {
		return nil, err
	}
	sb := &settingsBackend{declared: map[string]bool{}, names: slices.Sorted(slices.Values(sec.Namespaces)), file: f}
	for _, ns := range sec.Namespaces {
		sb.declared[ns] = true
	}
	sb.view.Store(v)
	return sb, nil
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

// holds reports whether namespace is settings-backed. A nil backend (no
// Options.Settings) holds none.
func (sb *settingsBackend) holds(namespace string) bool { return sb != nil && sb.declared[namespace] }

func (sb *settingsBackend) published() *materialize.View { return sb.view.Load() }

// commit runs o's admission and the rewrite of config.toml in an exclusive
// section of the journal pipeline, under the configuration lock.
func (sb *settingsBackend) commit(o *op) (Entry, error) {
	if o.ttl != 0 {
		return Entry{}, newErr(TTLInvalid, "ttl", "namespace %q is settings-backed: live configuration takes no TTL", o.ns)
	}
	var res Entry
	err := sb.pipe.exclusive(func() error {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		if sb.closed {
			return newErr(Unavailable, "store", "the store is closed")
		}
		b := sb.adm.newBatch(sb.view.Load())
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
		sb.watches.Publish(b.events())
		res = *e
		return nil
	})
	return res, err
}

// atCommitPoint runs fn under the configuration lock, which every
// settings commit holds until its updates are published. Settings entries
// carry no lease, so fn never finds one lapsed.
func (sb *settingsBackend) atCommitPoint(fn func(v *materialize.View) (bool, error)) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	_, err := fn(sb.view.Load())
	return err
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

// close waits for a settings commit in progress and releases the
// configuration lock. A nil backend has nothing to close.
func (sb *settingsBackend) close() error {
	if sb == nil {
		return nil
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		return nil
	}
	sb.closed = true
	return sb.file.Close()
}

// refuseBackup refuses a runtime backup that holds a settings-backed
// namespace: those travel with the configuration, never with the runtime
// store.
func (sb *settingsBackend) refuseBackup(v *materialize.View) error {
	if sb == nil {
		return nil
	}
	var err error
	v.Namespaces(func(name string, _ materialize.Namespace) bool {
		if sb.holds(name) {
			err = fmt.Errorf("the backup holds namespace %q, which is settings-backed here: settings travel in config.toml, not in a runtime backup", name)
		}
		return err == nil
	})
	return err
}
