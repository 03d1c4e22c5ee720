package fuzz

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/watch"
)

// This file is a small in-memory model of the specification, written from
// the specification's contracts rather than from the store's code, for
// FuzzStoreModel: namespaces with dense revision counters, complete
// entries with owners and timestamps, expected_revision, TTL leases that
// expire inclusively (one EXPIRE per entry, earliest deadline first, ties
// in (namespace, key) order), the namespace policy for an administrator and
// one user, the per-namespace entry bound, and watches with snapshots,
// per-watch sequences, acknowledgements, the unacknowledged-update bound
// and the close reasons BUFFER_OVERFLOW, RESTORED and STORE_CLOSED.
// A watch closed while updates of the same commit are still queued for it
// may lose those updates (the watch package drops a closed watch's queue);
// the harness accepts that, and nothing else, in place of them.

// mEntry is one entry of the model.
type mEntry struct {
	Owner                     string
	Rev                       uint64
	Created, Updated, Expires int64
	Doc                       string
}

// mKey names an entry.
type mKey struct{ NS, Key string }

// mState is everything a backup captures.
type mState struct {
	Entries map[mKey]mEntry
	Revs    map[string]uint64 // namespace revision counters, kept when a namespace empties
}

func (s mState) clone() mState {
	return mState{Entries: maps.Clone(s.Entries), Revs: maps.Clone(s.Revs)}
}

// mMsg is a watch message as the model expects it.
type mMsg struct {
	Kind    string // "snapshot", "update" or "closed"
	Rev     uint64 // snapshot revision or update revision
	Seq     uint64
	Update  watch.Kind
	Key     string
	Entry   *mEntry  // a PUT update's entry
	Entries []string // a snapshot's entries, rendered
	Reason  watch.Reason
}

func (m mMsg) String() string {
	switch m.Kind {
	case "snapshot":
		return fmt.Sprintf("snapshot@%d %v", m.Rev, m.Entries)
	case "closed":
		return fmt.Sprintf("closed %v", m.Reason)
	}
	if m.Entry != nil {
		return fmt.Sprintf("update seq %d rev %d %v %s %s", m.Seq, m.Rev, m.Update, m.Key, renderEntry(m.Key, *m.Entry))
	}
	return fmt.Sprintf("update seq %d rev %d %v %s", m.Seq, m.Rev, m.Update, m.Key)
}

func renderEntry(key string, e mEntry) string {
	return fmt.Sprintf("%s{owner %s rev %d created %d updated %d expires %d doc %s}", key, e.Owner, e.Rev, e.Created, e.Updated, e.Expires, e.Doc)
}

// mWatch is one registered watch in the model.
type mWatch struct {
	ID, NS, Prefix string
	Seq, Acked     uint64
}

// model is the specification's store.
type model struct {
	mState
	now        int64 // ms
	maxEntries int   // per namespace
	maxUnacked uint64
	minTTL     time.Duration
	maxTTL     time.Duration
	watches    map[int]*mWatch // by slot; nil when the slot's watch is not open
	expect     map[int][]mMsg  // messages each slot's sink must deliver next
	backup     *mState
}

func newModel(now int64, lim statestore.Options) *model {
	return &model{
		mState:     mState{Entries: map[mKey]mEntry{}, Revs: map[string]uint64{}},
		now:        now,
		maxEntries: lim.Limits.MaxEntriesPerNamespace,
		maxUnacked: uint64(lim.Limits.MaxUnackedUpdates),
		minTTL:     time.Second,
		maxTTL:     24 * time.Hour,
		watches:    map[int]*mWatch{},
		expect:     map[int][]mMsg{},
	}
}

// mErr is an expected error: its code, and the current revision a
// CONFLICT carries.
type mErr struct {
	Code    statestore.Code
	Current uint64
}

// canRead and canWrite are the namespace policy for the two principals
// the fuzz target uses (an administrator, and user alice).
func canRead(p statestore.Principal, ns string) bool {
	return p.Admin || ns == "user/"+p.ID
}

func canWrite(p statestore.Principal, ns string) bool { return canRead(p, ns) }

// publish fans one committed mutation out to every matching watch.
func (m *model) publish(ns, key string, kind watch.Kind, rev uint64, e *mEntry) {
	for _, slot := range m.slots() {
		w := m.watches[slot]
		if w.NS != ns || !strings.HasPrefix(key, w.Prefix) {
			continue
		}
		if w.Seq-w.Acked >= m.maxUnacked {
			m.close(slot, watch.BufferOverflow)
			continue
		}
		w.Seq++
		m.expect[slot] = append(m.expect[slot], mMsg{Kind: "update", Seq: w.Seq, Rev: rev, Update: kind, Key: key, Entry: e})
	}
}

// slots lists the open watches' slots in order.
func (m *model) slots() []int {
	out := make([]int, 0, len(m.watches))
	for s, w := range m.watches {
		if w != nil {
			out = append(out, s)
		}
	}
	sort.Ints(out)
	return out
}

func (m *model) close(slot int, reason watch.Reason) {
	m.expect[slot] = append(m.expect[slot], mMsg{Kind: "closed", Reason: reason})
	m.watches[slot] = nil
}

// closeAll closes every open watch with reason.
func (m *model) closeAll(reason watch.Reason) {
	for _, slot := range m.slots() {
		m.close(slot, reason)
	}
}

// expireDue journals one EXPIRE per lease whose deadline is at or before
// now, earliest deadline first, ties in (namespace, key) order.
func (m *model) expireDue() {
	var due []mKey
	for k, e := range m.Entries {
		if e.Expires != 0 && e.Expires <= m.now {
			due = append(due, k)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := m.Entries[due[i]], m.Entries[due[j]]
		if a.Expires != b.Expires {
			return a.Expires < b.Expires
		}
		if due[i].NS != due[j].NS {
			return due[i].NS < due[j].NS
		}
		return due[i].Key < due[j].Key
	})
	for _, k := range due {
		delete(m.Entries, k)
		m.Revs[k.NS]++
		m.publish(k.NS, k.Key, watch.Expire, m.Revs[k.NS], nil)
	}
}

// due reports a lease that is due now, if any.
func (m *model) due() (mKey, bool) {
	for k, e := range m.Entries {
		if e.Expires != 0 && e.Expires <= m.now {
			return k, true
		}
	}
	return mKey{}, false
}

// entriesIn counts the entries of ns.
func (m *model) entriesIn(ns string) int {
	n := 0
	for k := range m.Entries {
		if k.NS == ns {
			n++
		}
	}
	return n
}

// checkExpect applies expected_revision: absent, create only (0), or the
// entry's revision.
func checkExpect(x statestore.Expect, e mEntry, exists bool) *mErr {
	want, set := x.Revision()
	if !set {
		return nil
	}
	cur := uint64(0)
	if exists {
		cur = e.Rev
	}
	if (want == 0 && exists) || (want != 0 && want != cur) {
		return &mErr{Code: statestore.Conflict, Current: cur}
	}
	return nil
}

// put is PutState.
func (m *model) put(p statestore.Principal, ns, key string, doc string, valid bool, x statestore.Expect, ttl time.Duration) (mEntry, *mErr) {
	if !canWrite(p, ns) {
		return mEntry{}, &mErr{Code: statestore.PermissionDenied}
	}
	if ttl != 0 && ttl < m.minTTL {
		return mEntry{}, &mErr{Code: statestore.TTLInvalid}
	}
	ttl = min(ttl, m.maxTTL)
	if !valid {
		return mEntry{}, &mErr{Code: statestore.SchemaInvalid}
	}
	m.expireDue()
	k := mKey{ns, key}
	old, exists := m.Entries[k]
	if err := checkExpect(x, old, exists); err != nil {
		return mEntry{}, err
	}
	if !exists && m.entriesIn(ns) >= m.maxEntries {
		return mEntry{}, &mErr{Code: statestore.QuotaExceeded}
	}
	m.Revs[ns]++
	e := mEntry{Owner: p.ID, Rev: m.Revs[ns], Created: m.now, Updated: m.now, Doc: doc}
	if exists {
		e.Created = old.Created
	}
	if ttl > 0 {
		e.Expires = m.now + ttl.Milliseconds()
	}
	m.Entries[k] = e
	m.publish(ns, key, watch.Put, e.Rev, &e)
	return e, nil
}

// del is DeleteState.
func (m *model) del(p statestore.Principal, ns, key string, x statestore.Expect) (uint64, *mErr) {
	if !canWrite(p, ns) {
		return 0, &mErr{Code: statestore.PermissionDenied}
	}
	m.expireDue()
	k := mKey{ns, key}
	old, exists := m.Entries[k]
	if !exists {
		return 0, &mErr{Code: statestore.NotFound}
	}
	if err := checkExpect(x, old, exists); err != nil {
		return 0, err
	}
	delete(m.Entries, k)
	m.Revs[ns]++
	m.publish(ns, key, watch.Delete, m.Revs[ns], nil)
	return m.Revs[ns], nil
}

// get is GetState: a due lease reads as absent, after its EXPIRE.
func (m *model) get(p statestore.Principal, ns, key string) (mEntry, *mErr) {
	if !canRead(p, ns) {
		return mEntry{}, &mErr{Code: statestore.PermissionDenied}
	}
	m.expireDue()
	e, ok := m.Entries[mKey{ns, key}]
	if !ok {
		return mEntry{}, &mErr{Code: statestore.NotFound}
	}
	return e, nil
}

// watch is WatchState on slot's session, with watch_id id.
func (m *model) watch(slot int, p statestore.Principal, id, ns, prefix string) (uint64, []string, *mErr) {
	if !canRead(p, ns) {
		return 0, nil, &mErr{Code: statestore.PermissionDenied}
	}
	m.expireDue()
	if m.watches[slot] != nil {
		return 0, nil, &mErr{Code: statestore.InvalidArgument}
	}
	snap := m.snapshot(ns, prefix)
	m.watches[slot] = &mWatch{ID: id, NS: ns, Prefix: prefix}
	m.expect[slot] = append(m.expect[slot], mMsg{Kind: "snapshot", Rev: m.Revs[ns], Entries: snap})
	return m.Revs[ns], snap, nil
}

// snapshot renders the entries of ns under prefix, in key order.
func (m *model) snapshot(ns, prefix string) []string {
	var keys []string
	for k := range m.Entries {
		if k.NS == ns && strings.HasPrefix(k.Key, prefix) {
			keys = append(keys, k.Key)
		}
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = renderEntry(k, m.Entries[mKey{ns, k}])
	}
	return out
}

// ack is WatchStateAck.
func (m *model) ack(slot int, applied uint64) *mErr {
	w := m.watches[slot]
	switch {
	case w == nil:
		return &mErr{Code: statestore.NotFound}
	case applied > w.Seq:
		return &mErr{Code: statestore.InvalidArgument}
	}
	w.Acked = max(w.Acked, applied)
	return nil
}

// unwatch is UnwatchState: no Closed message.
func (m *model) unwatch(slot int) *mErr {
	if m.watches[slot] == nil {
		return &mErr{Code: statestore.NotFound}
	}
	m.watches[slot] = nil
	return nil
}

// restore replaces the state with the last backup: every watch closes
// with RESTORED, and leases that lapsed since expire (no watch sees it).
func (m *model) restore() {
	m.closeAll(watch.Restored)
	m.mState = m.backup.clone()
	m.expireDue()
}
