// Package materialize holds the in-memory view that journal records are
// applied to: entries ordered by (namespace, key) in a B-tree, per-namespace
// revision counters, entry and byte counters, and the lease deadline index.
//
// A View is not safe for concurrent mutation. Clone is O(1) and
// copy-on-write: the store applies each batch to a clone and publishes it
// only after the journal fsync, so a published view is never written again
// and any number of readers (gets, watch snapshots, checkpoints, backups)
// can read it without locks.
//
// # Invariants
//
// Apply refuses any record that would break one, changing nothing.
//
//  1. Every record advances its namespace's revision by exactly one; a
//     namespace's counter is kept when its last entry goes, so revisions
//     never repeat while the view lives.
//     Code: CheckTransition, View.Apply, View.put.
//     Tests: TestApplyRefusesAndChangesNothing, TestApplyCounters.
//  2. Entry.Revision is the namespace revision of the entry's last PUT.
//     Code: View.put.
//     Tests: TestApplyCounters.
//  3. DELETE and EXPIRE name an existing key; EXPIRE only a leased one.
//     Code: CheckTransition, View.Inspect.
//     Tests: TestApplyRefusesAndChangesNothing.
//  4. Counters (entries and value bytes, per namespace and in total) always
//     equal what the tree holds.
//     Code: View.count, View.uncount, Restore.
//     Tests: TestApplyCounters, TestRestoreChecks.
//  5. The deadline index holds exactly the entries with a lease.
//     Code: View.count, View.uncount.
//     Tests: TestCloneIsolation, TestDueInclusiveAndOrdered.
package materialize

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/btree"

	"github.com/keeppeek/statestore/journal"
)

// Entry is one complete state document and the metadata the store assigns.
// Entries handed out by a View must be treated as immutable.
type Entry struct {
	Namespace string
	Key       string
	Schema    string
	Owner     string // the principal that wrote the current document
	Revision  uint64 // namespace revision of the last PUT
	CreatedMs int64  // when the key was created (kept across replacements)
	UpdatedMs int64  // when the current document was written
	ExpiresMs int64  // lease deadline; 0 means no lease
	Document  []byte
}

// Size is the entry's value bytes, the unit of the byte counters.
func (e *Entry) Size() int64 { return int64(len(e.Document)) }

// Namespace holds one namespace's counters.
type Namespace struct {
	Revision uint64 // last revision any record produced in this namespace
	Entries  int
	Bytes    int64
}

// ErrInvalid is wrapped by every refusal of Apply.
var ErrInvalid = errors.New("record does not apply to the view")

// ApplyError says why a record cannot be applied.
type ApplyError struct {
	Namespace, Key string
	Reason         string
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("%s %q in namespace %q: %s", "key", e.Key, e.Namespace, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) match.
func (e *ApplyError) Unwrap() error { return ErrInvalid }

type nsItem struct {
	name string
	Namespace
}

func lessNS(a, b nsItem) bool { return a.name < b.name }

type leaseKey struct {
	expires   int64
	namespace string
	key       string
}

// item is the tree's element: the key inline, so a lookup builds its probe
// on the stack instead of allocating an *Entry.
type item struct {
	namespace, key string
	e              *Entry
}

func lessItem(a, b item) bool {
	if a.namespace != b.namespace {
		return a.namespace < b.namespace
	}
	return a.key < b.key
}

func itemOf(e *Entry) item { return item{e.Namespace, e.Key, e} }

func lessLease(a, b leaseKey) bool {
	if a.expires != b.expires {
		return a.expires < b.expires
	}
	if a.namespace != b.namespace {
		return a.namespace < b.namespace
	}
	return a.key < b.key
}

// View is the materialized state.
type View struct {
	tree    *btree.BTreeG[item]
	leases  *btree.BTreeG[leaseKey]
	ns      *btree.BTreeG[nsItem]
	entries int
	bytes   int64
	nsLive  int // namespaces holding at least one entry
}

// New returns an empty view.
func New() *View {
	return &View{
		tree:   btree.NewG(32, lessItem),
		leases: btree.NewG(32, lessLease),
		ns:     btree.NewG(16, lessNS),
	}
}

// Clone returns a view that shares structure with v and is unaffected by
// later changes to v (and vice versa).
func (v *View) Clone() *View {
	return &View{tree: v.tree.Clone(), leases: v.leases.Clone(), ns: v.ns.Clone(),
		entries: v.entries, bytes: v.bytes, nsLive: v.nsLive}
}

// Get returns the entry at (namespace, key).
func (v *View) Get(namespace, key string) (*Entry, bool) {
	it, ok := v.tree.Get(item{namespace: namespace, key: key})
	return it.e, ok
}

// Namespace returns a copy of the namespace's counters (zero if never seen).
func (v *View) Namespace(namespace string) Namespace {
	it, _ := v.ns.Get(nsItem{name: namespace})
	return it.Namespace
}

// Namespaces calls fn for every namespace ever seen (including emptied
// ones, whose revision counters live on), in name order, until fn returns
// false.
func (v *View) Namespaces(fn func(name string, n Namespace) bool) {
	v.ns.Ascend(func(it nsItem) bool { return fn(it.name, it.Namespace) })
}

// Totals returns the entry and value-byte counts of the whole view and the
// number of namespaces holding entries.
func (v *View) Totals() (entries int, bytes int64, namespaces int) {
	return v.entries, v.bytes, v.nsLive
}

// Ascend calls fn for each entry of namespace whose key starts with prefix,
// in key order, until fn returns false.
func (v *View) Ascend(namespace, prefix string, fn func(*Entry) bool) {
	v.tree.AscendGreaterOrEqual(item{namespace: namespace, key: prefix}, func(it item) bool {
		if it.namespace != namespace || !strings.HasPrefix(it.key, prefix) {
			return false
		}
		return fn(it.e)
	})
}

// All calls fn for every entry in (namespace, key) order until it returns false.
func (v *View) All(fn func(*Entry) bool) { v.tree.Ascend(func(it item) bool { return fn(it.e) }) }

// NextDeadline returns the earliest lease deadline, if any lease exists.
func (v *View) NextDeadline() (int64, bool) {
	l, ok := v.leases.Min()
	return l.expires, ok
}

// Due calls fn for each leased entry with deadline <= nowMs, earliest first
// (ties in (namespace, key) order), until fn returns false. Expiry is
// inclusive: an entry whose deadline equals now is due.
func (v *View) Due(nowMs int64, fn func(*Entry) bool) {
	v.leases.Ascend(func(l leaseKey) bool {
		if l.expires > nowMs {
			return false
		}
		e, ok := v.Get(l.namespace, l.key)
		if !ok {
			return true
		}
		return fn(e)
	})
}

// Check reports whether rec would apply, without changing anything.
func (v *View) Check(rec *journal.Record) error {
	_, _, err := v.Inspect(rec)
	return err
}

// Inspect is Check returning what it looked up as well: the counters of
// rec's namespace and the entry at rec's key (nil when there is none), so
// a caller with rules of its own about them (replay's bounds) does not
// descend the trees a second time.
func (v *View) Inspect(rec *journal.Record) (Namespace, *Entry, error) {
	n := v.Namespace(rec.Namespace)
	old, _ := v.Get(rec.Namespace, rec.Key)
	var expires int64
	if old != nil {
		expires = old.ExpiresMs
	}
	if err := CheckTransition(rec.Kind, rec.Namespace, rec.Key, rec.Revision, n.Revision, old != nil, expires); err != nil {
		return n, old, err
	}
	return n, old, nil
}

// CheckTransition is the rule a record of kind at (namespace, key) that
// produces revision must meet against the state before it: the namespace
// is at nsRevision, and the key holds an entry (exists) whose lease
// deadline is expiresMs (0: none). The revision must continue the
// namespace's; DELETE and EXPIRE need an entry, EXPIRE one with a lease.
// A View applies it to every record; a tool that follows a journal
// without building a view (kpjournal verify) applies it too.
func CheckTransition(kind journal.Kind, namespace, key string, revision, nsRevision uint64, exists bool, expiresMs int64) error {
	if revision != nsRevision+1 {
		return &ApplyError{namespace, key, fmt.Sprintf("%s revision %d is not the namespace revision %d plus one", kind, revision, nsRevision)}
	}
	switch kind {
	case journal.KindPut:
	case journal.KindDelete:
		if !exists {
			return &ApplyError{namespace, key, "DELETE of a missing key"}
		}
	case journal.KindExpire:
		if !exists {
			return &ApplyError{namespace, key, "EXPIRE of a missing key"}
		}
		if expiresMs == 0 {
			return &ApplyError{namespace, key, "EXPIRE of an entry without a lease"}
		}
	default:
		return &ApplyError{namespace, key, fmt.Sprintf("unknown record kind %d", kind)}
	}
	return nil
}

// Apply applies rec, or changes nothing and returns an error wrapping
// ErrInvalid. For a PUT it returns the new entry; otherwise the removed one.
func (v *View) Apply(rec *journal.Record) (*Entry, error) {
	if rec.Kind == journal.KindPut {
		return v.put(rec)
	}
	n, old, err := v.Inspect(rec)
	if err != nil {
		return nil, err
	}
	n.Revision = rec.Revision
	v.remove(&n, old)
	v.ns.ReplaceOrInsert(nsItem{rec.Namespace, n})
	return old, nil
}

// put is Apply for a PUT, the hot path of every commit and replay: one
// namespace lookup and one tree descent that both inserts the entry and
// finds the one it replaces.
func (v *View) put(rec *journal.Record) (*Entry, error) {
	n := v.Namespace(rec.Namespace)
	if err := CheckTransition(rec.Kind, rec.Namespace, rec.Key, rec.Revision, n.Revision, true, 0); err != nil {
		return nil, err // a PUT needs only the revision to continue
	}
	n.Revision = rec.Revision
	e := &Entry{
		Namespace: rec.Namespace, Key: rec.Key, Schema: rec.Schema, Owner: rec.Owner,
		Revision: rec.Revision, CreatedMs: rec.CreatedMs, UpdatedMs: rec.UpdatedMs,
		ExpiresMs: rec.ExpiresMs, Document: rec.Document,
	}
	if old, replaced := v.tree.ReplaceOrInsert(itemOf(e)); replaced {
		v.uncount(&n, old.e)
	}
	v.count(&n, e)
	v.ns.ReplaceOrInsert(nsItem{rec.Namespace, n})
	return e, nil
}

func (v *View) remove(n *Namespace, e *Entry) {
	v.tree.Delete(itemOf(e))
	v.uncount(n, e)
}

func (v *View) insert(n *Namespace, e *Entry) {
	v.tree.ReplaceOrInsert(itemOf(e))
	v.count(n, e)
}

// count adds e (already in the tree) to the lease index and the counters.
func (v *View) count(n *Namespace, e *Entry) {
	if e.ExpiresMs != 0 {
		v.leases.ReplaceOrInsert(leaseKey{e.ExpiresMs, e.Namespace, e.Key})
	}
	if n.Entries == 0 {
		v.nsLive++
	}
	n.Entries++
	n.Bytes += e.Size()
	v.entries++
	v.bytes += e.Size()
}

// uncount takes e (no longer in the tree) out of the lease index and the
// counters.
func (v *View) uncount(n *Namespace, e *Entry) {
	if e.ExpiresMs != 0 {
		v.leases.Delete(leaseKey{e.ExpiresMs, e.Namespace, e.Key})
	}
	n.Entries--
	n.Bytes -= e.Size()
	v.entries--
	v.bytes -= e.Size()
	if n.Entries == 0 {
		v.nsLive--
	}
}

// Restore builds a view from a checkpoint image: namespace counters and
// entries. It checks that the counters it is given agree with the entries
// and that no entry's revision is above its namespace's revision.
func Restore(namespaces map[string]Namespace, entries []*Entry) (*View, error) {
	v := New()
	counted := make(map[string]*Namespace, len(namespaces))
	for name, n := range namespaces {
		counted[name] = &Namespace{Revision: n.Revision}
	}
	for _, e := range entries {
		n := counted[e.Namespace]
		if n == nil {
			return nil, &ApplyError{e.Namespace, e.Key, "entry in a namespace the image has no counter for"}
		}
		if e.Revision == 0 || e.Revision > n.Revision {
			return nil, &ApplyError{e.Namespace, e.Key, fmt.Sprintf("entry revision %d outside namespace revision 1..%d", e.Revision, n.Revision)}
		}
		if _, dup := v.Get(e.Namespace, e.Key); dup {
			return nil, &ApplyError{e.Namespace, e.Key, "duplicate entry"}
		}
		v.insert(n, e)
	}
	for name, want := range namespaces {
		got := counted[name]
		v.ns.ReplaceOrInsert(nsItem{name, *got})
		if got.Entries != want.Entries || got.Bytes != want.Bytes {
			return nil, &ApplyError{name, "", fmt.Sprintf("image counts %d entries / %d bytes, entries hold %d / %d", want.Entries, want.Bytes, got.Entries, got.Bytes)}
		}
	}
	return v, nil
}
