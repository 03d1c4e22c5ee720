package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/schema"
)

var alice = statestore.Principal{ID: "alice"}

// docN is a schema-valid document that differs by n.
func docN(n int) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%d","media_kind":"video","priority":%d}`, n, n%1000)
}

// mustPut writes doc at user/alice/key.
func mustPut(t *testing.T, s *storetest.Store, key string, doc []byte) {
	t.Helper()
	if _, err := s.Put(context.Background(), alice, statestore.PutRequest{Namespace: "user/alice", Key: key,
		Schema: schema.MediaIntentV1, Document: doc}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// root is the directory of s's files.
func root(s *storetest.Store) string { return filepath.Join(s.Dir, statestore.StoreDirName) }

// dirState is what a store directory holds, file by file, so a test can
// show that reading it changed nothing.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// viewDump is a view's namespaces and entries, for comparing states.
func viewDump(v *materialize.View) (map[string]materialize.Namespace, map[string]string) {
	nss, entries := map[string]materialize.Namespace{}, map[string]string{}
	v.Namespaces(func(name string, n materialize.Namespace) bool { nss[name] = n; return true })
	v.All(func(e *materialize.Entry) bool {
		entries[e.Namespace+"/"+e.Key] = string(e.Document) + "@" + e.Owner
		return true
	})
	return nss, entries
}

// TestLoadStateMatchesOpen builds a history across a checkpoint and holds
// LoadState to what Open serves, at the end and at every index on the way,
// without changing a file.
func TestLoadStateMatchesOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	for i := range 12 {
		mustPut(t, s, "k"+string(rune('a'+i%4)), docN(i))
		if i == 5 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Delete(ctx, alice, statestore.DeleteRequest{Namespace: "user/alice", Key: "kb"}); err != nil {
		t.Fatal(err)
	}
	var st *recovery.State
	s.Restart(func() {
		before := dirState(t, s.Dir)
		var err error
		if st, err = recovery.LoadState(s.Dir, 0, recovery.LoadOptions{}); err != nil {
			t.Fatal(err)
		}
		if st.Checkpoint.Path == "" || st.Checkpoint.Index == 0 || st.Index != st.Checkpoint.Index+uint64(st.Replayed) {
			t.Fatalf("state %+v: want a replay from the checkpoint to the end", st)
		}
		if after := dirState(t, s.Dir); !reflect.DeepEqual(before, after) {
			t.Fatal("LoadState changed the store's files")
		}
	})
	gotNS, gotEntries := viewDump(st.View)
	entries, bytes, nss := s.Usage()
	if e, b, n := st.View.Totals(); e != entries || b != bytes || n != nss {
		t.Errorf("LoadState totals %d %d %d, store %d %d %d", e, b, n, entries, bytes, nss)
	}
	for name, n := range gotNS {
		if info := s.Namespace(name); info.Revision != n.Revision || info.Entries != n.Entries || info.Bytes != n.Bytes {
			t.Errorf("namespace %s: LoadState %+v, store %+v", name, n, info)
		}
	}
	for k := range gotEntries {
		ns, key := filepath.Split(k)
		if _, err := s.Get(ctx, alice, filepath.Clean(ns), key); err != nil {
			t.Errorf("LoadState holds %s, the store does not: %v", k, err)
		}
	}

	// Every index: revision i of the namespace, the checkpoint used when
	// it is at or below i.
	for at := uint64(1); at <= st.Index; at++ {
		s2, err := recovery.LoadState(s.Dir, at, recovery.LoadOptions{})
		if err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		if s2.Index != at || s2.View.Namespace("user/alice").Revision != at {
			t.Fatalf("at %d: index %d, revision %d", at, s2.Index, s2.View.Namespace("user/alice").Revision)
		}
		if usesImage := s2.Checkpoint.Path != ""; usesImage != (at >= st.Checkpoint.Index) {
			t.Errorf("at %d: checkpoint %q (image at %d)", at, s2.Checkpoint.Path, st.Checkpoint.Index)
		}
	}
	var re *recovery.IndexRangeError
	if _, err := recovery.LoadState(s.Dir, st.Index+1, recovery.LoadOptions{}); !errors.As(err, &re) {
		t.Errorf("past the end: %v, want an IndexRangeError", err)
	}
}

// TestLoadStateLeavesTornTail: LoadState leaves out a torn final record,
// as Open cuts it, and says so, without cutting it itself.
func TestLoadStateLeavesTornTail(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	for i := range 5 {
		mustPut(t, s, "k", docN(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Store = nil
	segs, _ := journal.ListSegments(filepath.Join(root(s), "journal"))
	tail := segs[len(segs)-1]
	data, _ := os.ReadFile(tail.Path)
	os.WriteFile(tail.Path, data[:len(data)-3], 0o644)
	if err := journal.SetFloor(filepath.Dir(tail.Path), 4); err != nil {
		t.Fatal(err)
	}
	st, err := recovery.LoadState(s.Dir, 0, recovery.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.TornTail == nil || st.TornTail.Index != 5 || st.Index != 4 || st.TornTail.SavedAs != "" {
		t.Fatalf("state at %d, torn tail %+v; want index 4 and the record at 5 left out", st.Index, st.TornTail)
	}
	if now, _ := os.ReadFile(tail.Path); len(now) != len(data)-3 {
		t.Fatal("LoadState cut the tail")
	}
	// Acknowledged, the same damage is corruption, for both.
	if err := journal.SetFloor(filepath.Dir(tail.Path), 5); err != nil {
		t.Fatal(err)
	}
	_, lerr := recovery.LoadState(s.Dir, 0, recovery.LoadOptions{})
	_, oerr := statestore.Open(statestore.Options{Dir: s.Dir, Clock: s.Clock, Schemas: s.Reg})
	var lce, oce *journal.CorruptError
	if !errors.As(lerr, &lce) || !errors.As(oerr, &oce) || lce.Index != 5 || oce.Index != 5 {
		t.Fatalf("LoadState %v, Open %v: want corruption at index 5 from both", lerr, oerr)
	}
}
