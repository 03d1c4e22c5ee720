package statestore

import (
	"context"
	"errors"
	"sync"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

// Watches. A Session stands for one authenticated control channel: one
// principal and one ordered outbound Sink that the embedder supplies.
// Watch registers a watch and captures its snapshot at one point in the
// commit order (under the commit-order lock that publishing a batch also
// takes), so every committed mutation after the snapshot reaches the watch
// exactly once, in order, and none before it does. The snapshot itself is
// the first message delivered through the sink for that watch.

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

// Close ends the session (a disconnect): its watches are removed and
// nothing more is delivered to its sink. On a closed store it only forgets
// the session (Close already ended its watches); it never touches a file.
func (ss *Session) Close() {
	ss.s.sessMu.Lock()
	delete(ss.s.sessions, ss)
	ss.s.sessMu.Unlock()
	ss.reg.Close()
}

// Done is closed when the session's delivery goroutine has stopped: after
// Close, no Deliver call is running or will run.
func (ss *Session) Done() <-chan struct{} { return ss.reg.Done() }

// OpenSession opens a session for p delivering through sink. Sink.Deliver
// is called from one goroutine per session, in order.
func (s *Store) OpenSession(p Principal, sink watch.Sink) (*Session, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, newErr(InvalidArgument, "sink", "a session needs a sink")
	}
	ss := &Session{s: s, reg: s.watches.OpenSession(p.ID, sink), p: p}
	s.sessMu.Lock()
	s.sessions[ss] = struct{}{}
	s.sessMu.Unlock()
	return ss, nil
}

// WatchRequest is a WatchState.
type WatchRequest struct {
	RequestID uint64 // echoed in the snapshot message
	WatchID   string // unique within the session
	Namespace string
	KeyPrefix string // "" watches the whole namespace
}

// WatchResult is the StateStoreResult of a WatchState: the complete
// snapshot as it stood at SnapshotRevision. The same snapshot is also the
// first message delivered to the session's sink for this watch.
type WatchResult struct {
	SnapshotRevision uint64
	Entries          []Entry
}

// Watch atomically registers a watch and captures every matching entry.
// Leases already due are expired (journaled) first, so a snapshot never
// holds an expired entry. A snapshot over the entry bound, or whose answer
// (the whole encoded ServerMessage, see wiresize.go) is over the byte
// bound, is WATCH_TOO_BROAD and registers nothing.
func (s *Store) Watch(ctx context.Context, ss *Session, req WatchRequest) (_ WatchResult, err error) {
	defer func() { s.metrics.watched(err) }()
	if err := s.checkOpen(); err != nil {
		return WatchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return WatchResult{}, wrapErr(Unavailable, "context", err)
	}
	if err := checkWatchID(req.WatchID, s.limits.MaxKeyBytes); err != nil {
		return WatchResult{}, err
	}
	if err := checkNamespace(req.Namespace, s.limits.MaxNamespaceBytes); err != nil {
		return WatchResult{}, err
	}
	if err := checkPrefix(req.KeyPrefix, s.limits.MaxKeyBytes); err != nil {
		return WatchResult{}, err
	}
	if err := authorize(ss.Principal(), req.Namespace, accessRead); err != nil {
		return WatchResult{}, err
	}
	if s.isSettings(req.Namespace) {
		return s.watchSettings(ss, req)
	}
	for {
		s.pubMu.Lock()
		v := s.view.Load()
		snap, due := s.capture(v, req, s.clock.Now().UnixMilli())
		if due {
			// Commit the lapsed leases' EXPIREs, then capture again.
			s.pubMu.Unlock()
			if _, err := s.submit(&op{kind: opExpire}); err != nil {
				return WatchResult{}, err
			}
			continue
		}
		res, err := s.register(ss, req, v.Namespace(req.Namespace).Revision, snap)
		s.pubMu.Unlock()
		return res, err
	}
}

// snapshot is what capture collected: the matching entries and their
// running bound.
type snapshot struct {
	entries []*Entry
	bound   snapshotBound
}

// capture collects the entries of v that req matches, measuring them
// against the snapshot bounds as it goes (it stops once one is broken). It
// stops at a lease due at now (inclusive; 0 means none is ever due) and
// reports it, so the caller commits its EXPIRE first.
func (s *Store) capture(v *materialize.View, req WatchRequest, now int64) (snap snapshot, due bool) {
	snap.bound = snapshotBound{maxEntries: s.limits.MaxSnapshotEntries, maxBytes: s.limits.MaxSnapshotBytes}
	v.Ascend(req.Namespace, req.KeyPrefix, func(e *Entry) bool {
		if now != 0 && e.ExpiresMs != 0 && now >= e.ExpiresMs {
			due = true
			return false
		}
		snap.entries = append(snap.entries, e)
		return snap.bound.add(e)
	})
	return snap, due
}

// register checks the captured snapshot against its bounds at snapshot
// revision rev (WATCH_TOO_BROAD registers nothing) and adds the watch. The
// caller holds the lock that orders the snapshot against commits to its
// namespace.
func (s *Store) register(ss *Session, req WatchRequest, rev uint64, snap snapshot) (WatchResult, error) {
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

// Unwatch removes a watch (UnwatchState).
func (s *Store) Unwatch(ss *Session, watchID string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := s.watches.Remove(ss.reg, watchID); err != nil {
		return watchErr(err, watchID)
	}
	return nil
}

// Ack acknowledges the highest contiguously applied watch_sequence
// (WatchStateAck), freeing buffer. A sequence never sent is
// INVALID_ARGUMENT; an older one is harmless.
func (s *Store) Ack(ss *Session, watchID string, applied uint64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := s.watches.Ack(ss.reg, watchID, applied); err != nil {
		return watchErr(err, watchID)
	}
	return nil
}

// SetPrincipal changes the principal of every session authenticated as id
// (the embedder revoked admin rights, say) and closes, with
// AUTHORIZATION_LOST, each of their watches the new principal may no
// longer read. revoked = true removes all rights (the principal is gone).
// It returns how many watches it closed. It cannot fail while the store is
// open, so it keeps its one result: once Close has begun there is no watch
// left to close (Close ended them all with STORE_CLOSED), and it changes
// nothing and returns 0.
func (s *Store) SetPrincipal(id string, p Principal, revoked bool) int {
	if s.shut.Load() {
		return 0
	}
	s.sessMu.Lock()
	for ss := range s.sessions {
		ss.mu.Lock()
		if ss.p.ID == id {
			if revoked {
				ss.p = Principal{}
			} else {
				ss.p = p
			}
		}
		ss.mu.Unlock()
	}
	s.sessMu.Unlock()
	np := p
	if revoked {
		np = Principal{}
	}
	return s.watches.CloseWhere(watch.AuthorizationLost, func(principalID, namespace string) bool {
		return principalID == id && authorize(np, namespace, accessRead) != nil
	})
}

// events turns a committed batch's records into watch events.
func (b *batch) events() []watch.Event {
	ev := make([]watch.Event, len(b.recs))
	for i, r := range b.recs {
		ev[i] = watch.Event{Revision: r.Revision, Namespace: r.Namespace, Key: r.Key}
		switch r.Kind {
		case journal.KindPut:
			ev[i].Kind = watch.Put
			ev[i].Entry = b.entries[i]
		case journal.KindDelete:
			ev[i].Kind = watch.Delete
		case journal.KindExpire:
			ev[i].Kind = watch.Expire
		}
	}
	return ev
}
