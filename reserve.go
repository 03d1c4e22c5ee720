package statestore

import (
	"time"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// checkReserve refuses a PUT while the journal runs on its reserve: every
// PUT appends a whole frame, even one that shrinks a document, so on a
// full disk only deletions and expiries may spend the space the reserve
// freed. It is called by the write stage, in commit order, so no PUT
// admitted after the failure that spent the reserve reaches the journal.
func (s *Store) checkReserve() error {
	if err := s.jnl.CheckReserve(); err != nil {
		return wrapErr(Storage, "journal reserve", err)
	}
	return nil
}

// purgeOverdue commits one EXPIRE per lease of view that is due now, for
// Open, and returns how many. If the disk is full, the failed write makes
// the journal give up its reserve; the EXPIREs then fit in the space it
// held, so they are tried once more: a store whose leases lapsed while the
// disk was full still opens.
func (s *Store) purgeOverdue(view *materialize.View) (int, error) {
	releases := s.jnl.Reserve().Releases
	for {
		b := s.newBatch(view)
		n, err := b.expireDue(b.now)
		if err != nil {
			return 0, err
		}
		err = s.commitAlone(b)
		if err == nil || !journal.IsNoSpace(err) || s.jnl.Reserve().Releases == releases {
			return n, err
		}
		releases = s.jnl.Reserve().Releases
	}
}

// expiryRetry is how long the expiry goroutine waits before committing
// lapsed leases again after the journal refused their EXPIREs: a disk that
// stays full (its reserve used up) or broken must not turn the retry into
// a busy loop. Meanwhile nobody reads the lapsed lease as present: a Get
// of it tries the EXPIRE itself and answers STORAGE when that fails.
const expiryRetry = time.Second
