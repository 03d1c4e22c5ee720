package statestore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/replica/consensus"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// The facade: every method of Store, each checking what needs no state
// (the store open, identifiers, policy, document rules) and handing the
// rest to the layer that owns it: the namespace's home (backend.go,
// settings.go) and the commit pipeline (commit.go) for mutations and
// watches, the checkpointer (checkpoint.go) for images and restores.

// Capability is the server capability that advertises the state store's
// generic commands (GetState, PutState, DeleteState, WatchState,
// UnwatchState, WatchStateAck). It is advertised only while a store is
// open: a client must never be offered durability the server cannot
// deliver.
const Capability = "keeppeek.state-store.v1"

// Store is an open state store. All methods are safe for concurrent use.
type Store struct {
	opts    Options
	limits  quota.Limits
	clock   clock.Clock
	schemas *schema.Registry
	chk     *recovery.Checker
	log     *slog.Logger
	root    string // Dir/state-store
	lock    *disk.Lock
	jnl     *journal.Journal

	// shut is set first thing in Close. Every public call checks it, so a
	// closed store answers UNAVAILABLE and touches no file; Checkpoint
	// checks it under the checkpointer's lock, which Close takes
	// afterwards, so an explicit checkpoint either finished before Close
	// released the LOCK or refuses.
	shut atomic.Bool

	home     *journalBackend  // the journal-backed namespaces
	settings *settingsBackend // nil without Options.Settings
	pipe     *pipeline
	ckpt     *checkpointer
	leases   *expirer
	watches  *watch.Registry
	sessions sessionSet

	openReport OpenReport
	metrics    *metrics

	// cluster is set for a store opened with OpenCluster.
	cluster *clusterNode
}

// homeOf is the home of namespace.
func (s *Store) homeOf(namespace string) backend {
	if s.settings.holds(namespace) {
		return s.settings
	}
	return s.home
}

// homes are the store's homes of namespaces.
func (s *Store) homes() []backend {
	if s.settings == nil {
		return []backend{s.home}
	}
	return []backend{s.home, s.settings}
}

// errClosed is the answer of every call on a store that is closed or closing.
func (s *Store) errClosed() error {
	return newErr(Unavailable, "store", "the store in %s is closed", s.root)
}

// checkOpen fails with errClosed once Close has begun.
func (s *Store) checkOpen() error {
	if s.shut.Load() {
		return s.errClosed()
	}
	return nil
}

// checkCall is what every call on a key checks first: the store open, the
// context live, the identifiers valid and the policy satisfied.
func (s *Store) checkCall(ctx context.Context, p Principal, namespace, key string, a access) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return wrapErr(Unavailable, "context", err)
	}
	if err := ruleErr(rules.Namespace(namespace, s.limits.MaxNamespaceBytes)); err != nil {
		return err
	}
	if err := ruleErr(rules.Key(key, s.limits.MaxKeyBytes)); err != nil {
		return err
	}
	return authorize(p, namespace, a)
}

// Close stops accepting calls, lets every call already queued finish (a
// Restore in progress, a checkpoint in progress, explicit or background,
// included), and closes the journal and then the LOCK file. From the moment
// Close begins, every method that can fail answers UNAVAILABLE and touches
// no file; a second Close does too. The ones that cannot fail (Namespace,
// Usage, Limits, JournalStats, OpenReport, SetPrincipal) answer from
// memory and touch no file either.
func (s *Store) Close() error {
	s.shut.Store(true)
	// A Restore holds the write stage off while it rewrites checkpoints
	// and the journal's front: close waits for it before the journal
	// closes.
	if !s.pipe.close() {
		return s.errClosed()
	}
	s.leases.stop()
	if s.cluster != nil {
		// The state machine stops applying before the watches end.
		s.cluster.shutdown()
	}
	// Background checkpoints were started while the store was open; let
	// them finish, then keep an explicit Checkpoint out until the files
	// are closed: any that starts later sees shut and refuses.
	release := s.ckpt.quiesce()
	defer release()
	s.watches.Stop() // every watch gets STORE_CLOSED
	var err error
	if s.cluster != nil && s.cluster.logs != nil {
		err = s.cluster.closeLog()
		if s.cluster.logs.Journal() == nil {
			// The engine keeps its log elsewhere: the store's own
			// journal is open beside it.
			err = errors.Join(err, s.jnl.Close())
		}
	} else {
		err = s.jnl.Close()
	}
	return errors.Join(err, s.settings.close(), s.lock.Release())
}

// OpenReport tells what Open did besides replaying.
func (s *Store) OpenReport() OpenReport { return s.openReport }

// JournalStats returns the journal's counters since Open: writes, the
// fdatasyncs that acknowledged them, records and bytes.
func (s *Store) JournalStats() journal.Stats { return s.jnl.Stats() }

// Limits returns the bounds in force.
func (s *Store) Limits() quota.Limits { return s.limits }

// Capabilities returns the capabilities the embedder should advertise for
// this store: Capability while the store is open, none once it is closed.
func (s *Store) Capabilities() []string {
	if s.pipe.isClosed() {
		return nil
	}
	return []string{Capability}
}

// SettingsNamespaces returns the settings-backed namespaces, sorted; none
// without Options.Settings.
func (s *Store) SettingsNamespaces() []string {
	if s.settings == nil {
		return nil
	}
	return slices.Clone(s.settings.names)
}

// caughtUp is, on a cluster node, clusterNode.caughtUp: a view read here
// holds every write this node answered.
func (s *Store) caughtUp() {
	if s.cluster != nil {
		s.cluster.caughtUp()
	}
}

// Namespace returns the counters of a namespace: its revision (kept after
// it empties), entries and value bytes. It is an operator view and does no
// authorization.
func (s *Store) Namespace(namespace string) NamespaceInfo {
	s.caughtUp()
	return s.homeOf(namespace).published().Namespace(namespace)
}

// Namespaces lists every namespace the store has seen, settings-backed ones
// included, in name order. A namespace that emptied stays listed with its
// revision, which lives on (the revision never goes backwards). Like
// Namespace it is an operator view and does no authorization: an embedder
// serving it to a client filters it by the client's principal first.
func (s *Store) Namespaces() []NamespaceListing {
	s.caughtUp()
	var out []NamespaceListing
	for _, h := range s.homes() {
		h.published().Namespaces(func(name string, n materialize.Namespace) bool {
			out = append(out, NamespaceListing{Name: name, NamespaceInfo: n})
			return true
		})
	}
	slices.SortFunc(out, func(a, b NamespaceListing) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Usage returns the store's entries, value bytes and namespaces holding
// entries, settings-backed ones included (the quotas count both).
func (s *Store) Usage() (entries int, bytes int64, namespaces int) {
	s.caughtUp()
	for _, h := range s.homes() {
		e, b, n := h.published().Totals()
		entries, bytes, namespaces = entries+e, bytes+b, namespaces+n
	}
	return entries, bytes, namespaces
}

// Get returns the complete current entry at (namespace, key). An entry
// whose lease has lapsed reads as NOT_FOUND, and only after its EXPIRE is
// committed.
func (s *Store) Get(ctx context.Context, p Principal, namespace, key string) (Entry, error) {
	if err := s.checkCall(ctx, p, namespace, key, accessRead); err != nil {
		return Entry{}, err
	}
	home := s.homeOf(namespace)
	if s.cluster != nil && !isStale(ctx) {
		if err := s.cluster.linearize(ctx); err != nil {
			return Entry{}, err
		}
	} else {
		s.caughtUp()
	}
	for expired := false; ; expired = true {
		e, ok := home.published().Get(namespace, key)
		if !ok {
			return Entry{}, newErr(NotFound, "key", "%q not found in namespace %q", key, namespace)
		}
		// In a cluster the leader's clock rules: once it has been asked to
		// expire, an entry it kept is still alive.
		if e.ExpiresMs == 0 || s.clock.Now().UnixMilli() < e.ExpiresMs || (expired && s.cluster != nil) {
			return copyEntry(e), nil
		}
		// Due but not yet expired by the pipeline: have it commit the
		// EXPIRE first, so nobody observes an absence the journal lacks.
		if err := s.home.expire(); err != nil {
			return Entry{}, err
		}
	}
}

// Put atomically replaces (or creates) the entry and returns it as
// committed. The owner is always p. It returns only after the journal batch
// holding the write is fsynced, or with an error, in which case nothing
// changed.
func (s *Store) Put(ctx context.Context, p Principal, req PutRequest) (Entry, error) {
	return s.put(ctx, p, req, false)
}

// put is Put; validated says the document was checked against its schema
// already: a write a peer forwarded, whose node validated it before it
// forwarded it (peers are trusted as they are for the principal they
// name), so each write's document is walked once in the cluster.
func (s *Store) put(ctx context.Context, p Principal, req PutRequest, validated bool) (_ Entry, err error) {
	defer func() { s.metrics.wrote(err) }()
	if err := s.checkCall(ctx, p, req.Namespace, req.Key, accessWrite); err != nil {
		return Entry{}, err
	}
	if err := checkOwner(p.ID); err != nil {
		return Entry{}, err
	}
	if err := refuseLease(req.Namespace, req.TTL); err != nil {
		return Entry{}, err
	}
	ttl, err := s.limits.ClampTTL(req.TTL)
	if err != nil {
		return Entry{}, wrapErr(TTLInvalid, "ttl", err)
	}
	if err := s.limits.CheckDocument(len(req.Document)); err != nil {
		return Entry{}, wrapErr(ValueTooLarge, "document", err)
	}
	if !validated {
		if err := s.schemas.Validate(req.Schema, req.Document); err != nil {
			return Entry{}, schemaErr(err)
		}
	}
	o := &op{kind: opPut, owner: p.ID, ns: req.Namespace, key: req.Key, schema: req.Schema,
		doc: append([]byte(nil), req.Document...), reply: req.Document, expect: req.Expect, ttl: ttl}
	if s.cluster != nil {
		want, set := req.Expect.Revision()
		return s.cluster.write(ctx, s.localCommit(o), &fwdRequest{Verb: verbPut, Principal: fwdPrincipalOf(p), Namespace: req.Namespace,
			Key: req.Key, Schema: req.Schema, Document: req.Document, ExpectSet: set, ExpectRev: want, TTLMs: req.TTL.Milliseconds()})
	}
	return s.homeOf(req.Namespace).commit(o)
}

// localCommit commits a fresh copy of o here on each call: a cluster
// retries an op raft did not apply.
func (s *Store) localCommit(o *op) func() (Entry, error) {
	return func() (Entry, error) {
		c := *o
		c.res, c.err, c.done = Entry{}, nil, nil
		return s.home.commit(&c)
	}
}

// Delete removes the entry and returns the namespace revision the deletion
// produced. A missing key is NOT_FOUND.
func (s *Store) Delete(ctx context.Context, p Principal, req DeleteRequest) (_ uint64, err error) {
	defer func() { s.metrics.wrote(err) }()
	if err := s.checkCall(ctx, p, req.Namespace, req.Key, accessWrite); err != nil {
		return 0, err
	}
	o := &op{kind: opDelete, ns: req.Namespace, key: req.Key, expect: req.Expect}
	if s.cluster != nil {
		want, set := req.Expect.Revision()
		e, err := s.cluster.write(ctx, s.localCommit(o), &fwdRequest{Verb: verbDelete, Principal: fwdPrincipalOf(p), Namespace: req.Namespace,
			Key: req.Key, ExpectSet: set, ExpectRev: want})
		return e.Revision, err
	}
	e, err := s.homeOf(req.Namespace).commit(o)
	return e.Revision, err
}

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
	s.sessions.add(ss)
	return ss, nil
}

// Watch atomically registers a watch and captures every matching entry.
// Leases already due are expired (journaled) first, so a snapshot never
// holds an expired entry. A snapshot over the entry bound, or whose answer
// (the whole encoded ServerMessage, see session.go) is over the byte
// bound, is WATCH_TOO_BROAD and registers nothing.
func (s *Store) Watch(ctx context.Context, ss *Session, req WatchRequest) (res WatchResult, err error) {
	defer func() { s.metrics.watched(err) }()
	if err := s.checkOpen(); err != nil {
		return WatchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return WatchResult{}, wrapErr(Unavailable, "context", err)
	}
	for _, err := range []error{rules.WatchID(req.WatchID, s.limits.MaxKeyBytes),
		rules.Namespace(req.Namespace, s.limits.MaxNamespaceBytes), rules.Prefix(req.KeyPrefix, s.limits.MaxKeyBytes)} {
		if err != nil {
			return WatchResult{}, ruleErr(err)
		}
	}
	if err := authorize(ss.Principal(), req.Namespace, accessRead); err != nil {
		return WatchResult{}, err
	}
	if s.cluster != nil {
		if err := s.cluster.linearize(ctx); err != nil {
			return WatchResult{}, err
		}
	}
	tried := false
	err = s.homeOf(req.Namespace).atCommitPoint(func(v *materialize.View) (bool, error) {
		now := s.clock.Now().UnixMilli()
		if tried && s.cluster != nil {
			// The leader was asked to expire and kept what it kept: its
			// clock rules, so nothing it left is due here.
			now = math.MinInt64
		}
		tried = true
		snap, due := capture(v, req, s.limits, now)
		if due {
			return true, nil
		}
		var err error
		res, err = ss.register(req, v.Namespace(req.Namespace).Revision, snap)
		return false, err
	})
	return res, err
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
	if revoked {
		p = Principal{}
	}
	s.sessions.each(func(ss *Session) { ss.setPrincipal(id, p) })
	return s.watches.CloseWhere(watch.AuthorizationLost, func(principalID, namespace string) bool {
		return principalID == id && authorize(p, namespace, accessRead) != nil
	})
}

// CloseWatches closes every open watch with reason, each with its Closed
// message, and returns how many. It is how a node of a cluster that has
// heard from no leader for its bound ends its watches with
// watch.Unavailable: their clients re-snapshot, on another node when they
// have one. Sessions stay open and may watch again. A reason the registry
// does not know (the zero Reason included) is INVALID_ARGUMENT on field
// "reason" and closes nothing; once Close has begun there is nothing left
// to close and it returns 0.
func (s *Store) CloseWatches(reason watch.Reason) (int, error) {
	if !slices.Contains(watch.Reasons, reason) {
		return 0, newErr(InvalidArgument, "reason", "%v is not a watch close reason (one of %v)", reason, watch.Reasons)
	}
	if s.shut.Load() {
		return 0, nil
	}
	return s.watches.CloseAll(reason), nil
}

// Checkpoint writes a checkpoint of the current state now, removes images
// beyond the newest two and truncates the journal up to the older one. Once
// Close has begun it answers UNAVAILABLE and touches no file: another
// handle may own the directory by then. Close waits for a Checkpoint
// already under way before it releases the LOCK.
// In cluster mode it takes a raft snapshot (a checkpoint image of the
// applied state) instead, which lets raft compact its log.
func (s *Store) Checkpoint() error {
	if s.cluster != nil {
		if err := s.checkOpen(); err != nil {
			return err
		}
		if err := s.cluster.node.Snapshot(); err != nil && !errors.Is(err, consensus.ErrNothingNewToSnapshot) {
			return wrapErr(Storage, "raft snapshot", err)
		}
		return nil
	}
	return s.ckpt.now(s.checkOpen)
}

// Backup writes one file to w: a checkpoint image of the store at one
// commit point, taken while the store keeps serving reads, writes and
// watches. Restore or RestoreDir bring it back. A closed store answers
// UNAVAILABLE.
func (s *Store) Backup(w io.Writer) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	v, idx := s.home.snapshot()
	if _, err := checkpoint.Encode(w, v, idx, s.clock.Now().UnixMilli()); err != nil {
		return wrapErr(Storage, "backup", err)
	}
	return nil
}

// Restore replaces the open store's state with a backup. The backup is
// decoded and checked first, against every bound and rule a write passes,
// each document against its schema and the content guard (a refusal wraps
// a *DocumentError naming the entry and the rule); a bad one changes
// nothing.
// Namespace revisions, entry revisions and counters come back together in
// one step, durably (a checkpoint of the restored state at the journal's
// current index, the journal truncated behind it), before any later call
// sees them; every existing watch is closed with RESTORED. A closed store
// answers UNAVAILABLE without reading r; a Close that begins during a
// Restore waits for it, and the Restore then reports success, since the
// restored state is durable and the next Open purges the leases that
// lapsed since the backup.
func (s *Store) Restore(r io.Reader) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if s.cluster != nil {
		return newErr(Unavailable, "restore", "a replicated restore is not built yet: Restore is refused in cluster mode")
	}
	v, err := decodeBackup(s.chk, r, s.settings)
	if err != nil {
		return err
	}
	if err := s.pipe.exclusive(func() error { return s.ckpt.restore(v) }); err != nil {
		return err
	}
	s.leases.poke()
	// Leases that lapsed since the backup was taken expire now, journaled.
	err = s.home.expire()
	if CodeOf(err) == Unavailable && s.shut.Load() {
		return nil
	}
	return err
}

// Stats returns what the store has done since Open and its state now. It
// takes a few locks briefly (the journal's, the watch registry's) and lists
// the journal directory, so it suits a scrape every few seconds, not a hot
// loop. It works on a closed store too.
func (s *Store) Stats() Stats {
	return s.metrics.collect(statsSources{jnl: s.jnl, watches: s.watches, view: s.home.published(),
		limits: s.limits, closed: s.pipe.isClosed()})
}
