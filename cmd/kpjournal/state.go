package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// replayer is the semantic half of verify: it applies records in index
// order and says whether the replay can go on after a record (ok) and why
// the record cannot follow the state (problem). A record that breaks a bound or an
// identifier rule still applies; one that breaks revision continuity or
// removes a missing key does not, and the replay stops there, as the store
// would refuse to open there.
type replayer interface {
	apply(f *frame) (ok bool, problem error)
	totals() (entries int, bytes int64, namespaces int)
	overdue(nowMs int64) []lease
}

// lease is an entry whose lease has lapsed in the files: the store purges
// it, journaling an EXPIRE, when it next opens.
type lease struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	ExpiresMs int64  `json:"expires_ms"`
	Expires   string `json:"expires"`
}

// viewReplayer replays through materialize.View and ReplayChecker.Check,
// exactly the code the store runs at open. It copies every record.
type viewReplayer struct {
	chk  *statestore.ReplayChecker
	view *materialize.View
}

// newViewReplayer starts from a clone of base (nil: an empty view).
func newViewReplayer(chk *statestore.ReplayChecker, base *materialize.View) *viewReplayer {
	v := materialize.New()
	if base != nil {
		v = base.Clone()
	}
	return &viewReplayer{chk: chk, view: v}
}

func (r *viewReplayer) apply(f *frame) (bool, error) {
	rec := f.record()
	err := r.chk.Check(r.view, rec)
	if err != nil && r.view.Check(rec) != nil {
		return false, err
	}
	if _, aerr := r.view.Apply(rec); aerr != nil {
		return false, aerr
	}
	return true, err
}

func (r *viewReplayer) totals() (int, int64, int) { return r.view.Totals() }

func (r *viewReplayer) overdue(nowMs int64) []lease {
	var out []lease
	r.view.Due(nowMs, func(e *materialize.Entry) bool {
		out = append(out, lease{e.Namespace, e.Key, e.ExpiresMs, msTime(e.ExpiresMs)})
		return true
	})
	return out
}

// mapReplayer applies the same rules as viewReplayer over hash maps keyed
// by the frame's bytes, without copying records: about ten times faster,
// which is what lets verify keep pace with reading the files. Identifier,
// schema and owner rules are pure functions of their strings, so each
// distinct namespace, key and schema is put to ReplayChecker.Check once
// (a probe PUT on an empty view) and the verdict kept; revision
// continuity, existence and leases follow materialize.View.Check, and the
// bounds are quota.Limits.CheckPut with the exact usage, as
// ReplayChecker.Check computes it. verify_test.go checks both replayers
// report the same problems.
type mapReplayer struct {
	chk     *statestore.ReplayChecker
	reg     *schema.Registry
	limits  quota.Limits
	empty   *materialize.View
	ns      map[string]*nsState
	keys    map[string]*keyState // by compound(namespace, key): one lookup per record
	schemas map[string]bool
	known   []byte // the last schema name found registered
	buf     []byte
	live    int // namespaces holding entries
	entries int
	bytes   int64
}

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

// probeNamespace and probeKey are identifiers valid under any bounds this
// tool accepts, used to probe the other half of a (namespace, key) pair.
const probeNamespace, probeKey, probeOwner = "system", "k", "kpjournal"

func newMapReplayer(chk *statestore.ReplayChecker, reg *schema.Registry, limits quota.Limits, base *materialize.View) *mapReplayer {
	r := &mapReplayer{chk: chk, reg: reg, limits: limits, empty: materialize.New(),
		ns: make(map[string]*nsState), keys: make(map[string]*keyState), schemas: make(map[string]bool)}
	if base == nil {
		return r
	}
	base.Namespaces(func(name string, n materialize.Namespace) bool {
		st := r.namespace(name)
		st.rev, st.entries, st.bytes = n.Revision, n.Entries, n.Bytes
		return true
	})
	base.All(func(e *materialize.Entry) bool {
		k := r.key(r.ns[e.Namespace], []byte(e.Key))
		k.live, k.size, k.expiresMs = true, e.Size(), e.ExpiresMs
		return true
	})
	r.entries, r.bytes, r.live = base.Totals()
	return r
}

func (r *mapReplayer) probe(namespace, key, schemaName, owner string) error {
	return r.chk.Check(r.empty, &journal.Record{Kind: journal.KindPut, Namespace: namespace, Key: key,
		Revision: 1, Schema: schemaName, Owner: owner})
}

func (r *mapReplayer) namespace(name string) *nsState {
	n := &nsState{name: name}
	n.idErr = r.probe(name, probeKey, schema.MediaIntentV1, probeOwner)
	r.ns[name] = n
	return n
}

func (r *mapReplayer) key(n *nsState, name []byte) *keyState {
	k := &keyState{ns: n, name: string(name)}
	k.idErr = r.probe(probeNamespace, k.name, schema.MediaIntentV1, probeOwner)
	r.keys[string(r.compound(n.name, name))] = k
	return k
}

// compound is the keys map's key for (namespace, key), built in a reused
// buffer: the namespace's length, the namespace, the key.
func (r *mapReplayer) compound(ns string, key []byte) []byte {
	r.buf = append(append(binary.AppendUvarint(r.buf[:0], uint64(len(ns))), ns...), key...)
	return r.buf
}

// lookup finds or creates the state of the frame's key.
func (r *mapReplayer) lookup(f *frame) *keyState {
	r.buf = append(append(binary.AppendUvarint(r.buf[:0], uint64(len(f.namespace))), f.namespace...), f.key...)
	if k := r.keys[string(r.buf)]; k != nil { // no allocation: the lookup is keyed on the bytes
		return k
	}
	n := r.ns[string(f.namespace)]
	if n == nil {
		n = r.namespace(string(f.namespace))
	}
	return r.key(n, f.key)
}

func (r *mapReplayer) schemaKnown(name []byte) bool {
	if r.known != nil && bytes.Equal(name, r.known) {
		return true
	}
	ok, seen := r.schemas[string(name)]
	if !seen {
		ok = r.reg.Has(string(name))
		r.schemas[string(name)] = ok
	}
	if ok {
		r.known = append(r.known[:0], name...)
	}
	return ok
}

func (r *mapReplayer) apply(f *frame) (bool, error) {
	k := r.lookup(f)
	n := k.ns
	problem := n.idErr
	if problem == nil {
		problem = k.idErr
	}
	if f.revision != n.rev+1 {
		return false, first(problem, &materialize.ApplyError{Namespace: n.name, Key: k.name,
			Reason: fmt.Sprintf("%s revision %d is not the namespace revision %d plus one", f.kind, f.revision, n.rev)})
	}
	switch f.kind {
	case journal.KindDelete:
		if !k.live {
			return false, first(problem, &materialize.ApplyError{Namespace: n.name, Key: k.name, Reason: "DELETE of a missing key"})
		}
	case journal.KindExpire:
		if !k.live {
			return false, first(problem, &materialize.ApplyError{Namespace: n.name, Key: k.name, Reason: "EXPIRE of a missing key"})
		}
		if k.expiresMs == 0 {
			return false, first(problem, &materialize.ApplyError{Namespace: n.name, Key: k.name, Reason: "EXPIRE of an entry without a lease"})
		}
	case journal.KindPut:
		if problem == nil && (len(f.owner) == 0 || !r.schemaKnown(f.schema)) {
			problem = r.probe(probeNamespace, probeKey, string(f.schema), string(f.owner))
		}
		if problem == nil {
			u := quota.Usage{Namespaces: r.live, NamespaceEntries: n.entries, TotalBytes: r.bytes}
			if err := r.limits.CheckPut(u, n.name, k.live, k.size, int64(len(f.document))); err != nil {
				problem = err
			}
		}
	}
	n.rev = f.revision
	if k.live {
		k.live = false
		n.entries--
		n.bytes -= k.size
		r.entries--
		r.bytes -= k.size
		if n.entries == 0 {
			r.live--
		}
	}
	if f.kind == journal.KindPut {
		k.live, k.size, k.expiresMs = true, int64(len(f.document)), f.expiresMs
		if n.entries == 0 {
			r.live++
		}
		n.entries++
		n.bytes += k.size
		r.entries++
		r.bytes += k.size
	}
	return true, problem
}

func (r *mapReplayer) totals() (int, int64, int) { return r.entries, r.bytes, r.live }

func (r *mapReplayer) overdue(nowMs int64) []lease {
	var out []lease
	for _, k := range r.keys {
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
