package attack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

// LivenessBound is how long a bystander's compare-and-set may wait for its
// answer while an attack runs: a liveness bound (an attack must not stall
// other sessions), far above any answer's normal latency, not a speed
// figure.
const LivenessBound = time.Second

// bystanderPace is the pause between a bystander's compare-and-sets: often
// enough that a stall shows at once, rarely enough to leave the attack
// (and the race detector) the cores.
const bystanderPace = 10 * time.Millisecond

// BystanderNamespace and BystanderKey are where the bystander writes.
const (
	BystanderNamespace = "user/" + Bystander
	BystanderKey       = "cas"
)

// Window is what a bystander saw since its last Mark.
type Window struct {
	// Max is the longest wait for an answer, the one still awaited
	// included.
	Max time.Duration
	// Answers counts the compare-and-sets answered.
	Answers int
	// Err is the first failure (a refusal or a lost connection).
	Err error
}

// BystanderSession is an authenticated client of its own principal doing
// compare-and-set on its own key in a loop, through client/ as any remote
// user would, and measuring each answer's wait.
type BystanderSession struct {
	c    *client.Client
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	w       Window
	pending time.Time // when the awaited call was sent; zero between calls
	waiters []waiter
}

type waiter struct {
	at int // the answer count to reach
	ch chan struct{}
}

// StartBystander dials s as Bystander and starts its loop.
func StartBystander(ctx context.Context, s *Server) (*BystanderSession, error) {
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{s.URL}, Token: s.Token(Bystander), RequestTimeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("bystander: %w", err)
	}
	b := &BystanderSession{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b, nil
}

func (b *BystanderSession) run() {
	defer close(b.done)
	expect := statestore.CreateOnly
	tick := time.NewTicker(bystanderPace)
	defer tick.Stop()
	for i := 0; ; i++ {
		b.mu.Lock()
		b.pending = time.Now()
		b.mu.Unlock()
		sent := time.Now()
		e, err := b.c.Put(context.Background(), statestore.PutRequest{Namespace: BystanderNamespace, Key: BystanderKey,
			Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, i), Expect: expect})
		d := time.Since(sent)
		b.mu.Lock()
		b.pending = time.Time{}
		b.w.Max = max(b.w.Max, d)
		if err != nil && b.w.Err == nil {
			b.w.Err = fmt.Errorf("bystander compare-and-set %d: %w", i, err)
		}
		if err == nil {
			expect = statestore.IfRevision(e.Revision)
			b.w.Answers++
		}
		b.wakeLocked()
		b.mu.Unlock()
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

func (b *BystanderSession) wakeLocked() {
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if b.w.Answers >= w.at {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	b.waiters = kept
}

// Mark starts a new window and returns the one it ends.
func (b *BystanderSession) Mark() Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.windowLocked()
	b.w = Window{}
	return w
}

// Window is the current window so far.
func (b *BystanderSession) Window() Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.windowLocked()
}

func (b *BystanderSession) windowLocked() Window {
	w := b.w
	if !b.pending.IsZero() {
		w.Max = max(w.Max, time.Since(b.pending))
	}
	return w
}

// Await waits until n more compare-and-sets have been answered, or
// timeout passed (an error naming how many came).
func (b *BystanderSession) Await(n int, timeout time.Duration) error {
	b.mu.Lock()
	w := waiter{at: b.w.Answers + n, ch: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-time.After(timeout):
		win := b.Window()
		return fmt.Errorf("bystander: %d answers in %v, want %d more (longest wait %v, error %v)", win.Answers, timeout, n, win.Max, win.Err)
	}
}

// Close stops the loop and the client.
func (b *BystanderSession) Close() error {
	close(b.stop)
	<-b.done
	return b.c.Close()
}
