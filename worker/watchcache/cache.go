// Package watchcache is the client side of a state-store watch: a local
// copy of the entries under one (namespace, key prefix), kept current from
// a snapshot and the updates that follow it, like a Kubernetes informer. It
// is independent of the transport: the embedder supplies a Source (the
// WatchState, UnwatchState and WatchStateAck calls) and routes incoming
// messages for the cache's watch to Handle.
//
// # Invariants
//
// The rules of the specification's "Watches without a snapshot gap".
//
//  1. The cache is installed from a snapshot first and then applies an
//     update only when its watch_sequence is exactly one above the highest
//     applied, acknowledging each one after applying it.
//     Code: Cache.Start, Cache.resnapshot, Cache.Handle, Cache.apply.
//     Tests: TestStartInstallsSnapshot, TestAppliesInOrderAndAcks, TestWithRegistry.
//  2. A revision skip without a sequence skip is harmless: the namespace
//     revision also counts keys outside the prefix.
//     Code: Cache.valid, Cache.Handle.
//     Tests: TestRevisionSkipIsHarmless.
//  3. A sequence gap, a Closed message (whatever its reason: UNAVAILABLE,
//     from a cluster node that lost its leader, as much as BUFFER_OVERFLOW
//     or RESTORED), a rejected update (a key outside the prefix, another
//     namespace, a PUT without its entry, a revision that does not
//     increase, a DELETE or EXPIRE of a key the cache lacks), or an
//     explicit Resync means the local copy can no longer be trusted
//     to follow the server, so the cache re-snapshots: it unwatches the old
//     watch (best effort), watches again under a new watch id, and replaces
//     its keys only once the new snapshot is installed. Until then readers
//     keep seeing the last consistent state. There is no resume token: the
//     cache never invents state it did not receive.
//     Code: Cache.Handle, Cache.valid, Cache.resnapshot, Cache.checkSnapshot, Cache.Resync.
//     Tests: TestSequenceGapResnapshots, TestRepeatedSequenceResnapshots, TestClosedResnapshots,
//     TestRejectedUpdateResnapshots, TestResync, TestFailedResnapshotKeepsState, TestInvalidSnapshotRejected.
//  4. Messages for any watch id other than the current one (late updates
//     of a replaced watch) are ignored, so an old stream can never touch
//     the new state.
//     Code: Cache.Handle, Cache.currentWatch.
//     Tests: TestSequenceGapResnapshots, TestClosedResnapshots, TestDisconnected.
//
// # Concurrency
//
// Reads (Get, Keys, Revision, ...) never wait for the Source.
// Start, Handle, Resync, Disconnected and Close are serialized with each
// other and call the Source synchronously, so the embedder must not call
// Handle from the goroutine that completes Source calls (typically the
// control channel's reader): hand incoming messages to Handle through a
// queue or another goroutine, or a re-snapshot triggered inside Handle
// would wait for a reply that goroutine can no longer read.
package watchcache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

// Source is the cache's view of the state store's watch protocol, supplied
// by the embedder.
type Source interface {
	// Watch registers a watch (WatchState) and returns its snapshot;
	// updates for it then arrive through the cache's Handle method (the
	// embedder routes incoming messages for this watch to Handle).
	Watch(watchID, namespace, prefix string) (snapshotRevision uint64, entries []*materialize.Entry, err error)
	// Unwatch removes a watch (UnwatchState).
	Unwatch(watchID string) error
	// Ack acknowledges the highest contiguously applied sequence
	// (WatchStateAck).
	Ack(watchID string, applied uint64) error
}

var (
	// ErrClosed is returned by calls on a cache after Close.
	ErrClosed = errors.New("watchcache: cache closed")
	// ErrAck wraps a failed Source.Ack returned by Handle. The update it
	// acknowledged is applied and the cache is consistent; the usual cause
	// is that the server already closed the watch (its Closed message is
	// on the way and will trigger a re-snapshot), so embedders typically
	// log it and go on.
	ErrAck = errors.New("watchcache: ack failed")
)

// Option configures New.
type Option func(*Cache)

// WithWatchID sets the base of the watch ids the cache uses: base-1,
// base-2, ... (a new one per snapshot, so a late message of a replaced
// watch can never be mistaken for the current one). Watch ids must be
// unique within a session, so caches sharing a control channel need
// distinct bases. The default is "watchcache-<n>", n unique in the process.
func WithWatchID(base string) Option { return func(c *Cache) { c.base = base } }

var instances atomic.Uint64

type state uint8

const (
	stateNew    state = iota // never started
	stateLive                // following watchID
	stateStale               // needs a snapshot: disconnected, or a re-snapshot failed
	stateClosed              // Close was called
)

// Cache is a local copy of the entries under one namespace and key prefix.
// All methods are safe for concurrent use.
type Cache struct {
	src       Source
	namespace string
	prefix    string
	base      string

	// op serializes Start, Handle, Resync, Disconnected and Close, and with
	// them every Source call, so sequence checks and re-snapshots never
	// interleave.
	op    sync.Mutex
	state state // guarded by op
	gen   uint64

	// mu guards what readers see. It is held only for in-memory work,
	// never across a Source call.
	mu          sync.RWMutex
	entries     map[string]*materialize.Entry
	revision    uint64
	watchID     string
	applied     uint64
	snapshots   int
	resnapshots int
}

// New returns a cache for (namespace, prefix) fed by src. It does nothing
// until Start.
func New(src Source, namespace, prefix string, opts ...Option) *Cache {
	c := &Cache{src: src, namespace: namespace, prefix: prefix, entries: map[string]*materialize.Entry{}}
	for _, o := range opts {
		o(c)
	}
	if c.base == "" {
		c.base = fmt.Sprintf("watchcache-%d", instances.Add(1))
	}
	return c
}

// Start installs the first snapshot. After Disconnected, or after a failed
// re-snapshot, it takes a fresh one. On a cache that is already following
// its watch it does nothing.
func (c *Cache) Start() error {
	c.op.Lock()
	defer c.op.Unlock()
	switch c.state {
	case stateClosed:
		return ErrClosed
	case stateLive:
		return nil
	}
	return c.resnapshot()
}

// Resync forces a re-snapshot, for example when the embedder detected
// local corruption. It works in any state but closed.
func (c *Cache) Resync() error {
	c.op.Lock()
	defer c.op.Unlock()
	if c.state == stateClosed {
		return ErrClosed
	}
	return c.resnapshot()
}

// Disconnected tells the cache its control channel was lost. The server
// removed the watch with the session, so nothing is unwatched; the cache
// keeps serving its last state, ignores every message until then, and
// re-snapshots under a new watch id when Start or Resync is called (on the
// new channel). It returns ErrClosed after Close, else nil.
func (c *Cache) Disconnected() error {
	c.op.Lock()
	defer c.op.Unlock()
	if c.state == stateClosed {
		return ErrClosed
	}
	if c.state == stateLive {
		c.state = stateStale
		c.setWatch("")
	}
	return nil
}

// Close unwatches (best effort; its error is returned) and stops the
// cache: later messages are ignored, and Start, Resync and Disconnected
// return ErrClosed. The last state stays readable. Close is idempotent.
func (c *Cache) Close() error {
	c.op.Lock()
	defer c.op.Unlock()
	if c.state == stateClosed {
		return nil
	}
	var err error
	if c.state == stateLive {
		err = c.src.Unwatch(c.currentWatch())
	}
	c.state = stateClosed
	c.setWatch("")
	return err
}

// Handle processes one message the embedder received for this cache.
//   - *watch.Update for the current watch with Sequence == applied+1 that
//     passes validation: applied, then acknowledged. A failed Ack is
//     returned wrapped in ErrAck; the update stays applied (if acks keep
//     failing, the server closes the watch, which leads to a re-snapshot).
//   - any other sequence (a gap, or a repeat, which an ordered channel
//     never produces), a rejected update, or a *watch.Closed for the
//     current watch: re-snapshot. Handle returns nil if the new snapshot
//     was installed, else the error (the cache is then stale until Start
//     or Resync succeeds).
//   - a *watch.Snapshot (the snapshot already came back from
//     Source.Watch), any message for another watch id, and every message
//     while the cache is not following a watch (not started, disconnected,
//     stale, closed): ignored, nil.
func (c *Cache) Handle(m watch.Message) error {
	c.op.Lock()
	defer c.op.Unlock()
	if c.state != stateLive {
		return nil
	}
	id := c.currentWatch()
	switch m := m.(type) {
	case *watch.Update:
		if m == nil || m.WatchID != id {
			return nil
		}
		if m.Sequence != c.applied+1 {
			return c.resnapshot()
		}
		if !c.valid(m) {
			return c.resnapshot()
		}
		c.apply(m)
		if err := c.src.Ack(id, m.Sequence); err != nil {
			return fmt.Errorf("%w: watch %q sequence %d: %w", ErrAck, id, m.Sequence, err)
		}
		return nil
	case *watch.Closed:
		if m == nil || m.WatchID != id {
			return nil
		}
		return c.resnapshot()
	}
	return nil
}

// valid reports whether u can be applied to the current state; a false
// answer means the stream and the cache disagree, so only a new snapshot
// can be trusted. Called with op held (the fields it reads change only
// under op).
func (c *Cache) valid(u *watch.Update) bool {
	if u.Namespace != c.namespace || !strings.HasPrefix(u.Key, c.prefix) || u.Revision <= c.revision {
		return false
	}
	switch u.Kind {
	case watch.Put:
		e := u.Entry
		return e != nil && e.Namespace == u.Namespace && e.Key == u.Key && e.Revision == u.Revision
	case watch.Delete, watch.Expire:
		_, ok := c.entries[u.Key]
		return ok
	}
	return false
}

func (c *Cache) apply(u *watch.Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.Kind == watch.Put {
		c.entries[u.Key] = u.Entry
	} else {
		delete(c.entries, u.Key)
	}
	c.revision = u.Revision
	c.applied = u.Sequence
}

// resnapshot replaces the watch: unwatch the old one if it is live (best
// effort: a closed or lost watch has nothing to remove), watch under a new
// id, validate, and only then swap the entries in. Called with op held.
func (c *Cache) resnapshot() error {
	if c.state == stateLive {
		_ = c.src.Unwatch(c.currentWatch())
	}
	// From here until a snapshot is installed the cache follows nothing:
	// messages of the old watch are ignored and readers keep the old state.
	c.state = stateStale
	c.setWatch("")
	c.gen++
	id := fmt.Sprintf("%s-%d", c.base, c.gen)
	rev, entries, err := c.src.Watch(id, c.namespace, c.prefix)
	if err != nil {
		return fmt.Errorf("watchcache: watch %q on %q prefix %q: %w", id, c.namespace, c.prefix, err)
	}
	m, err := c.checkSnapshot(rev, entries)
	if err != nil {
		_ = c.src.Unwatch(id)
		return fmt.Errorf("watchcache: snapshot of watch %q rejected: %w", id, err)
	}
	c.mu.Lock()
	c.entries, c.revision, c.watchID, c.applied = m, rev, id, 0
	c.snapshots++
	if c.snapshots > 1 {
		c.resnapshots++
	}
	c.mu.Unlock()
	c.state = stateLive
	return nil
}

// checkSnapshot builds the entry map, refusing a snapshot that could not
// be the state under (namespace, prefix) at rev.
func (c *Cache) checkSnapshot(rev uint64, entries []*materialize.Entry) (map[string]*materialize.Entry, error) {
	m := make(map[string]*materialize.Entry, len(entries))
	for _, e := range entries {
		switch {
		case e == nil:
			return nil, errors.New("nil entry")
		case e.Namespace != c.namespace || !strings.HasPrefix(e.Key, c.prefix):
			return nil, fmt.Errorf("entry %q in namespace %q is outside the watch", e.Key, e.Namespace)
		case e.Revision > rev:
			return nil, fmt.Errorf("entry %q has revision %d after the snapshot revision %d", e.Key, e.Revision, rev)
		case m[e.Key] != nil:
			return nil, fmt.Errorf("entry %q appears twice", e.Key)
		}
		m[e.Key] = e
	}
	return m, nil
}

func (c *Cache) setWatch(id string) {
	c.mu.Lock()
	c.watchID = id
	c.mu.Unlock()
}

func (c *Cache) currentWatch() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.watchID
}

// Get returns the cached entry at key. Entries are shared and must not be
// modified.
func (c *Cache) Get(key string) (*materialize.Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[key]
	return e, ok
}

// Keys returns the cached keys in order.
func (c *Cache) Keys() []string {
	c.mu.RLock()
	keys := make([]string, 0, len(c.entries))
	for k := range c.entries {
		keys = append(keys, k)
	}
	c.mu.RUnlock()
	slices.Sort(keys)
	return keys
}

// Revision returns the namespace revision the cached state reflects: the
// snapshot revision, or the revision of the last applied update.
func (c *Cache) Revision() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.revision
}

// WatchID returns the id of the watch the cache follows, or "" when it
// follows none (not started, disconnected, closed, or a re-snapshot
// failed).
func (c *Cache) WatchID() string { return c.currentWatch() }

// Applied returns the highest watch_sequence applied since the current
// snapshot.
func (c *Cache) Applied() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.applied
}

// Synced reports whether the cache follows a live watch. When false, the
// cached state is the last consistent one and may be stale.
func (c *Cache) Synced() bool { return c.WatchID() != "" }

// Resnapshots returns how many snapshots were installed after the first.
func (c *Cache) Resnapshots() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.resnapshots
}
