package statestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// Entry is one complete state document with the metadata the store
// assigned. Entries returned by the store are copies the caller may keep.
type Entry = materialize.Entry

// StoreDirName is the directory, inside Options.Dir, that holds a store's
// files: the journal, checkpoints, the quarantine and the LOCK file.
const StoreDirName = "state-store"

// Options configure Open.
type Options struct {
	// Dir is the media server's long-term storage directory; the store
	// lives in Dir/state-store.
	Dir string
	// Limits bound the store; zero fields take the defaults of quota.Default.
	Limits quota.Limits
	// Clock is the time source for timestamps and leases; nil is the wall clock.
	Clock clock.Clock
	// Schemas validates documents; nil means schema.NewRegistry() (with
	// keeppeek.media-intent.v1 built in).
	Schemas *schema.Registry
	// SegmentSize is the journal segment size; 0 means journal.DefaultSegmentSize.
	SegmentSize int
	// NoSync makes the journal skip fsync. It exists only so benchmarks can
	// isolate the cost of everything but the disk; a store opened with it
	// loses acknowledged writes on a crash.
	NoSync bool
	// NoPrewrite keeps the journal's tail segment append-only instead of
	// pre-written with zeros ahead of the records (journal.Options
	// NoPrewrite): for measuring what pre-writing gains, and for tests
	// that count fdatasyncs.
	NoPrewrite bool
	// DirectSync never runs fdatasync through io_uring (journal.Options
	// DirectSync): every sync holds its goroutine's processor in the
	// system call. For kernels where io_uring is allowed but not wanted,
	// and for measuring what parking gains.
	DirectSync bool
	// Logger receives reports such as a torn journal tail cut at open; nil
	// discards them.
	Logger *slog.Logger
	// CheckpointBytes is how many journal bytes may follow the newest
	// checkpoint before one is written in the background. The count is of
	// the journal as it stands on disk, records replayed at Open included,
	// so a store that restarts often still checkpoints (right after Open
	// when it is already over). 0 means DefaultCheckpointBytes, negative
	// disables automatic checkpoints. Under heavy writes the threshold is
	// raised to sixteen times the journal bytes committed while the previous
	// background checkpoint ran (see checkpoints.go).
	CheckpointBytes int64
	// Settings is the path of the media server's config.toml; its
	// [state_store] section declares the settings-backed namespaces and
	// holds their entries (see settings.go). "" means none.
	Settings string
	// ReserveBytes is the journal space held back so that deletes, lease
	// expiries and the restart purge still commit on a full disk (see
	// "Full disk" in the package documentation); 0 means
	// journal.DefaultReserveBytes, negative keeps none.
	ReserveBytes int64
	// Faults is a test seam of this module: the hooks every fsync of this
	// store consults first (its journal's, its checkpoints', its directory
	// syncs), so a test fails one store's disk and no other. nil in real use.
	Faults *fault.Hooks
}

// Store is an open state store. All methods are safe for concurrent use.
type Store struct {
	opts    Options
	limits  quota.Limits
	clock   clock.Clock
	schemas *schema.Registry
	log     *slog.Logger
	root    string // Dir/state-store
	lock    *disk.Lock
	jnl     *journal.Journal

	// view is the last published state: never mutated after publication,
	// read without locks.
	view atomic.Pointer[materialize.View]
	// pubMu is the commit-order lock: held while a batch's view is
	// published (and its watch updates queued), and by anything that must
	// see the view and its journal index as one point in the commit order.
	pubMu sync.Mutex
	index uint64 // journal index the published view reflects (under pubMu)

	watches  *watch.Registry
	sessMu   sync.Mutex
	sessions map[*Session]struct{}

	ckptMu      sync.Mutex      // one checkpoint writer at a time
	unloadable  map[string]bool // images Open skipped as damaged; set by Open, read-only after
	ckptRunning atomic.Bool     // a background checkpoint is in flight
	// ckptMark is the value journal Stats().Bytes had (or would have had)
	// when no journal byte followed the newest checkpoint: Stats().Bytes -
	// ckptMark is the journal after the newest image. Stats() counts from
	// this Open, so Open sets it negative by the frame bytes it replayed.
	ckptMark atomic.Int64
	// ckptLag is how many journal bytes were committed while the last
	// background checkpoint ran: the write rate scaled by what one image
	// costs, which spaces the next one (checkpoints.go).
	ckptLag atomic.Int64
	ckptWG  sync.WaitGroup

	// shut is set first thing in Close. Every public call checks it, so a
	// closed store answers UNAVAILABLE and touches no file; Checkpoint
	// checks it under ckptMu, which Close takes afterwards, so an explicit
	// checkpoint either finished before Close released the LOCK or refuses.
	shut atomic.Bool

	// pipe is the commit pipeline: its queue, stages and loops.
	pipe pipeline

	openReport OpenReport
	settings   *settingsBackend // nil without Options.Settings
	metrics    *metrics
}

// OpenReport tells what Open had to do besides replaying.
type OpenReport struct {
	// TailCut is set when a torn final journal record was cut off.
	TailCut *journal.TailCut
	// Replayed is how many journal records were replayed.
	Replayed int
	// Expired is how many overdue leases were purged before serving.
	Expired int
	// Checkpoint says which image replay started from.
	Checkpoint CheckpointReport
}

// Open opens the store in opts.Dir/state-store, creating it if needed. It
// takes the LOCK file, replays the journal with every check a write passes
// at admission plus revision continuity, purges overdue leases (journaling
// one EXPIRE each), and only then serves. Any failure is an *Error with code Unavailable wrapping
// the cause (a *journal.CorruptError names the journal index and offset).
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, newErr(InvalidArgument, "Dir", "the store directory must be set")
	}
	limits, err := opts.Limits.WithDefaults()
	if err != nil {
		return nil, wrapErr(InvalidArgument, "Limits", err)
	}
	s := &Store{opts: opts, unloadable: map[string]bool{}, limits: limits, clock: opts.Clock, schemas: opts.Schemas, log: opts.Logger,
		root: filepath.Join(opts.Dir, StoreDirName), metrics: newMetrics()}
	s.pipe.init()
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.schemas == nil {
		s.schemas = defaultRegistry()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.open(); err != nil {
		if s.jnl != nil {
			s.jnl.Close()
		}
		s.closeSettings()
		s.lock.Release()
		return nil, &Error{Code: Unavailable, Field: "store", Message: fmt.Sprintf("open %s: %v", s.root, err), Err: err}
	}
	return s, nil
}

func (s *Store) journalLimits() journal.Limits { return s.checker().JournalLimits() }

func (s *Store) open() error {
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return err
	}
	if err := (disk.FS{Faults: s.opts.Faults}).SyncDir(s.opts.Dir); err != nil {
		return err
	}
	lock, err := disk.LockFile(filepath.Join(s.root, "LOCK"))
	if err != nil {
		return err
	}
	s.lock = lock
	floor, err := CheckpointFloor(s.root)
	if err != nil {
		return err
	}
	jnl, cut, err := journal.Open(filepath.Join(s.root, "journal"), journal.Options{
		SegmentSize: s.opts.SegmentSize, Limits: s.journalLimits(), NoSync: s.opts.NoSync,
		NoPrewrite: s.opts.NoPrewrite, DirectSync: s.opts.DirectSync, QuarantineDir: filepath.Join(s.root, "quarantine"), Floor: floor, ReserveBytes: s.opts.ReserveBytes, Faults: s.opts.Faults,
	})
	if err != nil {
		return err
	}
	s.jnl = jnl
	if cut != nil {
		s.openReport.TailCut = cut
		s.log.Warn("state store: " + cut.String())
	}
	st, err := loadState(stateSource{root: s.root, journalDir: jnl.Dir(), first: jnl.FirstIndex(), last: jnl.LastIndex(),
		chk: s.checker(), log: s.log})
	if err != nil {
		return err
	}
	view, backlog := st.View, st.FrameBytes // frame bytes after the image: the journal the next checkpoint retires
	s.openReport.Checkpoint, s.openReport.Replayed = st.Checkpoint, st.Replayed
	for _, path := range st.unloadable {
		s.unloadable[path] = true
	}
	s.view.Store(view)
	s.index = jnl.LastIndex()
	// Purge overdue leases before anything is served, exactly as if they
	// had lapsed while running.
	if s.openReport.Expired, err = s.purgeOverdue(view); err != nil {
		return err
	}
	if err := s.openSettings(); err != nil {
		return err
	}
	// Everything replayed is served from here on: a later open must find it.
	if err := jnl.MarkServed(); err != nil {
		return err
	}
	s.watches = watch.NewRegistry(watch.LimitsFrom(s.limits), s.clock)
	s.sessions = map[*Session]struct{}{}
	s.pipe.quit = make(chan struct{})
	s.pipe.expiryDone = make(chan struct{})
	s.pipe.loops.Add(1)
	go s.helperLoop()
	go s.expiry()
	// The EXPIREs above are in Stats().Bytes already; what was replayed is
	// not, yet it is journal the next checkpoint retires.
	s.ckptMark.Store(-backlog)
	s.maybeCheckpoint()
	return nil
}

func (s *Store) checker() *ReplayChecker {
	return &ReplayChecker{limits: s.limits, schemas: s.schemas}
}

// usage is what the quotas judge a write to namespace against on v; n is
// the namespace's counters in v, which the caller has already looked up.
func (s *Store) usage(v *materialize.View, namespace string, n materialize.Namespace) quota.Usage {
	_, bytes, nss := v.Totals()
	return s.otherUsage(quota.Usage{Namespaces: nss, NamespaceEntries: n.Entries, TotalBytes: bytes}, namespace)
}

func defaultRegistry() *schema.Registry { return schema.NewRegistry() }

// onRestored is called, under the commit-order lock, when a restore
// replaced the state: no watch may carry on across it.
func (s *Store) onRestored() { s.watches.CloseAll(watch.Restored) }

// OpenReport tells what Open did besides replaying.
func (s *Store) OpenReport() OpenReport { return s.openReport }

// Close stops accepting calls, lets every call already queued finish (a
// Restore in progress, a checkpoint in progress, explicit or background,
// included), and closes the journal and then the LOCK file. From the moment
// Close begins, every method that can fail answers UNAVAILABLE and touches
// no file; a second Close does too. The ones that cannot fail (Namespace,
// Usage, Limits, JournalStats, OpenReport, SetPrincipal) answer from
// memory and touch no file either.
func (s *Store) Close() error {
	s.shut.Store(true)
	s.pipe.mu.Lock()
	if s.pipe.closed {
		s.pipe.mu.Unlock()
		return s.errClosed()
	}
	s.pipe.closed = true
	// A Restore holds the write stage off while it rewrites checkpoints and
	// the journal's front: it must end before the journal closes.
	for s.pipe.paused {
		s.pipe.idle.Wait()
	}
	s.quietLocked(true)
	s.pipe.stopping = true
	s.pipe.helperWake.Signal()
	s.pipe.mu.Unlock()
	s.pipe.loops.Wait()
	close(s.pipe.quit)
	<-s.pipe.expiryDone
	// Background checkpoints were started while the store was open; let
	// them finish. Then wait out an explicit Checkpoint holding ckptMu and
	// keep it until the files are closed: any that takes it later sees
	// shut and refuses.
	s.ckptWG.Wait()
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.watches.Stop() // every watch gets STORE_CLOSED
	err := s.jnl.Close()
	return errors.Join(err, s.closeSettings(), s.lock.Release())
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

// JournalStats returns the journal's counters since Open: writes, the
// fdatasyncs that acknowledged them, records and bytes.
func (s *Store) JournalStats() journal.Stats { return s.jnl.Stats() }

// Limits returns the bounds in force.
func (s *Store) Limits() quota.Limits { return s.limits }

// NamespaceInfo is a namespace's counters.
type NamespaceInfo = materialize.Namespace

// Namespace returns the counters of a namespace: its revision (kept after
// it empties), entries and value bytes. It is an operator view and does no
// authorization.
func (s *Store) Namespace(namespace string) NamespaceInfo {
	return s.readView(namespace).Namespace(namespace)
}

// Usage returns the store's entries, value bytes and namespaces holding
// entries, settings-backed ones included (the quotas count both).
func (s *Store) Usage() (entries int, bytes int64, namespaces int) {
	return s.totals()
}

// Get returns the complete current entry at (namespace, key). An entry
// whose lease has lapsed reads as NOT_FOUND, and only after its EXPIRE is
// committed.
func (s *Store) Get(ctx context.Context, p Principal, namespace, key string) (Entry, error) {
	if err := s.checkOpen(); err != nil {
		return Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, wrapErr(Unavailable, "context", err)
	}
	if err := s.checkTarget(p, namespace, key, accessRead); err != nil {
		return Entry{}, err
	}
	for {
		e, ok := s.readView(namespace).Get(namespace, key)
		if !ok {
			return Entry{}, newErr(NotFound, "key", "%q not found in namespace %q", key, namespace)
		}
		if e.ExpiresMs == 0 || s.clock.Now().UnixMilli() < e.ExpiresMs {
			return copyEntry(e), nil
		}
		// Due but not yet expired by the pipeline: have it commit the
		// EXPIRE first, so nobody observes an absence the journal lacks.
		if _, err := s.submit(&op{kind: opExpire}); err != nil {
			return Entry{}, err
		}
	}
}

func copyEntry(e *Entry) Entry {
	c := *e
	c.Document = append([]byte(nil), e.Document...)
	return c
}

func (s *Store) checkTarget(p Principal, namespace, key string, a access) error {
	if err := checkNamespace(namespace, s.limits.MaxNamespaceBytes); err != nil {
		return err
	}
	if err := checkKey(key, s.limits.MaxKeyBytes); err != nil {
		return err
	}
	return authorize(p, namespace, a)
}

// Expect is a write's expected_revision: the zero value is a blind write
// (absent), CreateOnly is 0, IfRevision(n) is n.
type Expect struct {
	set bool
	rev uint64
}

// CreateOnly is expected_revision 0: the key must not exist.
var CreateOnly = Expect{set: true}

// IfRevision is expected_revision n: the key's revision must be n. n = 0 is
// CreateOnly.
func IfRevision(n uint64) Expect { return Expect{set: true, rev: n} }

// Revision returns the expected revision and whether one is set.
func (x Expect) Revision() (uint64, bool) { return x.rev, x.set }

// PutRequest is a PutState.
type PutRequest struct {
	Namespace string
	Key       string
	Schema    string
	Document  []byte // a JSON object valid against Schema
	Expect    Expect
	// TTL requests a lease: 0 means none; below the minimum (1 s) is
	// TTL_INVALID; above the maximum (24 h) is clamped.
	TTL time.Duration
}

// Put atomically replaces (or creates) the entry and returns it as
// committed. The owner is always p. It returns only after the journal batch
// holding the write is fsynced, or with an error, in which case nothing
// changed.
func (s *Store) Put(ctx context.Context, p Principal, req PutRequest) (_ Entry, err error) {
	defer func() { s.metrics.wrote(err) }()
	if err := s.checkOpen(); err != nil {
		return Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, wrapErr(Unavailable, "context", err)
	}
	if err := s.checkTarget(p, req.Namespace, req.Key, accessWrite); err != nil {
		return Entry{}, err
	}
	if err := checkOwner(p.ID); err != nil {
		return Entry{}, err
	}
	ttl, err := s.limits.ClampTTL(req.TTL)
	if err != nil {
		return Entry{}, wrapErr(TTLInvalid, "ttl", err)
	}
	if err := s.limits.CheckDocument(len(req.Document)); err != nil {
		return Entry{}, wrapErr(ValueTooLarge, "document", err)
	}
	if err := s.schemas.Validate(req.Schema, req.Document); err != nil {
		return Entry{}, schemaErr(err)
	}
	owner := p.ID
	o := &op{kind: opPut, owner: owner, ns: req.Namespace, key: req.Key, schema: req.Schema,
		doc: append([]byte(nil), req.Document...), reply: req.Document, expect: req.Expect, ttl: ttl}
	return s.commitOp(o)
}

// DeleteRequest is a DeleteState.
type DeleteRequest struct {
	Namespace string
	Key       string
	Expect    Expect
}

// Delete removes the entry and returns the namespace revision the deletion
// produced. A missing key is NOT_FOUND.
func (s *Store) Delete(ctx context.Context, p Principal, req DeleteRequest) (_ uint64, err error) {
	defer func() { s.metrics.wrote(err) }()
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, wrapErr(Unavailable, "context", err)
	}
	if err := s.checkTarget(p, req.Namespace, req.Key, accessWrite); err != nil {
		return 0, err
	}
	e, err := s.commitOp(&op{kind: opDelete, ns: req.Namespace, key: req.Key, expect: req.Expect})
	return e.Revision, err
}

// schemaErr turns a schema rejection into SCHEMA_INVALID. The JSON path
// goes in Field alone: the message is the schema's reason and name, so the
// formatted error says the path once.
func schemaErr(err error) *Error {
	var se *schema.Error
	if !errors.As(err, &se) {
		return wrapErr(SchemaInvalid, "document", err)
	}
	field, msg := se.Path, se.Reason
	if field == "" {
		field = "document"
	}
	if se.Schema != "" {
		msg += " (schema " + se.Schema + ")"
	}
	return &Error{Code: SchemaInvalid, Field: field, Message: msg, Err: err}
}
