package materialize

import (
	"errors"
	"fmt"
	"testing"

	"github.com/keeppeek/statestore/journal"
)

func put(ns, key string, rev uint64, expires int64, doc string) *journal.Record {
	return &journal.Record{Kind: journal.KindPut, Namespace: ns, Key: key, Revision: rev, Schema: "s", Owner: "o",
		CreatedMs: 1, UpdatedMs: 1, ExpiresMs: expires, Document: []byte(doc)}
}

func del(kind journal.Kind, ns, key string, rev uint64) *journal.Record {
	return &journal.Record{Kind: kind, Namespace: ns, Key: key, Revision: rev}
}

func mustApply(t *testing.T, v *View, recs ...*journal.Record) {
	t.Helper()
	for _, r := range recs {
		if _, err := v.Apply(r); err != nil {
			t.Fatalf("apply %+v: %v", r, err)
		}
	}
}

func TestApplyCounters(t *testing.T) {
	t.Parallel()
	v := New()
	mustApply(t, v,
		put("a", "k1", 1, 0, "12345"),
		put("a", "k2", 2, 50, "123"),
		put("b", "k1", 1, 0, "1"),
		put("a", "k1", 3, 0, "12"), // replace: bytes 5 -> 2
		del(journal.KindDelete, "b", "k1", 2),
	)
	if n := v.Namespace("a"); n != (Namespace{Revision: 3, Entries: 2, Bytes: 5}) {
		t.Fatalf("namespace a: %+v", n)
	}
	if n := v.Namespace("b"); n != (Namespace{Revision: 2}) {
		t.Fatalf("emptied namespace b must keep its revision: %+v", n)
	}
	if e, b, nss := v.Totals(); e != 2 || b != 5 || nss != 1 {
		t.Fatalf("totals %d %d %d", e, b, nss)
	}
	if e, _ := v.Get("a", "k1"); e.Revision != 3 || e.CreatedMs != 1 {
		t.Fatalf("entry %+v", e)
	}
}

func TestApplyRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rec  *journal.Record
	}{
		{"revision skip", put("a", "k", 3, 0, "x")},
		{"revision repeat", put("a", "k", 1, 0, "x")},
		{"delete missing", del(journal.KindDelete, "a", "nope", 2)},
		{"expire missing", del(journal.KindExpire, "a", "nope", 2)},
		{"expire unleased", del(journal.KindExpire, "a", "k", 2)},
		{"unknown kind", &journal.Record{Kind: 9, Namespace: "a", Key: "k", Revision: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := New()
			mustApply(t, v, put("a", "k", 1, 0, "x"))
			before := fmt.Sprint(v.Namespace("a"))
			if _, err := v.Apply(tc.rec); !errors.Is(err, ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
			if fmt.Sprint(v.Namespace("a")) != before {
				t.Fatal("a refused record changed the view")
			}
		})
	}
}

func TestCloneIsolation(t *testing.T) {
	t.Parallel()
	v := New()
	mustApply(t, v, put("a", "k", 1, 10, "x"))
	c := v.Clone()
	mustApply(t, c, put("a", "k2", 2, 0, "yy"), del(journal.KindExpire, "a", "k", 3))
	if _, ok := v.Get("a", "k2"); ok {
		t.Fatal("a write to the clone reached the original")
	}
	if _, ok := v.Get("a", "k"); !ok || v.Namespace("a").Revision != 1 {
		t.Fatal("the original changed")
	}
	if d, ok := v.NextDeadline(); !ok || d != 10 {
		t.Fatal("the original lost its lease")
	}
	if _, ok := c.NextDeadline(); ok {
		t.Fatal("the clone still holds the expired lease")
	}
}

func TestDueInclusiveAndOrdered(t *testing.T) {
	t.Parallel()
	v := New()
	mustApply(t, v, put("a", "late", 1, 30, "x"), put("a", "early", 2, 10, "x"), put("b", "tie", 1, 10, "x"), put("a", "none", 3, 0, "x"))
	var got []string
	v.Due(30, func(e *Entry) bool { got = append(got, e.Namespace+"/"+e.Key); return true })
	if fmt.Sprint(got) != "[a/early b/tie a/late]" {
		t.Fatalf("due order %v", got)
	}
	got = nil
	v.Due(9, func(e *Entry) bool { got = append(got, e.Key); return true })
	if len(got) != 0 {
		t.Fatalf("nothing is due before 10: %v", got)
	}
}

func TestAscendPrefix(t *testing.T) {
	t.Parallel()
	v := New()
	mustApply(t, v, put("a", "intents/x", 1, 0, "x"), put("a", "intents/y", 2, 0, "x"), put("a", "leases/z", 3, 0, "x"), put("b", "intents/q", 1, 0, "x"))
	var got []string
	v.Ascend("a", "intents/", func(e *Entry) bool { got = append(got, e.Key); return true })
	if fmt.Sprint(got) != "[intents/x intents/y]" {
		t.Fatalf("prefix scan %v", got)
	}
}

func TestRestoreChecks(t *testing.T) {
	t.Parallel()
	e := &Entry{Namespace: "a", Key: "k", Revision: 2, Document: []byte("xy")}
	tests := []struct {
		name    string
		ns      map[string]Namespace
		entries []*Entry
		ok      bool
	}{
		{"consistent", map[string]Namespace{"a": {Revision: 2, Entries: 1, Bytes: 2}, "gone": {Revision: 7}}, []*Entry{e}, true},
		{"count mismatch", map[string]Namespace{"a": {Revision: 2, Entries: 2, Bytes: 2}}, []*Entry{e}, false},
		{"bytes mismatch", map[string]Namespace{"a": {Revision: 2, Entries: 1, Bytes: 3}}, []*Entry{e}, false},
		{"entry revision above namespace", map[string]Namespace{"a": {Revision: 1, Entries: 1, Bytes: 2}}, []*Entry{e}, false},
		{"orphan entry", map[string]Namespace{}, []*Entry{e}, false},
		{"duplicate entry", map[string]Namespace{"a": {Revision: 2, Entries: 2, Bytes: 4}}, []*Entry{e, e}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := Restore(tc.ns, tc.entries)
			if (err == nil) != tc.ok {
				t.Fatalf("ok=%v, err %v", tc.ok, err)
			}
			if tc.ok && v.Namespace("gone").Revision != 7 {
				t.Fatal("emptied namespace counter lost")
			}
		})
	}
}
