package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

var ctx = context.Background()

var (
	alice = statestore.Principal{ID: "alice"}
	bob   = statestore.Principal{ID: "bob"}
	admin = statestore.Principal{ID: "ops", Admin: true}
	sys   = statestore.System()
)

// t0 is the fake clock's start: a fixed instant, so timestamps are exact.
var t0 = time.UnixMilli(1_750_000_000_000)

func intentDoc(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/media-intent-publish.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docN is a schema-valid document that differs by n.
func docN(n int) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%d","media_kind":"video","priority":%d}`, n, n%1000)
}

type fixture struct {
	t     testing.TB
	dir   string
	clock *clock.Fake
	opts  statestore.Options
	s     *statestore.Store
	// node is set when s is one node of a cluster (cluster_contract_test.go):
	// open restarts that node instead of opening a single store.
	node *clusterHome
}

func newFixture(t testing.TB, mod ...func(*statestore.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), clock: clock.NewFake(t0)}
	f.opts = statestore.Options{Dir: f.dir, Clock: f.clock, Schemas: schema.NewRegistry()}
	for _, m := range mod {
		m(&f.opts)
	}
	f.open()
	t.Cleanup(func() {
		if f.s != nil {
			f.s.Close()
		}
	})
	return f
}

// journalFirst is the index of the first record in the journal on disk.
func (f *fixture) journalFirst() uint64 {
	f.t.Helper()
	segs, err := journal.ListSegments(filepath.Join(f.dir, statestore.StoreDirName, "journal"))
	if err != nil || len(segs) == 0 {
		f.t.Fatalf("journal segments: %v %v", segs, err)
	}
	return segs[0].Start
}

func (f *fixture) open() {
	f.t.Helper()
	if f.node != nil {
		f.s = f.node.restart(f.t)
		return
	}
	s, err := statestore.Open(f.opts)
	if err != nil {
		f.t.Fatalf("open: %v", err)
	}
	f.s = s
}

func (f *fixture) reopen() {
	f.t.Helper()
	if err := f.s.Close(); err != nil {
		f.t.Fatalf("close: %v", err)
	}
	f.s = nil
	f.open()
}

func (f *fixture) put(p statestore.Principal, ns, key string, doc []byte, x statestore.Expect) (statestore.Entry, error) {
	return f.s.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc, Expect: x})
}

func (f *fixture) mustPut(p statestore.Principal, ns, key string, doc []byte) statestore.Entry {
	f.t.Helper()
	e, err := f.put(p, ns, key, doc, statestore.Expect{})
	if err != nil {
		f.t.Fatalf("put %s/%s: %v", ns, key, err)
	}
	return e
}

// wantCode fails unless err carries code and its message names field.
func wantCode(t testing.TB, err error, code statestore.Code, field string) *statestore.Error {
	t.Helper()
	var se *statestore.Error
	if !errors.As(err, &se) {
		t.Fatalf("want %v error, got %v", code, err)
	}
	if se.Code != code {
		t.Fatalf("want code %v, got %v (%v)", code, se.Code, err)
	}
	if !errors.Is(err, &statestore.Error{Code: code}) {
		t.Fatalf("errors.Is does not match code %v", code)
	}
	if field != "" && se.Field != field {
		t.Fatalf("want field %q, got %q (%v)", field, se.Field, err)
	}
	return se
}
