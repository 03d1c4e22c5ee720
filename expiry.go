package statestore

import (
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
)

// The lease-expiry loop. Leases lapse on the store's clock; their EXPIRE
// records are committed through the pipeline like any write, by the first
// batch admitted after the deadline or, when nobody writes, by the loop.

// expiry commits lapsed leases when nobody else is writing: it sleeps until
// the earliest deadline of the published view (re-arming whenever a commit
// may have changed it) and then submits an expire op, which commits every
// due lease as EXPIRE records.
func (s *Store) expiry() {
	defer close(s.pipe.expiryDone)
	var (
		timer    clock.Timer
		timerC   <-chan time.Time
		armedFor int64
	)
	for {
		if next, ok := s.view.Load().NextDeadline(); ok && next != armedFor {
			if timer != nil {
				timer.Stop()
			}
			armedFor = next
			timer = clock.TimerAt(s.clock, time.UnixMilli(next))
			timerC = timer.C()
		}
		select {
		case <-timerC:
			fired := armedFor
			timer, timerC, armedFor = nil, nil, 0
			if _, err := s.submit(&op{kind: opExpire}); err != nil {
				if CodeOf(err) == Unavailable {
					return
				}
				// The disk refused (full, with the reserve used up, or
				// failing): try again after expiryRetry, not at once.
				armedFor = fired
				timer = clock.TimerAt(s.clock, s.clock.Now().Add(expiryRetry))
				timerC = timer.C()
			}
		case <-s.pipe.leasesChanged:
		case <-s.pipe.quit:
			if timer != nil {
				timer.Stop()
			}
			return
		}
	}
}

// expireDue adds one EXPIRE per lease due at now, earliest deadline first,
// and returns how many. An error is add's: a bug, and the batch is lost.
func (b *batch) expireDue(now int64) (int, error) {
	var due []*Entry
	b.view.Due(now, func(e *Entry) bool { due = append(due, e); return true })
	for _, e := range due {
		rev := b.view.Namespace(e.Namespace).Revision + 1
		if _, err := b.add(&journal.Record{Kind: journal.KindExpire, Namespace: e.Namespace, Key: e.Key, Revision: rev}); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}
