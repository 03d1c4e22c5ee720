package etcdpeer

import (
	"errors"
	"testing"
)

func TestCAS(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 3, 2193)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 9; i++ {
		if err := db.CAS(i % db.Keys()); err != nil {
			t.Fatalf("CAS %d: %v", i, err)
		}
	}
	stale := db.revs[1]
	if err := db.CAS(1); err != nil {
		t.Fatal(err)
	}
	db.revs[1] = stale
	if err := db.CAS(1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale CAS = %v, want ErrConflict", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
