package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// EventKind says what a WatchEvent carries.
type EventKind uint8

// Event kinds. The zero value is invalid, so an empty WatchEvent is never
// taken for a snapshot.
const (
	// EventSnapshot is a watch's first event: the complete state under
	// the prefix.
	EventSnapshot EventKind = iota + 1
	// EventUpdate is one committed mutation, in watch_sequence order.
	EventUpdate
	// EventResnapshot replaces the state after the watch could not be
	// followed (Cause says why): replace what you hold.
	EventResnapshot
)

// String returns "snapshot", "update" or "resnapshot".
func (k EventKind) String() string {
	switch k {
	case EventSnapshot:
		return "snapshot"
	case EventUpdate:
		return "update"
	case EventResnapshot:
		return "resnapshot"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// WatchEvent is one thing a Watch delivers.
type WatchEvent struct {
	Kind EventKind
	// Revision is the snapshot's revision, or the update's.
	Revision uint64
	// Entries is, for EventSnapshot and EventResnapshot, the complete
	// state under the prefix at Revision: replace what you hold.
	Entries []statestore.Entry
	// Sequence is an update's watch_sequence (1, 2, 3, ... per snapshot).
	Sequence uint64
	// Update is an update's kind: watch.Put, watch.Delete or watch.Expire.
	Update watch.Kind
	// Key is the key an update changed.
	Key string
	// Entry is the entry a watch.Put wrote.
	Entry *statestore.Entry
	// Cause says why an EventResnapshot replaced the watch: it begins with
	// "sequence gap", "closed <REASON>" (the server closed the watch, for
	// example "closed BUFFER_OVERFLOW: ..."), "disconnected", "invalid
	// update" or "client buffer full".
	Cause string
}

// Watch follows one namespace and key prefix, by the specification's
// rules: a snapshot first, then updates strictly in watch_sequence order,
// and, whenever the stream cannot be followed any more (a sequence gap, a
// closure by the server for any reason, a lost connection), a replacement
// watch whose snapshot is delivered as an EventResnapshot. There is no
// resume token, and nothing of a replaced watch is delivered after its
// replacement's snapshot: updates of it that Next had not returned yet are
// dropped, the snapshot holding their effect. One goroutine calls Next;
// Close may be called from any.
type Watch struct {
	c         *Client
	namespace string
	prefix    string
	wake      chan struct{} // signalled when cur changed or Close was called

	mu     sync.Mutex
	cur    *follow
	first  *WatchEvent // the snapshot, until Next delivers it
	acked  *follow     // the follow of the update Next returned last
	ackSeq uint64      // ... and its sequence, acknowledged by the next Next
	closed bool
	// interrupt cancels a replacement in progress, so Close need not wait
	// for a reconnection.
	interrupt context.CancelFunc
}

// follow is one wire watch of a Watch: the updates the connection's reader
// queued for Next, checked as they arrive.
type follow struct {
	w     *Watch
	id    string
	cn    *conn
	next  uint64 // the watch_sequence expected next
	queue []WatchEvent
	// cause is set once the watch cannot be followed; live says whether
	// the server may still hold it (then it is unwatched on replacement).
	cause string
	live  bool
}

// Watch opens a watch on namespace and prefix ("" watches the whole
// namespace) and returns once its snapshot arrived (Next returns it
// first), or with the server's error: PERMISSION_DENIED, WATCH_TOO_BROAD
// (the snapshot is over the server's bound: narrow the prefix),
// WATCH_LIMIT, INVALID_ARGUMENT. The server lets a watch hold a bounded
// number of unacknowledged updates (32 by default) and closes it past
// that, or when the oldest waits too long (30 s), so call Next promptly;
// a watch closed that way re-snapshots.
func (c *Client) Watch(ctx context.Context, namespace, prefix string) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, &statestore.Error{Code: statestore.Unavailable, Field: "context", Message: err.Error(), Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	w := &Watch{c: c, namespace: namespace, prefix: prefix, wake: make(chan struct{}, 1)}
	f, ev, err := w.open(ctx, EventSnapshot)
	if err != nil {
		return nil, err
	}
	w.cur, w.first = f, &ev
	return w, nil
}

// open registers a new wire watch, waiting for a connection up to ctx,
// and returns it with its snapshot as an event of kind.
func (w *Watch) open(ctx context.Context, kind EventKind) (*follow, WatchEvent, error) {
	for {
		cn, err := w.c.acquire(ctx, nil)
		if err != nil {
			return nil, WatchEvent{}, err
		}
		f := &follow{w: w, id: fmt.Sprintf("kpclient-%d", w.c.watchIDs.Add(1)), cn: cn, next: 1, live: true}
		rctx, cancel := context.WithTimeout(ctx, w.c.cfg.RequestTimeout)
		rep, err := cn.call(rctx, nil, func(id uint64) *pb.ClientMessage {
			return &pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
				RequestId: id, WatchId: f.id, Namespace: w.namespace, KeyPrefix: w.prefix}}}
		}, f, f.id)
		cancel()
		if errors.Is(err, errConnEnded) {
			continue
		}
		var res *pb.StateStoreResult
		if err == nil {
			res, err = rep.result()
			cn.retireOn(err)
		}
		if err != nil {
			return nil, WatchEvent{}, err
		}
		snap := res.GetWatch()
		if snap == nil {
			return nil, WatchEvent{}, unexpected("WatchState", res)
		}
		ev := WatchEvent{Kind: kind, Revision: snap.GetSnapshotRevision(), Entries: make([]statestore.Entry, len(snap.GetEntries()))}
		for i, e := range snap.GetEntries() {
			ev.Entries[i] = wire.StoreEntry(e)
		}
		return f, ev, nil
	}
}

// Next returns the next event, waiting up to ctx. The first is the
// snapshot; then come updates, and an EventResnapshot whenever the watch
// had to be replaced (after a lost connection, once the client has
// reconnected: Next waits for that up to ctx). Calling Next acknowledges
// (WatchStateAck) the update it returned before: the caller has applied
// it. After Close, or Client.Close, it returns ErrClosed. An error
// re-opening a watch (PERMISSION_DENIED once the principal lost access,
// say) is returned, and the next call tries again.
func (w *Watch) Next(ctx context.Context) (WatchEvent, error) {
	w.mu.Lock()
	if w.closed || w.c.isClosed() {
		w.mu.Unlock()
		return WatchEvent{}, ErrClosed
	}
	if ev := w.first; ev != nil {
		w.first = nil
		w.mu.Unlock()
		return *ev, nil
	}
	if f := w.acked; f != nil {
		w.acked = nil
		if f == w.cur && f.cause == "" {
			id, seq := f.id, w.ackSeq
			w.mu.Unlock()
			f.cn.notify(fmt.Sprintf("ack of %s up to %d", id, seq), func(rid uint64) *pb.ClientMessage {
				return &pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{
					RequestId: rid, WatchId: id, AppliedSequence: seq}}}
			})
			w.mu.Lock()
		}
	}
	for {
		f := w.cur
		switch {
		case w.closed:
			w.mu.Unlock()
			return WatchEvent{}, ErrClosed
		case f.cause != "":
			w.mu.Unlock()
			return w.replace(ctx, f)
		case len(f.queue) > 0:
			ev := f.queue[0]
			f.queue[0] = WatchEvent{}
			f.queue = f.queue[1:]
			w.acked, w.ackSeq = f, ev.Sequence
			w.mu.Unlock()
			return ev, nil
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.c.closing:
			return WatchEvent{}, ErrClosed
		case <-ctx.Done():
			return WatchEvent{}, &statestore.Error{Code: statestore.Unavailable, Field: "context", Message: ctx.Err().Error(), Err: ctx.Err()}
		}
		w.mu.Lock()
	}
}

// replace opens the watch that replaces old and returns its snapshot as
// an EventResnapshot. A watch the server may still hold is unwatched first
// (best effort), so its late messages go nowhere.
func (w *Watch) replace(ctx context.Context, old *follow) (WatchEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return WatchEvent{}, ErrClosed
	}
	live, cause := old.live, old.cause
	old.live = false
	w.interrupt = cancel
	w.mu.Unlock()
	if live {
		old.cn.forget(old.id)
	} else {
		old.cn.dropRoute(old.id)
	}
	for {
		f, ev, err := w.open(ctx, EventResnapshot)
		var se *statestore.Error
		switch {
		case w.isClosed() || errors.Is(err, ErrClosed):
			if err == nil {
				f.cn.forget(f.id)
			}
			return WatchEvent{}, ErrClosed
		case errors.As(err, &se) && se.Field == "connection" && ctx.Err() == nil:
			continue // the connection was lost meanwhile; wait for the next
		case err != nil:
			return WatchEvent{}, err
		}
		ev.Cause = cause
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			f.cn.forget(f.id)
			return WatchEvent{}, ErrClosed
		}
		w.cur, w.acked, w.interrupt = f, nil, nil
		w.mu.Unlock()
		return ev, nil
	}
}

// Close unwatches (UnwatchState, best effort: a watch the server already
// closed, or that died with its connection, has nothing to remove) and
// makes Next return ErrClosed. Its error is the server's refusal of the
// unwatch, if any. Close is idempotent.
func (w *Watch) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	f := w.cur
	live := f.live && f.cause == ""
	f.live = false
	if w.interrupt != nil {
		w.interrupt()
	}
	w.mu.Unlock()
	w.signal()
	if !live {
		f.cn.dropRoute(f.id)
		return nil
	}
	f.cn.dropRoute(f.id)
	ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.RequestTimeout)
	defer cancel()
	rep, err := f.cn.call(ctx, nil, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_UnwatchState{UnwatchState: &pb.UnwatchState{RequestId: id, WatchId: f.id}}}
	}, nil, "")
	if err == nil {
		_, err = rep.result()
	}
	switch {
	case err == nil, errors.Is(err, errConnEnded), errors.Is(err, ErrClosed), errors.Is(err, statestore.ErrNotFound):
		return nil // nothing left to remove
	case statestore.CodeOf(err) == statestore.Unavailable:
		return nil // the connection went, and the watch with it
	}
	return fmt.Errorf("client: unwatch %s/%s: %w", w.namespace, w.prefix, err)
}

func (w *Watch) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

func (w *Watch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// fail marks f as no longer followable. Called with w.mu held.
func (f *follow) fail(cause string, live bool) {
	if f.cause != "" {
		return
	}
	f.cause, f.live, f.queue = cause, live, nil
	f.w.signal()
}

// snapshot: the snapshot comes back to open as the WatchState's answer.
func (f *follow) snapshot(uint64, *pb.StateStoreWatchSnapshot) {}

// update queues an update for Next after checking it follows the last
// one: a gap, an update that cannot be applied, or one past the buffer
// ends the watch.
func (f *follow) update(m *pb.StateStoreWatchUpdate) {
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if f.cause != "" {
		return // replaced; its late messages go nowhere
	}
	if m.GetWatchSequence() != f.next {
		f.fail(fmt.Sprintf("sequence gap: watch_sequence %d arrived when %d was due", m.GetWatchSequence(), f.next), true)
		return
	}
	u := wire.StoreUpdate(m, w.namespace)
	switch {
	case u.Kind == 0:
		f.fail(fmt.Sprintf("invalid update: sequence %d has kind %v, unknown to this client", u.Sequence, m.GetKind()), true)
		return
	case u.Kind == watch.Put && u.Entry == nil:
		f.fail(fmt.Sprintf("invalid update: the PUT at sequence %d carries no entry", u.Sequence), true)
		return
	case !strings.HasPrefix(u.Key, w.prefix):
		f.fail(fmt.Sprintf("invalid update: key %q at sequence %d is outside the prefix %q", u.Key, u.Sequence, w.prefix), true)
		return
	case len(f.queue) >= w.c.cfg.WatchBuffer:
		f.fail(fmt.Sprintf("client buffer full: %d updates not yet taken by Next (Config.WatchBuffer)", len(f.queue)), true)
		return
	}
	f.queue = append(f.queue, WatchEvent{Kind: EventUpdate, Revision: u.Revision, Sequence: u.Sequence,
		Update: u.Kind, Key: u.Key, Entry: u.Entry})
	f.next++
	w.signal()
}

// closed: the server ended the watch; only a new one can follow.
func (f *follow) closed(m *pb.StateStoreWatchClosed) {
	reason := m.GetReason().String()
	if r, ok := wire.StoreReason(m.GetReason()); ok {
		reason = r.String()
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.fail(fmt.Sprintf("closed %s: %s", reason, m.GetMessage()), false)
}

// lost: the watch died with its connection.
func (f *follow) lost() {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.fail("disconnected", false)
}
