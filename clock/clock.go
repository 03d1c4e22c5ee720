// Package clock is the store's notion of time, injectable so that lease
// expiry and acknowledgement deadlines are tested by advancing a fake clock
// instead of sleeping.
//
// # Invariants
//
//  1. A Fake clock only moves when Advance or Set is called, and a timer
//     fires exactly when the fake time reaches its deadline (inclusive),
//     never before.
//     Code: Fake.Set, Fake.Advance, Fake.newTimer, Fake.NewTimerAt.
//     Tests: TestFakeTimersFireAtDeadlineInOrder, TestTimerAtIsNotLateWhenTheClockMoves, TestTimerAtInThePastFiresAtOnce.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes one-shot timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer: C receives once when it fires.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a manually advanced clock for tests.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// armed receives (without blocking) each time a timer is created, so a
	// test can wait until the code under test is waiting on the clock.
	armed chan struct{}
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, armed: make(chan struct{}, 1024)}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Armed receives once per timer created, for tests that must know a timer
// is pending before they advance.
func (f *Fake) Armed() <-chan struct{} { return f.armed }

// NewTimer returns a timer firing when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	at := f.now.Add(d)
	f.mu.Unlock()
	return f.newTimer(at, d)
}

// newTimer arms a timer at at; d <= 0 means it is already due.
func (f *Fake) newTimer(at time.Time, d time.Duration) Timer {
	f.mu.Lock()
	t := &fakeTimer{f: f, at: at, c: make(chan time.Time, 1)}
	if d <= 0 || !at.After(f.now) {
		t.fired = true
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	f.mu.Unlock()
	select {
	case f.armed <- struct{}{}:
	default:
	}
	return t
}

// Advance moves the fake time forward by d and fires every due timer in
// deadline order.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards) and fires due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.now = t
	}
	var due, keep []*fakeTimer
	for _, tm := range f.timers {
		if !tm.at.After(f.now) {
			due = append(due, tm)
		} else {
			keep = append(keep, tm)
		}
	}
	f.timers = keep
	now := f.now
	f.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, tm := range due {
		tm.fire(now)
	}
}

type fakeTimer struct {
	f     *Fake
	at    time.Time
	c     chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) fire(now time.Time) {
	t.f.mu.Lock()
	if t.fired {
		t.f.mu.Unlock()
		return
	}
	t.fired = true
	t.f.mu.Unlock()
	t.c <- now
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.fired {
		return false
	}
	t.fired = true
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			break
		}
	}
	return true
}
