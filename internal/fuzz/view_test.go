package fuzz

import (
	"bytes"
	"fmt"
	"math"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// viewDiff describes the first difference between two views ("" if none):
// totals, every namespace counter (emptied namespaces included), every
// entry with all its fields, and the lease index.
func viewDiff(got, want *materialize.View) string {
	ge, gb, gn := got.Totals()
	we, wb, wn := want.Totals()
	if ge != we || gb != wb || gn != wn {
		return fmt.Sprintf("totals %d entries / %d bytes / %d namespaces, want %d / %d / %d", ge, gb, gn, we, wb, wn)
	}
	type nsRec struct {
		name string
		n    materialize.Namespace
	}
	var gns, wns []nsRec
	got.Namespaces(func(name string, n materialize.Namespace) bool { gns = append(gns, nsRec{name, n}); return true })
	want.Namespaces(func(name string, n materialize.Namespace) bool { wns = append(wns, nsRec{name, n}); return true })
	if len(gns) != len(wns) {
		return fmt.Sprintf("%d namespace counters, want %d", len(gns), len(wns))
	}
	for i := range gns {
		if gns[i] != wns[i] {
			return fmt.Sprintf("namespace %q %+v, want %q %+v", gns[i].name, gns[i].n, wns[i].name, wns[i].n)
		}
	}
	var gents, wents []*materialize.Entry
	got.All(func(e *materialize.Entry) bool { gents = append(gents, e); return true })
	want.All(func(e *materialize.Entry) bool { wents = append(wents, e); return true })
	if len(gents) != len(wents) {
		return fmt.Sprintf("%d entries, want %d", len(gents), len(wents))
	}
	for i := range gents {
		if d := entryDiff(gents[i], wents[i]); d != "" {
			return d
		}
		if e, ok := got.Get(wents[i].Namespace, wents[i].Key); !ok || e != gents[i] {
			return fmt.Sprintf("entry %s/%s not found by Get", wents[i].Namespace, wents[i].Key)
		}
	}
	var gl, wl []string
	got.Due(math.MaxInt64, func(e *materialize.Entry) bool { gl = append(gl, e.Namespace+"/"+e.Key); return true })
	want.Due(math.MaxInt64, func(e *materialize.Entry) bool { wl = append(wl, e.Namespace+"/"+e.Key); return true })
	if fmt.Sprint(gl) != fmt.Sprint(wl) {
		return fmt.Sprintf("leases %v, want %v", gl, wl)
	}
	gd, gok := got.NextDeadline()
	wd, wok := want.NextDeadline()
	if gd != wd || gok != wok {
		return fmt.Sprintf("next deadline %d %v, want %d %v", gd, gok, wd, wok)
	}
	return ""
}

func entryDiff(g, w *materialize.Entry) string {
	if g.Namespace != w.Namespace || g.Key != w.Key || g.Schema != w.Schema || g.Owner != w.Owner ||
		g.Revision != w.Revision || g.CreatedMs != w.CreatedMs || g.UpdatedMs != w.UpdatedMs ||
		g.ExpiresMs != w.ExpiresMs || !bytes.Equal(g.Document, w.Document) {
		return fmt.Sprintf("entry %+v, want %+v", *g, *w)
	}
	return ""
}

// recordDiff describes how two journal records differ ("" if they do not).
// A nil and an empty document are the same document.
func recordDiff(g, w *journal.Record) string {
	if g.Kind != w.Kind || g.Namespace != w.Namespace || g.Key != w.Key || g.Revision != w.Revision ||
		g.TimeMs != w.TimeMs || g.Schema != w.Schema || g.Owner != w.Owner || g.CreatedMs != w.CreatedMs ||
		g.UpdatedMs != w.UpdatedMs || g.ExpiresMs != w.ExpiresMs || !bytes.Equal(g.Document, w.Document) {
		return fmt.Sprintf("record %s %s/%s rev %d (%+v), want %s %s/%s rev %d (%+v)",
			g.Kind, g.Namespace, g.Key, g.Revision, *g, w.Kind, w.Namespace, w.Key, w.Revision, *w)
	}
	return ""
}
