package statestore

import (
	"errors"
	"sync"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/wiresize"
)

// Watches. A Session stands for one authenticated control channel: one
// principal and one ordered outbound Sink that the embedder supplies.
// Store.Watch registers a watch and captures its snapshot at one point in
// the commit order of the namespace's home (backend.atCommitPoint: the
// journal's commit-order lock, or the configuration lock), so every
// committed mutation after the snapshot reaches the watch exactly once, in
// order, and none before it does. The snapshot itself is the first message
// delivered through the sink for that watch.

// Session is one authenticated control channel holding watches.
type Session struct {
	s   *Store
	reg *watch.Session
	mu  sync.Mutex
	p   Principal
}

// Principal returns the session's current principal.
func (ss *Session) Principal() Principal {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.p
}

// Watches returns the number of the session's open watches: a session
// server uses it to tell an idle session from one that only listens.
func (ss *Session) Watches() int { return ss.reg.Len() }

// Close ends the session (a disconnect): its watches are removed and
// nothing more is delivered to its sink. On a closed store it only forgets
// the session (Close already ended its watches); it never touches a file.
func (ss *Session) Close() {
	ss.s.sessions.remove(ss)
	ss.reg.Close()
}

// Drain hands the sink everything queued for the session, such as the
// AUTHORIZATION_LOST closures of a Store.SetPrincipal that just returned,
// then stops delivering; Close still ends the session. An embedder ending
// a session on purpose calls it first, so the client learns why its
// watches went before the channel closes. It waits for the sink, so it
// must not be called from Deliver.
func (ss *Session) Drain() { ss.reg.Drain() }

// Done is closed when the session's delivery goroutine has stopped: after
// Close, no Deliver call is running or will run.
func (ss *Session) Done() <-chan struct{} { return ss.reg.Done() }

// setPrincipal replaces the session's principal if it is authenticated as
// id.
func (ss *Session) setPrincipal(id string, p Principal) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.p.ID == id {
		ss.p = p
	}
}

// register checks the captured snapshot against its bounds at snapshot
// revision rev (WATCH_TOO_BROAD registers nothing) and adds the watch. The
// caller is at its home's commit point.
func (ss *Session) register(req WatchRequest, rev uint64, snap snapshot) (WatchResult, error) {
	s := ss.s
	if err := snap.bound.check(req, rev); err != nil {
		return WatchResult{}, err
	}
	if err := s.watches.Add(ss.reg, req.RequestID, req.WatchID, req.Namespace, req.KeyPrefix, rev, snap.entries); err != nil {
		return WatchResult{}, watchErr(err, req.WatchID)
	}
	res := WatchResult{SnapshotRevision: rev, Entries: make([]Entry, len(snap.entries))}
	for i, e := range snap.entries {
		res.Entries[i] = copyEntry(e)
	}
	s.metrics.snapEntries.Observe(int64(len(snap.entries)))
	s.metrics.snapBytes.Observe(int64(snap.bound.size.Total(req.RequestID, req.WatchID, rev)))
	return res, nil
}

// sessionSet is the store's open sessions, so a principal's rights can
// change on all of its sessions at once.
type sessionSet struct {
	mu sync.Mutex
	m  map[*Session]struct{}
}

func (set *sessionSet) add(ss *Session) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.m == nil {
		set.m = map[*Session]struct{}{}
	}
	set.m[ss] = struct{}{}
}

func (set *sessionSet) remove(ss *Session) {
	set.mu.Lock()
	defer set.mu.Unlock()
	delete(set.m, ss)
}

// each calls fn for every open session.
func (set *sessionSet) each(fn func(*Session)) {
	set.mu.Lock()
	defer set.mu.Unlock()
	for ss := range set.m {
		fn(ss)
	}
}

// snapshot is what capture collected: the matching entries and their
// running bound.
type snapshot struct {
	entries []*Entry
	bound   snapshotBound
}

// capture collects the entries of v that req matches, measuring them
// against the snapshot bounds of l as it goes (it stops once one is
// broken). It stops at a lease due at now (inclusive) and reports it, so
// the caller commits its EXPIRE first.
func capture(v *materialize.View, req WatchRequest, l quota.Limits, now int64) (snap snapshot, due bool) {
	snap.bound = snapshotBound{maxEntries: l.MaxSnapshotEntries, maxBytes: l.MaxSnapshotBytes}
	v.Ascend(req.Namespace, req.KeyPrefix, func(e *Entry) bool {
		if e.ExpiresMs != 0 && now >= e.ExpiresMs {
			due = true
			return false
		}
		snap.entries = append(snap.entries, e)
		return snap.bound.add(e)
	})
	return snap, due
}

// snapshotBound applies the watch snapshot bounds (Limits) while a
// snapshot is captured: at most MaxSnapshotEntries entries, and an answer
// (the whole encoded ServerMessage carrying StateStoreResult.watch) of at
// most MaxSnapshotBytes bytes, measured exactly by package wiresize.
type snapshotBound struct {
	maxEntries, maxBytes int
	n                    int
	size                 wiresize.SnapshotSize
}

// add counts e and reports whether capturing should go on: it stops as soon
// as a bound is already broken, since more entries only grow the answer.
func (b *snapshotBound) add(e *materialize.Entry) bool {
	b.n++
	b.size.Add(e)
	return b.n <= b.maxEntries && b.size.Entries() <= b.maxBytes
}

// check returns WATCH_TOO_BROAD naming the bound the answer to req at
// snapshot revision rev breaks, or nil.
func (b *snapshotBound) check(req WatchRequest, rev uint64) error {
	if b.n > b.maxEntries {
		return newErr(WatchTooBroad, "watch snapshot entries", "more than %d entries match namespace %q prefix %q; narrow the prefix", b.maxEntries, req.Namespace, req.KeyPrefix)
	}
	if size := b.size.Total(req.RequestID, req.WatchID, rev); size > b.maxBytes {
		return newErr(WatchTooBroad, "watch snapshot bytes", "the snapshot answer for namespace %q prefix %q encodes to %d bytes, over the %d-byte bound; narrow the prefix", req.Namespace, req.KeyPrefix, size, b.maxBytes)
	}
	return nil
}

func watchErr(err error, id string) error {
	var le *watch.LimitError
	switch {
	case errors.As(err, &le):
		return wrapErr(WatchLimit, le.Bound, err)
	case errors.Is(err, watch.ErrDuplicateWatch):
		return wrapErr(InvalidArgument, "watch_id", err)
	case errors.Is(err, watch.ErrUnknownWatch):
		return wrapErr(NotFound, "watch_id", err)
	case errors.Is(err, watch.ErrInvalidSequence):
		return wrapErr(InvalidArgument, "applied_sequence", err)
	case errors.Is(err, watch.ErrSessionClosed), errors.Is(err, watch.ErrStopped):
		return wrapErr(Unavailable, "session", err)
	}
	return wrapErr(Unavailable, "watch", err)
}
