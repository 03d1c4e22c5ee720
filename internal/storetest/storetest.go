// Package storetest opens real stores on the fake clock for the worker
// packages' tests: a store in t.TempDir() whose registry holds the worker
// schemas, closed at the end of the test, and reopenable to test restarts.
package storetest

import (
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
)

// T0 is the fake clock's start, a fixed instant so timestamps are exact.
var T0 = time.UnixMilli(1_750_000_000_000)

// Store is an open store on a fake clock.
type Store struct {
	t     testing.TB
	Dir   string
	Clock *clock.Fake
	Reg   *schema.Registry
	*statestore.Store
}

// Open opens a store in a new temporary directory with a registry built by
// NewRegistry plus what register adds.
func Open(t testing.TB, register ...func(*schema.Registry) error) *Store {
	t.Helper()
	reg := schema.NewRegistry()
	for _, r := range register {
		if err := r(reg); err != nil {
			t.Fatal(err)
		}
	}
	s := &Store{t: t, Dir: t.TempDir(), Clock: clock.NewFake(T0), Reg: reg}
	s.open()
	t.Cleanup(func() {
		if s.Store != nil {
			s.Store.Close()
		}
	})
	return s
}

func (s *Store) open() {
	s.t.Helper()
	st, err := statestore.Open(statestore.Options{Dir: s.Dir, Clock: s.Clock, Schemas: s.Reg, CheckpointBytes: -1})
	if err != nil {
		s.t.Fatalf("open store: %v", err)
	}
	s.Store = st
}

// Restart closes the store and opens it again from its directory, as a
// media-server restart would; whileDown, if not nil, runs in between (to
// move the clock while nothing can expire a lease, say).
func (s *Store) Restart(whileDown func()) {
	s.t.Helper()
	if err := s.Store.Close(); err != nil {
		s.t.Fatalf("close store: %v", err)
	}
	s.Store = nil
	if whileDown != nil {
		whileDown()
	}
	s.open()
}
