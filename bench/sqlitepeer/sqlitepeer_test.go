package sqlitepeer

import (
	"errors"
	"testing"
)

func TestCAS(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 3, 2193, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 9; i++ {
		if err := db.CAS(i % db.Keys()); err != nil {
			t.Fatalf("CAS %d: %v", i, err)
		}
	}
	var rev int64
	var n int
	if err := db.db.QueryRow(`SELECT rev, length(body) FROM docs WHERE id = 1`).Scan(&rev, &n); err != nil {
		t.Fatal(err)
	}
	if rev != 3 || n != 2193 {
		t.Fatalf("rev %d len %d, want 3 and 2193", rev, n)
	}
	db.revs[1] = 0 // stale expectation
	if err := db.CAS(1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale CAS = %v, want ErrConflict", err)
	}
}
