package wsconn

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
	"time"
)

// hangGuard bounds every wait far beyond the timeouts the tests use.
const hangGuard = 10 * time.Second

func TestDeadlineExpiresAStuckOperation(t *testing.T) {
	t.Parallel()
	expired := make(chan struct{})
	d := NewDeadline(5*time.Millisecond, func() { close(expired) })
	defer d.Close()
	d.Start()
	select {
	case <-expired:
	case <-time.After(hangGuard):
		t.Fatal("the deadline of an operation that never ended did not expire")
	}
	if !d.Stop() {
		t.Fatal("Stop did not report the expiry of the operation it ended")
	}
}

func TestDeadlineNeverFiresAfterStop(t *testing.T) {
	t.Parallel()
	calls := 0
	d := NewDeadline(time.Hour, func() { calls++ })
	defer d.Close()
	d.Start()
	d.at.Store(1) // its deadline passed while it ran, and the timer is late
	d.Stop()
	d.fire() // the timer firing late, after the operation ended
	if calls != 0 {
		t.Fatalf("expire called %d times for an operation that had ended", calls)
	}
}

func TestDeadlineTimesEachOperationFromItsStart(t *testing.T) {
	t.Parallel()
	calls := 0
	d := NewDeadline(time.Hour, func() { calls++ })
	defer d.Close()
	d.Start()
	d.at.Store(1) // its deadline passed, and its timer is late
	if d.Stop() {
		t.Fatal("an operation stopped before its timer ran was reported expired")
	}
	d.Start()
	d.fire() // the first operation's timer, firing during the second
	if calls != 0 {
		t.Fatalf("expire called %d times before the running operation's deadline", calls)
	}
	if d.Stop() {
		t.Fatal("the second operation was reported expired")
	}
}

// TestDeadlineExpiresAnOperationAfterAnIdleFire: the timer is set once and
// fires once per timeout, so an operation may begin after it fired and
// found nothing running (Start sets it again), or while that fire runs,
// after Start found it still set (the fire sets it again).
func TestDeadlineExpiresAnOperationAfterAnIdleFire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// between runs between the first operation's end and the
		// second's start, started runs after that start.
		between, started func(d *Deadline)
	}{
		{"the fire found nothing and unset the timer", func(d *Deadline) {
			d.fire()
			d.t.Stop() // it fired: nothing else is pending
		}, func(*Deadline) {}},
		{"the second began while the timer looked set", func(*Deadline) {}, func(d *Deadline) {
			// The first operation's timer fires now, which the Start
			// counted on.
			d.t.Stop()
			d.fire()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expired := make(chan struct{})
			d := NewDeadline(20*time.Millisecond, func() { close(expired) })
			defer d.Close()
			d.Start()
			d.Stop()
			tc.between(d)
			d.Start()
			tc.started(d)
			select {
			case <-expired:
			case <-time.After(hangGuard):
				t.Fatal("an operation that never ended was never expired")
			}
			if !d.Stop() {
				t.Fatal("Stop did not report the expiry")
			}
		})
	}
}

func TestReadAllReadsEveryByte(t *testing.T) {
	t.Parallel()
	msg := make([]byte, 300<<10)
	for i := range msg {
		msg[i] = byte(rand.Uint32())
	}
	failure := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		r    io.Reader
		want []byte
		err  error
	}{
		{"empty", bytes.NewReader(nil), nil, nil},
		{"one read", bytes.NewReader(msg[:100]), msg[:100], nil},
		{"byte by byte", iotest.OneByteReader(bytes.NewReader(msg[:5000])), msg[:5000], nil},
		{"over the pooled size", iotest.HalfReader(bytes.NewReader(msg)), msg, nil},
		{"data then EOF together", iotest.DataErrReader(bytes.NewReader(msg[:9000])), msg[:9000], nil},
		{"cut", io.MultiReader(bytes.NewReader(msg[:7000]), iotest.ErrReader(failure)), msg[:7000], failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := GetBuffer()
			defer PutBuffer(b)
			got, err := ReadAll(tc.r, (*b)[:0])
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("read %d bytes, not the %d of the message", len(got), len(tc.want))
			}
			*b = got
		})
	}
}

func TestPutBufferDropsHugeBuffers(t *testing.T) {
	huge := make([]byte, 0, maxPooled+1)
	b := &huge
	PutBuffer(b)
	for range 16 {
		if got := GetBuffer(); got == b {
			t.Fatalf("a %d-byte buffer was kept, over the %d bound", cap(huge), maxPooled)
		}
	}
}
