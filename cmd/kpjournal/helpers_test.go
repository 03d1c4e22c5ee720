package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

var ctx = context.Background()

var admin = statestore.Principal{ID: "ops", Admin: true}

// kp runs kpjournal in-process and returns its exit code and output.
func kp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// kpJSON runs kpjournal with --json and decodes stdout into v.
func kpJSON(t *testing.T, v any, args ...string) (int, string) {
	t.Helper()
	code, out, errs := kp(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kpjournal %s --json: stdout is not one JSON document: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errs)
	}
	return code, errs
}

func doc(n int) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%d","media_kind":"video","priority":%d}`, n, n%1000)
}

// testStore is a real store directory written by the store itself.
type testStore struct {
	t       *testing.T
	dir     string
	opts    statestore.Options
	s       *statestore.Store
	records uint64 // journal records written (every put, delete and expire is one)
}

// newTestStore opens a store in a temporary directory. Automatic
// checkpoints are off so that tests decide where they are.
func newTestStore(t *testing.T, mod ...func(*statestore.Options)) *testStore {
	t.Helper()
	ts := &testStore{t: t, dir: t.TempDir()}
	ts.opts = statestore.Options{Dir: ts.dir, Clock: clock.NewFake(time.Now()), Schemas: schema.NewRegistry(), CheckpointBytes: -1}
	for _, m := range mod {
		m(&ts.opts)
	}
	ts.open()
	t.Cleanup(func() {
		if ts.s != nil {
			ts.s.Close()
		}
	})
	return ts
}

func (ts *testStore) open() {
	ts.t.Helper()
	s, err := statestore.Open(ts.opts)
	if err != nil {
		ts.t.Fatalf("open store: %v", err)
	}
	ts.s = s
	ts.records += uint64(s.OpenReport().Expired)
}

func (ts *testStore) close() {
	ts.t.Helper()
	if err := ts.s.Close(); err != nil {
		ts.t.Fatalf("close store: %v", err)
	}
	ts.s = nil
}

func (ts *testStore) put(ns, key string, n int, ttl time.Duration) statestore.Entry {
	ts.t.Helper()
	e, err := ts.s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc(n), TTL: ttl})
	if err != nil {
		ts.t.Fatalf("put %s/%s: %v", ns, key, err)
	}
	ts.records++
	return e
}

func (ts *testStore) del(ns, key string) {
	ts.t.Helper()
	if _, err := ts.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key}); err != nil {
		ts.t.Fatalf("delete %s/%s: %v", ns, key, err)
	}
	ts.records++
}

// fill writes n records over three namespaces: puts, replacements, a
// delete every seventh record and a long lease every fifth.
func (ts *testStore) fill(n int) {
	ts.t.Helper()
	nss := []string{"service/transcoder-a", "group/lobby", "user/alice"}
	for i := 0; i < n; i++ {
		ns, key := nss[i%3], fmt.Sprintf("intents/cam-%d", i%5)
		if i%7 == 6 {
			if _, err := ts.s.Get(ctx, admin, ns, key); err == nil {
				ts.del(ns, key)
				continue
			}
		}
		var ttl time.Duration
		if i%5 == 4 {
			ttl = time.Hour
		}
		ts.put(ns, key, i, ttl)
	}
}

// tearFinalRecord leaves the store as a crash during its final record's
// append does: the record cut short inside, and the acknowledged floor
// (the ACKNOWLEDGED marker) below it.
func (ts *testStore) tearFinalRecord() {
	ts.t.Helper()
	segs := ts.segments()
	last := segs[len(segs)-1]
	if err := os.Truncate(last.Path, last.Size-7); err != nil {
		ts.t.Fatal(err)
	}
	if err := journal.SetFloor(filepath.Dir(last.Path), ts.records-1); err != nil {
		ts.t.Fatal(err)
	}
}

func (ts *testStore) root() string { return filepath.Join(ts.dir, statestore.StoreDirName) }

func (ts *testStore) segments() []journal.Segment {
	ts.t.Helper()
	segs, err := journal.ListSegments(filepath.Join(ts.root(), "journal"))
	if err != nil {
		ts.t.Fatal(err)
	}
	return segs
}

// entryOffsets walks a segment file the way tidwall/wal does and returns
// the offset of each entry: the ground truth the tests hold offsets to.
func entryOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := 0; off < len(data) && !journal.PrewrittenFrom(data, int64(off)); {
		n, w := binary.Uvarint(data[off:])
		if w <= 0 || int(n) > len(data)-off-w {
			t.Fatalf("%s: cannot parse the entry at offset %d", path, off)
		}
		offs = append(offs, int64(off))
		off += w + int(n)
	}
	return offs
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x5a
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

// verifyChecked runs verify --json and holds its verdict to the store's
// own loading (recovery.LoadState, what Open runs): a store in which
// verify finds no corruption must load, to the state verify's replay ended
// in. (Verify reports more than loading refuses: every problem, not the
// first, and documents after a record the replay stopped at.)
func verifyChecked(t *testing.T, dir string, extra ...string) (int, verifyReport) {
	t.Helper()
	var rep verifyReport
	code, _ := kpJSON(t, &rep, append([]string{"verify", "--dir", dir}, extra...)...)
	for _, p := range rep.Problems {
		if p.Severity == corruption {
			return code, rep
		}
	}
	if len(extra) > 0 {
		return code, rep // bounds of their own; the defaults below would not match
	}
	st, err := recovery.LoadState(dir, 0, recovery.LoadOptions{})
	if err != nil {
		t.Fatalf("verify finds no corruption, but the state does not load: %v", err)
	}
	entries, bytes, nss := st.View.Totals()
	if rep.Replay.Entries != entries || rep.Replay.Bytes != bytes || rep.Replay.Namespaces != nss {
		t.Errorf("verify's replay ends in %+v; the store loads %d entries, %d bytes, %d namespaces", rep.Replay, entries, bytes, nss)
	}
	return code, rep
}
