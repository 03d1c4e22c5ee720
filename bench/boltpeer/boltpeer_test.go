package boltpeer

import (
	"errors"
	"sync"
	"testing"
)

func TestCAS(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		db, err := Open(t.TempDir(), 4, 2193, batch)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := 0; k < db.Keys(); k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3; i++ {
					if err := db.CAS(k); err != nil {
						t.Errorf("batch=%v CAS %d: %v", batch, k, err)
					}
				}
			}()
		}
		wg.Wait()
		if rev, err := db.Revision(1); err != nil || rev != 3 {
			t.Fatalf("batch=%v: revision %d (%v), want 3", batch, rev, err)
		}
		db.revs[1] = 0 // stale expectation
		if err := db.CAS(1); !errors.Is(err, ErrConflict) {
			t.Fatalf("batch=%v: stale CAS = %v, want ErrConflict", batch, err)
		}
		db.Close()
	}
}
