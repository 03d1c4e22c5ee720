package clock

import (
	"testing"
	"time"
)

// jumpyClock advances itself by a second the first time a timer is made,
// as a goroutine descheduled between Now and NewTimer (or a test advancing
// the clock meanwhile) would see it. It hides Fake's NewTimerAt, so
// TimerAt takes its generic path.
type jumpyClock struct {
	f      *Fake
	jumped bool
}

func (c *jumpyClock) Now() time.Time { return c.f.Now() }

func (c *jumpyClock) NewTimer(d time.Duration) Timer {
	if !c.jumped {
		c.jumped = true
		c.f.Advance(time.Second)
	}
	return c.f.NewTimer(d)
}

func TestTimerAtIsNotLateWhenTheClockMoves(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_750_000_000_000)
	tests := []struct {
		name string
		clk  func(f *Fake) Clock
	}{
		{"fake arms at the absolute time", func(f *Fake) Clock { return f }},
		{"generic clock re-arms after a jump", func(f *Fake) Clock { return &jumpyClock{f: f} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := NewFake(start)
			tm := TimerAt(tc.clk(f), start.Add(3*time.Second))
			f.Set(start.Add(3*time.Second - time.Millisecond))
			select {
			case <-tm.C():
				t.Fatal("timer fired before its time")
			default:
			}
			f.Set(start.Add(3 * time.Second))
			select {
			case <-tm.C():
			default:
				t.Fatal("timer did not fire at its time")
			}
		})
	}
}

func TestTimerAtInThePastFiresAtOnce(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_750_000_000_000)
	f := NewFake(start)
	select {
	case <-TimerAt(f, start.Add(-time.Second)).C():
	default:
		t.Fatal("a timer for a past time did not fire at once")
	}
	real := TimerAt(Real{}, time.Now().Add(time.Hour))
	if !real.Stop() {
		t.Fatal("a real timer an hour ahead had already fired")
	}
}
