package dispatch

import (
	"context"
	"sync"
)

// byteBudget is the store-wide budget for bytes queued to clients: the sum
// over a Server's sessions of what each outbox holds, the message being
// sent included (it is in memory until its write returns). Each session
// draws on it up to its share, the budget divided by the sessions served
// (at least minShare), so a few sessions may use it all and many share it.
//
// A request reserves room for its answer before it runs (its worst case:
// a document and its names), and the answer takes the reservation's
// place, so a request never computes an answer the budget has no room
// for; an answer of the reader's own waits for room (acquire); a watch
// update that finds none is
// refused (tryAcquire), which closes its watch with BUFFER_OVERFLOW;
// snapshots and closures are always counted (force), being bounded in
// number by the watch bounds. A session holding nothing may always queue
// one message, so a bystander is never starved by stalled sessions: the
// budget is exceeded by at most one answer per session plus the forced
// messages. The reader of a session over its share, or of any session
// holding something while the budget is spent, waits (waitUnder): a peer
// that does not read is not read from.
//
// Lock order: an outbox's mu, then the budget's mu; never the reverse.
type byteBudget struct {
	max int64

	mu       sync.Mutex
	room     sync.Cond // broadcast when bytes are released or an outbox shuts
	used     int64
	sessions int
}

// minShare is the least share of a session, however many there are: one
// 65,536-byte snapshot answer.
const minShare = 64 << 10

func newByteBudget(max int64) *byteBudget {
	b := &byteBudget{max: max}
	b.room.L = &b.mu
	return b
}

func (b *byteBudget) shareLocked() int64 { return max(b.max/int64(max(1, b.sessions)), minShare) }

// fitsLocked reports whether o may queue n more bytes.
func (b *byteBudget) fitsLocked(o *outbox, n int64) bool {
	return o.bytes == 0 || (o.bytes+n <= b.shareLocked() && b.used+n <= b.max)
}

func (b *byteBudget) join() {
	b.mu.Lock()
	b.sessions++
	b.mu.Unlock()
}

// leave gives back what o still holds (messages dropped at the end of its
// session) and its share.
func (b *byteBudget) leave(o *outbox) {
	b.mu.Lock()
	b.used -= o.bytes
	o.bytes = 0
	b.sessions--
	b.room.Broadcast()
	b.mu.Unlock()
}

// acquire waits until o may queue n bytes and counts them; false, counting
// nothing, when o shut or ctx ended first (whoever ends it calls wake).
func (b *byteBudget) acquire(ctx context.Context, o *outbox, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ctx.Err() == nil && !o.shut.Load() && !b.fitsLocked(o, n) {
		b.room.Wait()
	}
	if ctx.Err() != nil || o.shut.Load() {
		return false
	}
	o.bytes += n
	b.used += n
	return true
}

// tryAcquire counts n bytes for o if they fit now.
func (b *byteBudget) tryAcquire(o *outbox, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fitsLocked(o, n) {
		return false
	}
	o.bytes += n
	b.used += n
	return true
}

// tryAcquireEach counts, in order, the bytes of as many of qs as fit for
// o, under one turn of the lock, and returns how many.
func (b *byteBudget) tryAcquireEach(o *outbox, qs []queued) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range qs {
		if !b.fitsLocked(o, q.n) {
			return i
		}
		o.bytes += q.n
		b.used += q.n
	}
	return len(qs)
}

// force counts n bytes for o whether they fit or not.
func (b *byteBudget) force(o *outbox, n int64) {
	b.mu.Lock()
	o.bytes += n
	b.used += n
	b.mu.Unlock()
}

// adjust changes o's count by d (an answer replacing its request's
// reservation), without waiting.
func (b *byteBudget) adjust(o *outbox, d int64) {
	b.mu.Lock()
	o.bytes += d
	b.used += d
	if d < 0 {
		b.room.Broadcast()
	}
	b.mu.Unlock()
}

func (b *byteBudget) release(o *outbox, n int64) {
	b.mu.Lock()
	o.bytes -= n
	b.used -= n
	b.room.Broadcast()
	b.mu.Unlock()
}

// waitUnder waits until o's reader may read another request: o holds
// nothing, or it is under its share while the budget is not spent, or o
// shut, or ctx is done (whoever ends it calls wake).
func (b *byteBudget) waitUnder(ctx context.Context, o *outbox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ctx.Err() == nil && !o.shut.Load() && o.bytes > 0 && (o.bytes >= b.shareLocked() || b.used >= b.max) {
		b.room.Wait()
	}
}

// wake makes the waiters look again (an outbox shut).
func (b *byteBudget) wake() {
	b.mu.Lock()
	b.room.Broadcast()
	b.mu.Unlock()
}

// usage returns the bytes counted and the sessions sharing them.
func (b *byteBudget) usage() (used int64, sessions int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.sessions
}
