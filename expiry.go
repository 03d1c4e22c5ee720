package statestore

import (
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
)

// Leases lapse on the store's clock; their EXPIRE records are committed
// through the pipeline like any write, by the first batch admitted after
// the deadline (batch.expireDue) or, when nobody writes, by the expiry
// loop.

// expiryRetry is how long the expiry loop waits before committing lapsed
// leases again after the journal refused their EXPIREs: a disk that stays
// full (its reserve used up) or broken must not turn the retry into a busy
// loop. Meanwhile nobody reads the lapsed lease as present: a Get of it
// tries the EXPIRE itself and answers STORAGE when that fails.
const expiryRetry = time.Second

// expirer is the expiry loop: it sleeps until the earliest lease deadline
// of the published view (re-arming whenever a commit may have changed it)
// and then commits every due lease.
type expirer struct {
	clock clock.Clock
	view  func() *materialize.View
	// expire commits the EXPIREs of every lease due now.
	expire  func() error
	changed chan struct{} // a commit may have moved the earliest deadline
	quit    chan struct{}
	done    chan struct{}
}

func newExpirer(c clock.Clock, view func() *materialize.View, expire func() error) *expirer {
	return &expirer{clock: c, view: view, expire: expire,
		changed: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// poke makes the loop re-read the earliest deadline.
func (x *expirer) poke() {
	select {
	case x.changed <- struct{}{}:
	default:
	}
}

// stop ends the loop and waits for it.
func (x *expirer) stop() {
	close(x.quit)
	<-x.done
}

// run is the loop; it returns once stop is called or the store closed.
func (x *expirer) run() {
	defer close(x.done)
	var (
		timer    clock.Timer
		timerC   <-chan time.Time
		armedFor int64
	)
	for {
		if next, ok := x.view().NextDeadline(); ok && next != armedFor {
			if timer != nil {
				timer.Stop()
			}
			armedFor = next
			timer = clock.TimerAt(x.clock, time.UnixMilli(next))
			timerC = timer.C()
		}
		select {
		case <-timerC:
			fired := armedFor
			timer, timerC, armedFor = nil, nil, 0
			if err := x.expire(); err != nil {
				if CodeOf(err) == Unavailable {
					return
				}
				// The disk refused (full, with the reserve used up, or
				// failing): try again after expiryRetry, not at once.
				armedFor = fired
				timer = clock.TimerAt(x.clock, x.clock.Now().Add(expiryRetry))
				timerC = timer.C()
			}
		case <-x.changed:
		case <-x.quit:
			if timer != nil {
				timer.Stop()
			}
			return
		}
	}
}
