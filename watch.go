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
// nothing more is delivered to its sink.
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
	if sink == nil {
		return nil, newErr(InvalidArgument, "sink", "a session needs a sink")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, newErr(Unavailable, "store", "the store is closed")
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

// entryWireBytes estimates an entry's encoded size in a snapshot response:
// its strings and document plus the fixed-size fields and framing.
func entryWireBytes(e *Entry) int {
	const fixed = 64 // revision, three timestamps, field tags and lengths
	return fixed + len(e.Namespace) + len(e.Key) + len(e.Schema) + len(e.Owner) + len(e.Document)
}

// Watch atomically registers a watch and captures every matching entry.
// Leases already due are expired (journaled) first, so a snapshot never
// holds an expired entry. A snapshot over the entry or byte bound is
// WATCH_TOO_BROAD and registers nothing.
func (s *Store) Watch(ctx context.Context, ss *Session, req WatchRequest) (WatchResult, error) {
	if err := ctx.Err(); err != nil {
		return WatchResult{}, &Error{Code: Unavailable, Field: "context", Message: err.Error(), Err: err}
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
		entries, due, err := s.capture(v, req, s.clock.Now().UnixMilli())
		if due {
			// Commit the lapsed leases' EXPIREs, then capture again.
			s.pubMu.Unlock()
			if _, err := s.submit(&op{kind: opExpire}); err != nil {
				return WatchResult{}, err
			}
			continue
		}
		if err != nil {
			s.pubMu.Unlock()
			return WatchResult{}, err
		}
		res, err := s.register(ss, req, v.Namespace(req.Namespace).Revision, entries)
		s.pubMu.Unlock()
		return res, err
	}
}

// capture collects the entries of v that req matches, within the snapshot
// bounds (WATCH_TOO_BROAD beyond them). It stops at a lease due at now
// (inclusive) and reports it, so the caller commits its EXPIRE first.
func (s *Store) capture(v *materialize.View, req WatchRequest, now int64) (entries []*Entry, due bool, err error) {
	size := 0
	v.Ascend(req.Namespace, req.KeyPrefix, func(e *Entry) bool {
		if e.ExpiresMs != 0 && now >= e.ExpiresMs {
			due = true
			return false
		}
		entries = append(entries, e)
		size += entryWireBytes(e)
		return len(entries) <= s.limits.MaxSnapshotEntries && size <= s.limits.MaxSnapshotBytes
	})
	switch {
	case due:
		return nil, true, nil
	case len(entries) > s.limits.MaxSnapshotEntries:
		return nil, false, newErr(WatchTooBroad, "watch snapshot entries", "more than %d entries match namespace %q prefix %q; narrow the prefix", s.limits.MaxSnapshotEntries, req.Namespace, req.KeyPrefix)
	case size > s.limits.MaxSnapshotBytes:
		return nil, false, newErr(WatchTooBroad, "watch snapshot bytes", "matching entries encode to more than %d bytes; narrow the prefix", s.limits.MaxSnapshotBytes)
	}
	return entries, false, nil
}

// register adds the watch with its captured snapshot. The caller holds the
// lock that orders the snapshot against commits to its namespace.
func (s *Store) register(ss *Session, req WatchRequest, rev uint64, entries []*Entry) (WatchResult, error) {
	if err := s.watches.Add(ss.reg, req.RequestID, req.WatchID, req.Namespace, req.KeyPrefix, rev, entries); err != nil {
		return WatchResult{}, watchErr(err, req.WatchID)
	}
	res := WatchResult{SnapshotRevision: rev, Entries: make([]Entry, len(entries))}
	for i, e := range entries {
		res.Entries[i] = copyEntry(e)
	}
	return res, nil
}

func watchErr(err error, id string) error {
	var le *watch.LimitError
	switch {
	case errors.As(err, &le):
		return &Error{Code: WatchLimit, Field: le.Bound, Message: err.Error(), Err: err}
	case errors.Is(err, watch.ErrDuplicateWatch):
		return &Error{Code: InvalidArgument, Field: "watch_id", Message: err.Error(), Err: err}
	case errors.Is(err, watch.ErrUnknownWatch):
		return &Error{Code: NotFound, Field: "watch_id", Message: err.Error(), Err: err}
	case errors.Is(err, watch.ErrInvalidSequence):
		return &Error{Code: InvalidArgument, Field: "applied_sequence", Message: err.Error(), Err: err}
	case errors.Is(err, watch.ErrSessionClosed), errors.Is(err, watch.ErrStopped):
		return &Error{Code: Unavailable, Field: "session", Message: err.Error(), Err: err}
	}
	return &Error{Code: Unavailable, Field: "watch", Message: err.Error(), Err: err}
}

// Unwatch removes a watch (UnwatchState).
func (s *Store) Unwatch(ss *Session, watchID string) error {
	if err := s.watches.Remove(ss.reg, watchID); err != nil {
		return watchErr(err, watchID)
	}
	return nil
}

// Ack acknowledges the highest contiguously applied watch_sequence
// (WatchStateAck), freeing buffer. A sequence never sent is
// INVALID_ARGUMENT; an older one is harmless.
func (s *Store) Ack(ss *Session, watchID string, applied uint64) error {
	if err := s.watches.Ack(ss.reg, watchID, applied); err != nil {
		return watchErr(err, watchID)
	}
	return nil
}

// SetPrincipal changes the principal of every session authenticated as id
// (the embedder revoked admin rights, say) and closes, with
// AUTHORIZATION_LOST, each of their watches the new principal may no
// longer read. revoked = true removes all rights (the principal is gone).
func (s *Store) SetPrincipal(id string, p Principal, revoked bool) int {
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
