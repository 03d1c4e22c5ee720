package statestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/replica"
)

// A follower's forwarded writes travel to the leader in batches: each
// write joins its leader's queue, and at most fwdInFlight calls per
// leader carry what is queued when they start, so at 127 writers a
// follower makes a call per leader commit round instead of one (and a
// peer connection) per write. A write alone in its queue goes alone, in
// the single form, as before. Each write keeps its own answer, error and
// compare-and-set outcome: the leader serves a batch's writes each as if
// it came alone (clusterNode.handleBatch).
const (
	fwdInFlight = 2
	// fwdBatchWrites and fwdBatchBytes bound one call: the leader runs a
	// batch's writes at once, and a call stays far below MaxMessage.
	fwdBatchWrites = 256
	fwdBatchBytes  = 4 << 20
	// fwdCallTimeout bounds a batch call, which no one write's context
	// may end: a call it ends leaves its writes' outcomes unknown.
	fwdCallTimeout = 10 * time.Second
)

// forwarder is a follower's queues of writes to forward, by leader ID.
type forwarder struct {
	mu     sync.Mutex
	queues map[string]*fwdQueue
	// calls and writes count the calls that carried writes and the
	// writes they carried: writes/calls is the batching achieved.
	calls, writes atomic.Uint64
}

// fwdQueue is the writes waiting for a call to one leader, how many are
// in calls not yet answered, and how many goroutines send them.
type fwdQueue struct {
	waiting []*fwdWaiter
	calling int
	senders int
}

// The states of a fwdWaiter, under forwarder.mu.
const (
	fwdQueued = iota
	fwdTaken
	fwdAbandoned
)

// fwdWaiter is one forwarded write: its request's binary form and, once
// done is closed, forward's results.
type fwdWaiter struct {
	body  []byte
	state int
	done  chan struct{}
	resp  fwdResponse
	sent  bool
	err   error
}

// forwardWrite is forward for a put or a delete, through id's queue:
// the same answer, the same sent (a write its context ended before a
// call took it was not sent; one ended after is an unknown outcome).
func (c *clusterNode) forwardWrite(ctx context.Context, id string, req *fwdRequest) (fwdResponse, bool, error) {
	w := &fwdWaiter{body: encodeForward(req), done: make(chan struct{})}
	f := &c.fwd
	f.mu.Lock()
	if f.queues == nil {
		f.queues = map[string]*fwdQueue{}
	}
	q := f.queues[id]
	if q == nil {
		q = &fwdQueue{}
		f.queues[id] = q
	}
	q.waiting = append(q.waiting, w)
	if q.senders < fwdInFlight {
		q.senders++
		go c.sendForwarded(id, q)
	}
	f.mu.Unlock()
	select {
	case <-w.done:
		return w.resp, w.sent, w.err
	case <-ctx.Done():
	}
	f.mu.Lock()
	taken := w.state == fwdTaken
	if !taken {
		w.state = fwdAbandoned
	}
	f.mu.Unlock()
	if !taken {
		return fwdResponse{}, false, wrapErr(Unavailable, "context", ctx.Err())
	}
	select {
	case <-w.done:
		return w.resp, w.sent, w.err
	default:
	}
	return fwdResponse{}, true, &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the call forwarded to the leader %q was left after it was sent: the outcome is unknown (%v)", id, ctx.Err()), Err: ctx.Err()}
}

// sendForwarded sends q's writes to id, a batch per call, until q is
// empty.
func (c *clusterNode) sendForwarded(id string, q *fwdQueue) {
	for {
		c.fwd.mu.Lock()
		batch := q.take()
		if len(batch) == 0 {
			q.senders--
			c.fwd.mu.Unlock()
			return
		}
		q.calling += len(batch)
		c.fwd.mu.Unlock()
		c.fwd.calls.Add(1)
		c.fwd.writes.Add(uint64(len(batch)))
		c.callForwarded(id, batch)
		c.fwd.mu.Lock()
		q.calling -= len(batch)
		c.fwd.mu.Unlock()
		for _, w := range batch {
			close(w.done)
		}
	}
}

// take removes from q and returns the next batch: the writes queued
// first, within fwdBatchWrites and fwdBatchBytes (at least one), none
// abandoned. The caller holds forwarder.mu.
func (q *fwdQueue) take() []*fwdWaiter {
	var batch []*fwdWaiter
	bytes, i := 0, 0
	for ; i < len(q.waiting); i++ {
		w := q.waiting[i]
		if w.state == fwdAbandoned {
			continue
		}
		if len(batch) > 0 && (len(batch) == fwdBatchWrites || bytes+len(w.body) > fwdBatchBytes) {
			break
		}
		w.state = fwdTaken
		batch = append(batch, w)
		bytes += len(w.body)
	}
	n := copy(q.waiting, q.waiting[i:])
	clear(q.waiting[n:])
	q.waiting = q.waiting[:n]
	return batch
}

// callForwarded makes one call to id for batch and sets each write's
// results: a write alone goes in the single form; a failure before the
// call was sent leaves every write not sent, one after leaves every
// outcome unknown.
func (c *clusterNode) callForwarded(id string, batch []*fwdWaiter) {
	ctx, cancel := context.WithTimeout(context.Background(), fwdCallTimeout)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-stop:
		}
	}()
	if len(batch) == 1 {
		w := batch[0]
		w.resp, w.sent, w.err = c.forwardBody(ctx, id, verbPut, w.body)
		return
	}
	bodies := make([][]byte, len(batch))
	for i, w := range batch {
		bodies[i] = w.body
	}
	setAll := func(sent bool, err error) {
		for _, w := range batch {
			w.sent, w.err = sent, err
		}
	}
	out, sent, err := c.callLeader(ctx, id, verbPut, encodeBatch(bodies))
	if err != nil {
		setAll(sent, err)
		return
	}
	answers, err := decodeBatch("answer", out)
	if err == nil && len(answers) != len(batch) {
		err = fmt.Errorf("%d answers to %d writes", len(answers), len(batch))
	}
	if err != nil {
		setAll(true, &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the leader %q answered a batch with what does not decode: the outcome is unknown (%v)", id, err), Err: err})
		return
	}
	for i, w := range batch {
		w.sent = true
		if w.resp, err = decodeAnswer(answers[i]); err != nil {
			w.err = &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the leader %q answered write %d of a batch with what does not decode: the outcome is unknown (%v)", id, i, err), Err: err}
		}
	}
}

// callLeader sends body to the leader id's RPC address. sent reports
// whether it may have reached the leader: a failure after that leaves the
// outcome unknown (a read index's failure is never unknown: it applied
// nothing).
func (c *clusterNode) callLeader(ctx context.Context, id, verb string, body []byte) (out []byte, sent bool, err error) {
	c.rpcMu.Lock()
	addr, ok := c.rpcs[id]
	c.rpcMu.Unlock()
	if !ok {
		return nil, false, newErr(Unavailable, "leader", "the leader %q has no known RPC address", id)
	}
	out, err = c.caller.Call(ctx, addr, body)
	if err != nil {
		var ne *replica.NotSentError
		if errors.As(err, &ne) || errors.Is(err, replica.ErrNoPeer) {
			return nil, false, wrapErr(Unavailable, "leader", err)
		}
		if verb == verbReadIndex {
			return nil, false, wrapErr(Unavailable, "leader", err)
		}
		return nil, true, &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the call forwarded to the leader %q failed after it was sent: the outcome is unknown (%v)", id, err), Err: err}
	}
	return out, true, nil
}
