package main

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// lease is an entry whose lease has lapsed in the files: the store purges
// it, journaling an EXPIRE, when it next opens.
type lease struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	ExpiresMs int64  `json:"expires_ms"`
	Expires   string `json:"expires"`
}

// tally is the semantic half of verify and stat: it follows the journal
// record by record, in index order, and applies every rule the store
// applies at open, each one the library's own (recovery.Checker's identifier,
// schema, owner and bounds checks, materialize.CheckTransition), keeping
// only the counts those rules need in hash maps keyed by the frame's bytes
// rather than building a view: it copies nothing, which is what lets
// verify keep pace with reading the files. Identifier rules are functions
// of their strings alone, so each distinct namespace and key is checked
// once. A record that breaks a bound or an identifier rule still counts,
// so that every such record is reported; one that breaks the transition
// rule does not, and the replay stops there, as the store would refuse to
// open there. (kpjournal replay builds the state itself, with
// recovery.LoadState; verify's tests hold the two to the same verdict.)
type tally struct {
	chk      *recovery.Checker
	ns       map[string]*nsState
	keys     map[string]*keyState // by compound(namespace, key): one lookup per record
	metadata map[string]error     // CheckPutMetadata by compound(schema, owner)
	buf      []byte
	live     int // namespaces holding entries
	entries  int
	bytes    int64
}

// maxCachedMetadata bounds the verdicts tally keeps: a journal names few
// schemas and owners, but a damaged one could name many.
const maxCachedMetadata = 4096

type nsState struct {
	name    string
	rev     uint64
	entries int
	bytes   int64
	idErr   error
}

type keyState struct {
	ns        *nsState
	name      string
	live      bool
	size      int64
	expiresMs int64
	idErr     error
}

// newTally starts from base (nil: the empty state).
func newTally(chk *recovery.Checker, base *materialize.View) *tally {
	t := &tally{chk: chk, ns: make(map[string]*nsState), keys: make(map[string]*keyState), metadata: make(map[string]error)}
	if base == nil {
		return t
	}
	base.Namespaces(func(name string, n materialize.Namespace) bool {
		st := t.namespace(name)
		st.rev, st.entries, st.bytes = n.Revision, n.Entries, n.Bytes
		return true
	})
	base.All(func(e *materialize.Entry) bool {
		k := t.key(t.ns[e.Namespace], []byte(e.Key))
		k.live, k.size, k.expiresMs = true, e.Size(), e.ExpiresMs
		return true
	})
	t.entries, t.bytes, t.live = base.Totals()
	return t
}

func (t *tally) namespace(name string) *nsState {
	n := &nsState{name: name, idErr: t.chk.CheckNamespace(name)}
	t.ns[name] = n
	return n
}

func (t *tally) key(n *nsState, name []byte) *keyState {
	k := &keyState{ns: n, name: string(name)}
	k.idErr = t.chk.CheckKey(k.name)
	t.keys[string(t.compound([]byte(n.name), name))] = k
	return k
}

// compound is a map key for a pair of strings, built in a reused buffer:
// the first one's length, the first, the second.
func (t *tally) compound(a, b []byte) []byte {
	t.buf = append(append(binary.AppendUvarint(t.buf[:0], uint64(len(a))), a...), b...)
	return t.buf
}

// lookup finds or creates the state of the frame's key.
func (t *tally) lookup(f *journal.Frame) *keyState {
	if k := t.keys[string(t.compound(f.Namespace, f.Key))]; k != nil { // no allocation: the lookup is keyed on the bytes
		return k
	}
	n := t.ns[string(f.Namespace)]
	if n == nil {
		n = t.namespace(string(f.Namespace))
	}
	return t.key(n, f.Key)
}

// putMetadata is CheckPutMetadata for the frame, remembered per schema and
// owner.
func (t *tally) putMetadata(f *journal.Frame) error {
	c := t.compound(f.Schema, f.Owner)
	if err, ok := t.metadata[string(c)]; ok {
		return err
	}
	err := t.chk.CheckPutMetadata(string(f.Schema), string(f.Owner))
	if len(t.metadata) < maxCachedMetadata {
		t.metadata[string(c)] = err
	}
	return err
}

// apply follows f and says whether the replay can go on after it (ok) and
// why it cannot follow the state before it (problem).
func (t *tally) apply(f *journal.Frame) (ok bool, problem error) {
	k := t.lookup(f)
	n := k.ns
	problem = n.idErr
	if problem == nil {
		problem = k.idErr
	}
	if err := materialize.CheckTransition(f.Kind, n.name, k.name, f.Revision, n.rev, k.live, k.expiresMs); err != nil {
		return false, first(problem, err)
	}
	if f.Kind == journal.KindPut {
		if problem == nil {
			problem = t.putMetadata(f)
		}
		if problem == nil {
			problem = t.chk.CheckLease(n.name, k.name, f.ExpiresMs)
		}
		if problem == nil {
			u := quota.Usage{Namespaces: t.live, NamespaceEntries: n.entries, TotalBytes: t.bytes}
			problem = t.chk.CheckPut(u, n.name, k.live, k.size, int64(len(f.Document)))
		}
	}
	n.rev = f.Revision
	if k.live {
		k.live = false
		n.entries--
		n.bytes -= k.size
		t.entries--
		t.bytes -= k.size
		if n.entries == 0 {
			t.live--
		}
	}
	if f.Kind == journal.KindPut {
		k.live, k.size, k.expiresMs = true, int64(len(f.Document)), f.ExpiresMs
		if n.entries == 0 {
			t.live++
		}
		n.entries++
		n.bytes += k.size
		t.entries++
		t.bytes += k.size
	}
	return true, problem
}

func (t *tally) totals() (int, int64, int) { return t.entries, t.bytes, t.live }

// overdue lists the leases due at nowMs, earliest first.
func (t *tally) overdue(nowMs int64) []lease {
	var out []lease
	for _, k := range t.keys {
		if k.live && k.expiresMs != 0 && k.expiresMs <= nowMs {
			out = append(out, lease{k.ns.name, k.name, k.expiresMs, msTime(k.expiresMs)})
		}
	}
	slices.SortFunc(out, func(a, b lease) int {
		return cmp.Or(cmp.Compare(a.ExpiresMs, b.ExpiresMs), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Key, b.Key))
	})
	return out
}

func first(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
