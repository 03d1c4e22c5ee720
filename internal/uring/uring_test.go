package uring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// newTestRing sets up a ring or skips: a kernel or sandbox without
// io_uring has nothing to test here (the nil-ring tests still run).
func newTestRing(t *testing.T, reaper bool) *Ring {
	t.Helper()
	r, err := newRing(reaper)
	if err != nil {
		var ue *Error
		if !errors.As(err, &ue) {
			t.Fatalf("New failed with %T %v, want *Error", err, err)
		}
		t.Skipf("io_uring unavailable here: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFdatasyncGoesThroughTheRing(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	f := tempFile(t)
	for i := 1; i <= 3; i++ {
		if err := r.Fdatasync(f); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		if r.seq != uint64(i) {
			t.Fatalf("after sync %d the ring submitted %d operations", i, r.seq)
		}
		if r.pending.Load() {
			t.Fatalf("sync %d returned with an operation still pending", i)
		}
	}
}

func TestKernelErrorsReachTheCaller(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	// A descriptor the kernel refuses: the completion carries EBADF, which
	// says nothing about "did not run", so it is returned as is.
	if err := r.fdatasync(1 << 20); err != syscall.EBADF {
		t.Fatalf("fdatasync of a closed descriptor: %v, want EBADF", err)
	}
	if r.seq != 1 {
		t.Fatalf("the ring submitted %d operations, want 1", r.seq)
	}
}

func TestOperationTheKernelDidNotRunRunsDirectly(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	// fdatasync of a pipe: the ring answers EINVAL, so the direct call
	// runs and its own answer (EINVAL again) is what the caller sees.
	err = r.Fdatasync(pw)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Err != syscall.EINVAL || pe.Op != "fdatasync" {
		t.Fatalf("fdatasync of a pipe: %v, want a fdatasync PathError with EINVAL", err)
	}
	if r.seq != 1 {
		t.Fatalf("the ring submitted %d operations, want 1", r.seq)
	}
	if r.broken != nil {
		t.Fatalf("an operation's own error broke the ring: %v", r.broken)
	}
}

func TestNilAndClosedRingsRunDirectly(t *testing.T) {
	t.Parallel()
	f := tempFile(t)
	var nilRing *Ring
	nilRing.Poll()
	if err := nilRing.Fdatasync(f); err != nil {
		t.Fatalf("nil ring: %v", err)
	}
	if err := nilRing.Close(); err != nil {
		t.Fatalf("closing a nil ring: %v", err)
	}

	r := newTestRing(t, true)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	r.Poll()
	if err := r.Fdatasync(f); err != nil {
		t.Fatalf("closed ring: %v", err)
	}
	if r.seq != 0 {
		t.Fatalf("a closed ring submitted %d operations", r.seq)
	}
}

// sleep runs an IORING_OP_TIMEOUT of d through the ring: an operation
// that takes long enough to see where its waiter waits.
func (r *Ring) sleep(d time.Duration) (int32, error) {
	const opTimeout = 11
	ts := syscall.NsecToTimespec(int64(d))
	res, err := r.run(func(sqe []byte) {
		sqe[sqeOpcode] = opTimeout
		putUint32(sqe[sqeFD:], ^uint32(0)) // fd -1
		putUint64(sqe[sqeAddr:], uint64(uintptr(unsafe.Pointer(&ts))))
		putUint32(sqe[sqeLen:], 1)
	})
	runtime.KeepAlive(&ts)
	return res, err
}

// TestWaiterParksInsteadOfHoldingAProcessor is why the package exists: the
// goroutine waiting for the kernel is parked on a channel, not in a
// system call holding its P.
func TestWaiterParksInsteadOfHoldingAProcessor(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	done := make(chan int32)
	go func() {
		res, err := r.sleep(200 * time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Until the operation completes, the waiter must be seen parked on its
	// channel: one that waited inside a system call would be seen in state
	// "syscall" (or running) throughout. Other states pass by on the way in
	// (a loaded machine shows it "runnable" before it reaches the channel).
	var seen []string
	for {
		state := waiterState(t.Name())
		if state == "chan receive" {
			break
		}
		if state != "" && (len(seen) == 0 || seen[len(seen)-1] != state) {
			seen = append(seen, state)
		}
		select {
		case res := <-done:
			t.Fatalf("the operation completed (%d) and its waiter was never seen parked on its channel, only in states %q", res, seen)
		default:
		}
		runtime.Gosched()
	}
	if res := <-done; res != -int32(syscall.ETIME) {
		t.Fatalf("timeout completed with %d, want -ETIME", res)
	}
}

// waiterState returns the state of the goroutine waiting in Ring.run that
// the test function test started, or "" while there is none. Other tests'
// waiters do not count: they run in parallel.
func waiterState(test string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	creator := "created by github.com/keeppeek/statestore/internal/uring." + test + " in goroutine "
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "uring.(*Ring).run(") || !strings.Contains(g, creator) {
			continue
		}
		head := g[:strings.IndexByte(g, '\n')] // goroutine N [state]:
		return head[strings.IndexByte(head, '[')+1 : strings.IndexByte(head, ']')]
	}
	return ""
}

// TestPollWakesTheWaiterWithoutTheReaper: under load the scheduler reads
// the eventfd late, so callers' Poll must be enough on its own.
func TestPollWakesTheWaiterWithoutTheReaper(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, false)
	done := make(chan int32)
	go func() {
		res, err := r.sleep(time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for {
		r.Poll()
		select {
		case res := <-done:
			if res != -int32(syscall.ETIME) {
				t.Fatalf("timeout completed with %d, want -ETIME", res)
			}
			if atomic.LoadUint32(r.cqHead) != atomic.LoadUint32(r.cqTail) {
				t.Fatal("Poll left a completion in the queue")
			}
			return
		default:
			runtime.Gosched()
		}
	}
}

// queuedInRun reports whether a goroutine that the test function test
// started waits for the ring's mutex in Ring.run.
func queuedInRun(test string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	creator := "created by github.com/keeppeek/statestore/internal/uring." + test + " in goroutine "
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "uring.(*Ring).run(") && strings.Contains(g, creator) && strings.Contains(g, "[sync.Mutex.Lock") {
			return true
		}
	}
	return false
}

// TestOneOperationInFlight: while one operation is in flight, a second
// caller queues on the ring's mutex instead of submitting, and returns
// only after the first completed.
func TestOneOperationInFlight(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	f := tempFile(t)
	done := make(chan string, 2)
	go func() {
		if _, err := r.sleep(500 * time.Millisecond); err != nil {
			t.Error(err)
		}
		done <- "timeout"
	}()
	for waiterState(t.Name()) != "chan receive" {
		runtime.Gosched()
	}
	go func() {
		if err := r.Fdatasync(f); err != nil {
			t.Error(err)
		}
		done <- "fdatasync"
	}()
	for !queuedInRun(t.Name()) {
		select {
		case what := <-done:
			t.Fatalf("%s finished before the second caller was seen queued", what)
		default:
		}
		runtime.Gosched()
	}
	if first, second := <-done, <-done; first != "timeout" || second != "fdatasync" {
		t.Fatalf("operations finished in the order %s, %s: the second did not wait for the first", first, second)
	}
	if r.seq != 2 {
		t.Fatalf("the ring submitted %d operations, want 2", r.seq)
	}
}

// TestDescriptorHeldUntilTheOperationEnds: a file closed while its
// Fdatasync waits for the ring keeps its descriptor number until the
// operation ran, so a file opened meanwhile cannot be given that number
// (and synced in its place).
func TestDescriptorHeldUntilTheOperationEnds(t *testing.T) {
	t.Parallel()
	r := newTestRing(t, true)
	f := tempFile(t)
	fd := f.Fd()
	r.mu.Lock() // the ring is busy: Fdatasync waits inside Ring.run
	synced := make(chan error, 1)
	go func() { synced <- r.Fdatasync(f) }()
	for !queuedInRun(t.Name()) {
		runtime.Gosched()
	}
	if err := f.Close(); err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	other, err := os.Open(f.Name())
	if err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	defer other.Close()
	reused := other.Fd() == fd
	r.mu.Unlock()
	if err := <-synced; err != nil {
		t.Fatalf("Fdatasync of the file closed meanwhile: %v", err)
	}
	if reused {
		t.Fatalf("descriptor %d was reused while an operation on it waited", fd)
	}
}
