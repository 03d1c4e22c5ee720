package clock

import (
	"testing"
	"time"
)

func TestFakeTimersFireAtDeadlineInOrder(t *testing.T) {
	t.Parallel()
	f := NewFake(time.Unix(100, 0))
	late := f.NewTimer(2 * time.Second)
	early := f.NewTimer(time.Second)
	stopped := f.NewTimer(time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-early.C():
		t.Fatal("fired before its deadline")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-early.C(); !got.Equal(time.Unix(101, 0)) {
		t.Fatalf("fired with %v", got)
	}
	select {
	case <-late.C():
		t.Fatal("late timer fired early")
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	f.Set(time.Unix(50, 0)) // never backwards
	if !f.Now().Equal(time.Unix(101, 0)) {
		t.Fatalf("clock moved backwards to %v", f.Now())
	}
	f.Advance(time.Second)
	<-late.C()
	if late.Stop() {
		t.Fatal("Stop after firing reported true")
	}
}
