package clock

import "time"

// AtTimers is implemented by clocks that can arm a timer at an absolute
// time in one step (Fake does), so that the clock cannot move between
// reading Now and arming.
type AtTimers interface {
	NewTimerAt(at time.Time) Timer
}

// TimerAt returns a timer of clk that fires when clk's time reaches at.
// Computing at.Sub(clk.Now()) and calling NewTimer is not the same: if the
// clock moves between the two calls (a test advancing a fake clock, a
// descheduled goroutine), the timer fires that much late, or, on a fake
// clock, not until the next advance. Clocks implementing AtTimers arm
// exactly; for others TimerAt re-arms until less than a millisecond (the
// resolution of lease and ack deadlines) passed while arming.
func TimerAt(clk Clock, at time.Time) Timer {
	if a, ok := clk.(AtTimers); ok {
		return a.NewTimerAt(at)
	}
	for {
		now := clk.Now()
		t := clk.NewTimer(at.Sub(now))
		if clk.Now().Sub(now) < time.Millisecond {
			return t
		}
		t.Stop()
	}
}

// NewTimerAt returns a timer firing at at: the wall clock moves on its
// own, so a timer is as exact as the runtime makes it.
func (Real) NewTimerAt(at time.Time) Timer { return realTimer{time.NewTimer(time.Until(at))} }

// NewTimerAt returns a timer firing when the fake time reaches at (at
// once if it already has), read and armed under one lock.
func (f *Fake) NewTimerAt(at time.Time) Timer {
	f.mu.Lock()
	d := at.Sub(f.now)
	f.mu.Unlock()
	return f.newTimer(at, d)
}
