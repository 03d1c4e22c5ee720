package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
)

// jsonShape is what a --json document looks like, path by path: the kinds
// found at each path ("object", "array", "string", "number", "bool",
// "null") and the keys of each object path. Array elements share the path
// of their array plus "[]".
type jsonShape struct {
	kinds map[string]map[string]bool
	keys  map[string][]string
	dash  []string // paths holding the string "-"
}

func shapeOf(t *testing.T, what, doc string) *jsonShape {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%s: stdout is not one JSON document: %v\n%s", what, err, doc)
	}
	s := &jsonShape{kinds: map[string]map[string]bool{}, keys: map[string][]string{}}
	s.walk(t, what, "$", v)
	return s
}

func (s *jsonShape) walk(t *testing.T, what, path string, v any) {
	kind := "null"
	switch v := v.(type) {
	case map[string]any:
		kind = "object"
		keys := make([]string, 0, len(v))
		for k, x := range v {
			keys = append(keys, k)
			s.walk(t, what, path+"."+k, x)
		}
		slices.Sort(keys)
		if prev, ok := s.keys[path]; ok && !slices.Equal(prev, keys) {
			t.Errorf("%s: objects at %s have different keys: %v and %v", what, path, prev, keys)
		}
		s.keys[path] = keys
	case []any:
		kind = "array"
		for _, x := range v {
			s.walk(t, what, path+"[]", x)
		}
	case string:
		kind = "string"
		if v == "-" {
			s.dash = append(s.dash, path)
		}
	case float64:
		kind = "number"
	case bool:
		kind = "bool"
	}
	if s.kinds[path] == nil {
		s.kinds[path] = map[string]bool{}
	}
	s.kinds[path][kind] = true
}

// sameShape fails when two documents of one command differ in shape: an
// object with other keys, a list written as null, a "-" for a value.
func sameShape(t *testing.T, cmd string, a, b *jsonShape) {
	t.Helper()
	for _, s := range []*jsonShape{a, b} {
		if len(s.dash) > 0 {
			t.Errorf("%s: \"-\" written for a value at %v", cmd, s.dash)
		}
	}
	for path, ka := range a.keys {
		if kb, ok := b.keys[path]; ok && !slices.Equal(ka, kb) {
			t.Errorf("%s: %s has keys %v in one report and %v in another", cmd, path, ka, kb)
		}
	}
	for path, ka := range a.kinds {
		kb := b.kinds[path]
		if kb == nil {
			continue // under a list that is empty in the other report
		}
		if ka["array"] && kb["null"] || kb["array"] && ka["null"] {
			t.Errorf("%s: %s is a list in one report and null in another (an empty list must be [])", cmd, path)
		}
		for _, k := range []string{"object", "string", "number", "bool"} {
			for _, other := range []string{"object", "string", "number", "bool", "array"} {
				if k != other && (ka[k] && kb[other] && !ka[other] && !kb[k]) {
					t.Errorf("%s: %s is %s in one report and %s in another", cmd, path, k, other)
				}
			}
		}
	}
}

// shapeStores returns two stopped stores as different as a report can
// see: one never written to, one with entries, deletes, live and overdue
// leases, a checkpoint and a torn final record.
func shapeStores(t *testing.T) (empty, busy *testStore) {
	empty = newTestStore(t)
	empty.close()
	// An hour in the past, so its one-second leases are overdue now.
	busy = newTestStore(t, smallSegments, func(o *statestore.Options) { o.Clock = clock.NewFake(time.Now().Add(-time.Hour)) })
	busy.fill(30)
	busy.put("user/alice", "leases/short", 1, time.Second)
	if err := busy.s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	busy.fill(10)
	busy.close()
	busy.tearFinalRecord()
	return empty, busy
}

// copyOf copies a stopped store for a command that writes.
func copyOf(t *testing.T, ts *testStore) string {
	t.Helper()
	dir := t.TempDir()
	if err := copyStore(ts.root(), filepath.Join(dir, statestore.StoreDirName)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every command's --json report has one shape whatever the store holds:
// the same keys, empty lists as [], absent values as null, never "-".
func TestJSONSameShapeEverywhere(t *testing.T) {
	t.Parallel()
	empty, busy := shapeStores(t)
	bak := map[*testStore]string{}
	for _, ts := range []*testStore{empty, busy} {
		bak[ts] = filepath.Join(t.TempDir(), "b.kpbak")
		if code, _, errs := kp(t, "backup", "--dir", ts.dir, "--out", bak[ts]); code != exitOK {
			t.Fatalf("backup: exit %d: %s", code, errs)
		}
	}
	// The cases run one by one: they run commands on the same two stores,
	// and a command probes or takes its store's LOCK, so two at once could
	// each find the store in use.
	for _, tc := range []struct {
		name string
		args func(ts *testStore) []string
	}{
		{"verify", func(ts *testStore) []string { return []string{"verify", "--dir", ts.dir} }},
		{"replay", func(ts *testStore) []string { return []string{"replay", "--dir", ts.dir} }},
		{"dump", func(ts *testStore) []string { return []string{"dump", "--dir", ts.dir, "--documents"} }},
		{"stat", func(ts *testStore) []string { return []string{"stat", "--dir", ts.dir} }},
		{"checkpoint", func(ts *testStore) []string { return []string{"checkpoint", "--dir", copyOf(t, ts)} }},
		{"backup", func(ts *testStore) []string {
			return []string{"backup", "--dir", ts.dir, "--out", filepath.Join(t.TempDir(), "b")}
		}},
		{"restore", func(ts *testStore) []string { return []string{"restore", "--in", bak[ts], "--dir", t.TempDir()} }},
		{"repair", func(ts *testStore) []string { return []string{"repair", "--dir", copyOf(t, ts), "--yes"} }},
		{"repair --truncate-after", func(ts *testStore) []string {
			after := "0"
			if ts == busy {
				after = "20"
			}
			return []string{"repair", "--dir", copyOf(t, ts), "--truncate-after", after, "--yes"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shapes []*jsonShape
			for _, ts := range []*testStore{empty, busy} {
				args := append(tc.args(ts), "--json")
				_, out, errs := kp(t, args...)
				what := fmt.Sprintf("%s (stderr %q)", strings.Join(args, " "), errs)
				shapes = append(shapes, shapeOf(t, what, out))
			}
			sameShape(t, tc.name, shapes[0], shapes[1])
		})
	}
}
