// Package uring runs fdatasync(2) through a Linux io_uring, so that the
// goroutine waiting for the disk parks in the network poller instead of
// holding one of the scheduler's processors (a P) inside a blocking
// system call.
//
// Why: a goroutine in a system call keeps its P until the runtime's
// monitor takes it back, which it does only after at least one of its
// ticks (20 µs, longer when it has been idle), and in practice most
// fdatasyncs of a few hundred microseconds end still holding it. With
// GOMAXPROCS=2, a commit's fdatasync and the journal's background one
// each held a P: an execution trace of 127 writers showed runnable
// goroutines and no goroutine running 20% of the time, and only one
// running another 46%. Through the ring, the kernel runs the fdatasync on
// one of its own worker threads and posts a completion.
//
// Waking the waiter: the ring signals an eventfd, which a reaper goroutine
// reads through the poller. But the scheduler looks at the poller only
// when it has nothing else to run (or every 10 ms), so under load a
// completion could wait behind every runnable goroutine: measured, syncs
// took 1 ms instead of 0.4. So Poll lets busy goroutines notice a
// completion themselves: it costs one atomic load when nothing completed,
// and the journal's callers call it on their way in.
//
// # Invariants
//
//  1. Fdatasync reports the file's fdatasync outcome, or runs fdatasync(2)
//     directly: when the ring could not be set up, when it could not take
//     the operation, or when the kernel says the operation did not run
//     (cancelled, not supported). It never reports success for an
//     operation that did not complete.
//     Code: Ring.Fdatasync, Ring.fdatasync, didNotRun, Ring.run.
//     Tests: TestFdatasyncGoesThroughTheRing, TestKernelErrorsReachTheCaller,
//     TestOperationTheKernelDidNotRunRunsDirectly,
//     TestNilAndClosedRingsRunDirectly.
//  2. One operation is in flight per Ring at a time; concurrent callers
//     queue on its mutex.
//     Code: Ring.run, Ring.mu.
//     Tests: TestOneOperationInFlight.
//  3. The descriptor stays referenced (RawConn.Control) until the
//     operation completed, so a concurrent Close of the file cannot let
//     its number be reused under the kernel's feet.
//     Code: Ring.Fdatasync.
//     Tests: TestDescriptorHeldUntilTheOperationEnds.
//  4. The waiting goroutine parks on a channel, never in a system call
//     holding its processor, and a completion reaches it through the
//     reaper or through any caller's Poll, whichever comes first.
//     Code: Ring.run, Ring.reap, Ring.Poll, Ring.completeLocked.
//     Tests: TestWaiterParksInsteadOfHoldingAProcessor,
//     TestPollWakesTheWaiterWithoutTheReaper.
package uring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring geometry and the parts of the io_uring ABI this package uses
// (include/uapi/linux/io_uring.h).
const (
	entries = 4

	opFsync = 3

	fsyncDatasync = 1      // IORING_FSYNC_DATASYNC
	sqeAsync      = 1 << 4 // IOSQE_ASYNC: straight to a kernel worker

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap  = 1 << 0
	registerEventfd = 4

	sqeSize = 64
	cqeSize = 16

	// Byte offsets inside one submission queue entry.
	sqeOpcode   = 0
	sqeFlags    = 1
	sqeFD       = 4
	sqeAddr     = 16
	sqeLen      = 24
	sqeOpFlags  = 28
	sqeUserData = 32
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// Error is a failure of the ring itself (not of the operation it ran):
// which step failed, and the cause.
type Error struct {
	Op  string // the system call or step: "io_uring_setup", "mmap", "io_uring_enter", ...
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("uring: %s: %v", e.Op, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Ring is one io_uring with an eventfd for its completions. The zero value
// is not usable; a nil *Ring is, and runs every operation directly.
type Ring struct {
	// mu admits one operation at a time and guards seq, broken, closed.
	mu     sync.Mutex
	fd     int
	events *os.File      // the eventfd, non-blocking, read through the poller
	seq    uint64        // user_data of the last operation submitted
	stop   chan struct{} // closed by Close: the reaper returns
	reaped chan struct{} // closed when the reaper returned

	// pending is set while an operation is in flight, so Poll costs one
	// load otherwise.
	pending atomic.Bool
	// cqMu guards the completion queue's consumption, waiting and
	// released (Poll only ever tries it).
	cqMu     sync.Mutex
	waiting  *waiter
	released bool

	sqMem, cqMem, sqeMem []byte
	single               bool // cqMem is sqMem (IORING_FEAT_SINGLE_MMAP)
	sqHead, sqTail       *uint32
	sqMask               uint32
	sqArray              unsafe.Pointer // [sqEntries]uint32
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 unsafe.Pointer // [cqEntries]struct{user_data u64; res i32; flags u32}

	// broken is set once the ring failed in a way that leaves its state
	// unknown; every later operation runs directly.
	broken error
	closed bool
}

// waiter is the operation in flight: its completion's result, and done,
// closed once res is set.
type waiter struct {
	seq  uint64
	res  int32
	done chan struct{}
}

// New sets up a ring. It fails (with an *Error) where io_uring is not
// available: an old kernel, a seccomp profile that refuses it, or
// kernel.io_uring_disabled. Callers then use a nil *Ring.
func New() (*Ring, error) { return newRing(true) }

// newRing is New, with the reaper goroutine only when reaper is set (tests
// leave it out to see Poll alone wake a waiter).
func newRing(reaper bool) (*Ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, entries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, &Error{Op: "io_uring_setup", Err: errno}
	}
	r := &Ring{fd: int(fd)}
	if err := r.setup(&p); err != nil {
		r.release()
		return nil, err
	}
	r.stop, r.reaped = make(chan struct{}), make(chan struct{})
	if reaper {
		go r.reap()
	} else {
		close(r.reaped)
	}
	return r, nil
}

// setup maps the rings and registers the eventfd.
func (r *Ring) setup(p *params) error {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	r.single = p.features&featSingleMmap != 0
	if r.single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return &Error{Op: "mmap submission ring", Err: err}
	}
	r.cqMem = r.sqMem
	if !r.single {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
			r.cqMem = nil
			return &Error{Op: "mmap completion ring", Err: err}
		}
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, prot, flags); err != nil {
		return &Error{Op: "mmap submission entries", Err: err}
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Pointer(&r.sqMem[p.sqOff.array])
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Pointer(&r.cqMem[p.cqOff.cqes])

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return &Error{Op: "eventfd", Err: err}
	}
	// A non-blocking descriptor given to os.NewFile is read through the
	// poller: a Read with nothing to read parks the goroutine, not the P.
	r.events = os.NewFile(uintptr(efd), "io_uring eventfd")
	arg := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventfd, uintptr(unsafe.Pointer(&arg)), 1, 0, 0); errno != 0 {
		return &Error{Op: "io_uring_register eventfd", Err: errno}
	}
	return nil
}

// release unmaps and closes whatever setup made. Nothing may use the
// rings afterwards: Close holds cqMu and marks them released.
func (r *Ring) release() {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && !r.single {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	r.sqMem, r.cqMem, r.sqeMem = nil, nil, nil
	if r.events != nil {
		r.events.Close()
	}
	unix.Close(r.fd)
}

// Close releases the ring. It waits for an operation in flight; a nil
// Ring closes without doing anything.
func (r *Ring) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	close(r.stop)
	// Closing the eventfd wakes the reaper's read.
	r.events.Close()
	<-r.reaped
	r.cqMu.Lock()
	defer r.cqMu.Unlock()
	r.released = true
	r.events = nil
	r.release()
	return nil
}

// reap is the reaper goroutine: it reads the eventfd (parked in the
// poller) and hands completions to their waiter, until Close.
func (r *Ring) reap() {
	defer close(r.reaped)
	var buf [8]byte
	for {
		if _, err := r.events.Read(buf[:]); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// The eventfd failed short of being closed (it never
			// does): look at the queue every millisecond instead.
			r.tick()
			return
		}
		r.complete()
	}
}

// tick completes operations by looking at the queue every millisecond,
// until Close.
func (r *Ring) tick() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.complete()
		}
	}
}

// Poll hands a completed operation to its waiter, if one completed. Call
// it from goroutines that run anyway (the journal's callers): it costs
// an atomic load when no operation is in flight, and never blocks.
func (r *Ring) Poll() {
	if r == nil || !r.pending.Load() || !r.cqMu.TryLock() {
		return
	}
	defer r.cqMu.Unlock()
	if !r.released && atomic.LoadUint32(r.cqTail) != atomic.LoadUint32(r.cqHead) {
		r.completeLocked()
	}
}

// complete hands every queued completion to its waiter.
func (r *Ring) complete() {
	r.cqMu.Lock()
	defer r.cqMu.Unlock()
	if !r.released {
		r.completeLocked()
	}
}

// completeLocked consumes every queued completion and wakes the waiter
// whose completion was among them. cqMu is held; the rings are mapped.
func (r *Ring) completeLocked() {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		cqe := unsafe.Add(r.cqes, cqeSize*(head&r.cqMask))
		if w := r.waiting; w != nil && *(*uint64)(cqe) == w.seq {
			w.res = *(*int32)(unsafe.Add(cqe, 8))
			r.waiting = nil
			r.pending.Store(false)
			close(w.done)
		}
	}
	atomic.StoreUint32(r.cqHead, head)
}

// Fdatasync flushes f's data and the metadata needed to read it back, as
// fdatasync(2) does, retrying on EINTR. Through the ring when it can; on
// a nil, closed or broken Ring, directly.
func (r *Ring) Fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = r.fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// fdatasync runs the operation on fd, through the ring when it can.
func (r *Ring) fdatasync(fd int) error {
	if r != nil {
		res, err := r.run(func(sqe []byte) {
			sqe[sqeOpcode] = opFsync
			sqe[sqeFlags] = sqeAsync
			putUint32(sqe[sqeFD:], uint32(int32(fd)))
			putUint32(sqe[sqeOpFlags:], fsyncDatasync)
		})
		switch {
		case err != nil:
			// Not submitted: nothing ran.
		case res >= 0:
			return nil
		case !didNotRun(syscall.Errno(-res)):
			return syscall.Errno(-res)
		}
	}
	return directFdatasync(fd)
}

// didNotRun reports whether a completion's error says the kernel did not
// perform the operation, so running it directly reports its real outcome.
func didNotRun(e syscall.Errno) bool {
	switch e {
	case syscall.ECANCELED, syscall.EINVAL, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EAGAIN, syscall.EINTR:
		return true
	}
	return false
}

func directFdatasync(fd int) error {
	for {
		if err := syscall.Fdatasync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// errUnavailable says the ring did not take the operation.
var errUnavailable = errors.New("uring: ring unavailable")

// run submits the one entry prep fills and waits for its completion,
// returning the completion's result. An error means the operation was
// not submitted (the ring is closed or broken).
func (r *Ring) run(prep func(sqe []byte)) (int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.broken != nil {
		return 0, errUnavailable
	}
	tail := atomic.LoadUint32(r.sqTail)
	if tail != atomic.LoadUint32(r.sqHead) {
		// Only one entry is ever queued and io_uring_enter consumes it:
		// anything left means the ring is not in the state we think.
		r.broken = &Error{Op: "submit", Err: errors.New("submission queue not empty")}
		return 0, errUnavailable
	}
	idx := tail & r.sqMask
	sqe := r.sqeMem[idx*sqeSize : (idx+1)*sqeSize]
	clear(sqe)
	prep(sqe)
	r.seq++
	putUint64(sqe[sqeUserData:], r.seq)
	w := &waiter{seq: r.seq, done: make(chan struct{})}
	r.cqMu.Lock()
	r.waiting = w
	r.cqMu.Unlock()
	r.pending.Store(true)
	*(*uint32)(unsafe.Add(r.sqArray, 4*idx)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || n != 1 {
			// The entry may still sit in the queue: never use the ring
			// again, so it cannot be submitted twice.
			r.broken = &Error{Op: "io_uring_enter", Err: errnoOr(errno, fmt.Errorf("submitted %d of 1", n))}
			if atomic.LoadUint32(r.sqHead) == tail {
				r.cqMu.Lock()
				r.waiting = nil
				r.pending.Store(false)
				r.cqMu.Unlock()
				return 0, errUnavailable
			}
			// Consumed after all: the operation runs; wait for it.
		}
		break
	}
	<-w.done
	return w.res, nil
}

func errnoOr(e syscall.Errno, other error) error {
	if e != 0 {
		return e
	}
	return other
}

// The kernel reads entries in the machine's own byte order.
func putUint32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func putUint64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
