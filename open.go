package statestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// Recovery: Open takes the LOCK, opens the journal (which cuts a torn
// tail), rebuilds the state from the newest checkpoint that loads plus
// the journal after it (package recovery, with every check a write passed
// at admission), purges the leases that lapsed while the store was down,
// opens the settings-backed namespaces, and only then serves.

// Open opens the store in opts.Dir/state-store, creating it if needed. It
// takes the LOCK file, replays the journal with every check a write passes
// at admission plus revision continuity, purges overdue leases (journaling
// one EXPIRE each), and only then serves. Any failure is an *Error with code Unavailable wrapping
// the cause (a *journal.CorruptError names the journal index and offset;
// a stored document that breaks this build's rules is a *DocumentError
// inside it, see "Stored documents" in the package comment). A cluster
// node's directory (OpenCluster's) is refused with InvalidArgument on
// field Dir before anything is opened.
func Open(opts Options) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	// A cluster node's journal holds raft entries, which open would
	// report as damage at index 1; the stable file says what it is.
	if _, err := os.Stat(filepath.Join(s.root, StableFileName)); err == nil {
		return nil, newErr(InvalidArgument, "Dir", "%s holds a cluster node (its %s is there): open it with OpenCluster", s.root, StableFileName)
	}
	if err := open(s); err != nil {
		return nil, s.openFailed(err)
	}
	return s, nil
}

// newStore checks opts and returns the store they describe, not yet open.
func newStore(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, newErr(InvalidArgument, "Dir", "the store directory must be set")
	}
	limits, err := opts.Limits.WithDefaults()
	if err != nil {
		return nil, wrapErr(InvalidArgument, "Limits", err)
	}
	s := &Store{opts: opts, limits: limits, clock: opts.Clock, schemas: opts.Schemas, log: opts.Logger,
		root: filepath.Join(opts.Dir, StoreDirName), metrics: newMetrics()}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.schemas == nil {
		s.schemas = schema.NewRegistry()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.chk, err = recovery.NewChecker(limits, s.schemas); err != nil {
		return nil, wrapErr(InvalidArgument, "Limits", err)
	}
	return s, nil
}

// openFailed releases what a failed open left in s and returns the
// failure as Open answers it.
func (s *Store) openFailed(err error) error {
	if s.jnl != nil {
		s.jnl.Close()
	}
	s.settings.close()
	s.lock.Release()
	msg := fmt.Sprintf("open %s: %v", s.root, err)
	if de := (*recovery.DocumentError)(nil); errors.As(err, &de) {
		msg += "; " + recovery.MigrationHint
	}
	return &Error{Code: Unavailable, Field: "store", Message: msg, Err: err}
}

// open fills s in from its files, in the order the package comment of this
// file gives. On error, what it opened is in s for Open to release.
func open(s *Store) error {
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
	floor, err := recovery.CheckpointFloor(s.root)
	if err != nil {
		return err
	}
	jnl, cut, err := journal.Open(filepath.Join(s.root, "journal"), journal.Options{
		SegmentSize: s.opts.SegmentSize, Limits: s.chk.JournalLimits(), NoSync: s.opts.NoSync,
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
	st, err := recovery.Load(recovery.Source{Root: s.root, JournalDir: jnl.Dir(), First: jnl.FirstIndex(), Last: jnl.LastIndex(),
		Checker: s.chk, Log: s.log})
	if err != nil {
		return err
	}
	s.openReport.Checkpoint, s.openReport.Replayed = st.Checkpoint, st.Replayed
	adm := assemble(s, st, nil)
	// Purge overdue leases before anything is served, exactly as if they
	// had lapsed while running.
	if s.openReport.Expired, err = purgeOverdue(s.pipe, adm, jnl, st.View); err != nil {
		return err
	}
	if s.opts.Settings != "" {
		if s.settings, err = openSettings(s.opts.Settings, s.chk, s.home.published()); err != nil {
			return err
		}
		// The journal's namespaces are the settings' other home.
		s.settings.adm = admission{limits: s.limits, clock: s.clock, others: func() quota.Usage { return usageOf(s.home) }}
		s.settings.pipe = s.pipe
	}
	// Everything replayed is served from here on: a later open must find it.
	if err := jnl.MarkServed(); err != nil {
		return err
	}
	s.watches = watch.NewRegistry(watch.LimitsFrom(s.limits), s.clock)
	s.home.watches = s.watches
	if s.settings != nil {
		s.settings.watches = s.watches
	}
	s.pipe.start()
	go s.leases.run()
	// The EXPIREs above are in Stats().Bytes already; what was replayed is
	// not, yet it is journal the next checkpoint retires.
	s.ckpt.mark.Store(-st.FrameBytes)
	s.ckpt.maybe()
	return nil
}

// assemble builds the store's layers on the state st that recovery rebuilt:
// the journal's home publishing st.View, the pipeline committing to the
// journal on top of it, the checkpointer and the expiry loop. It returns
// the journal's admission.
func assemble(s *Store, st *recovery.State, cl *clusterNode) *admission {
	s.home = &journalBackend{index: s.jnl.LastIndex(), cluster: cl}
	s.home.view.Store(st.View)
	s.ckpt = &checkpointer{root: s.root, fs: disk.FS{Faults: s.opts.Faults}, jnl: s.jnl, home: s.home, clock: s.clock, log: s.log, metrics: s.metrics,
		every: s.opts.CheckpointBytes, unloadable: map[string]bool{}}
	for _, path := range st.Unloadable {
		s.ckpt.unloadable[path] = true
	}
	// The settings-backed namespaces, once opened, are the journal's other
	// home.
	adm := &admission{limits: s.limits, clock: s.clock, reserve: s.jnl.CheckReserve, others: func() quota.Usage {
		if s.settings == nil {
			return quota.Usage{}
		}
		return usageOf(s.settings)
	}}
	var log commitLog = journalLog{s.jnl}
	publish := s.home.publish
	expire := s.home.expire
	if cl != nil {
		// The state machine publishes every committed entry on every node,
		// the leader's own included; the leader stamps the time and only it
		// expires leases.
		s.home.index = 0
		log, publish, adm.stamp, adm.reserve = cl.log, func(*batch) {}, cl.stamp, nil
		expire = cl.expireIfLeader
	}
	s.leases = newExpirer(s.clock, s.home.published, expire)
	s.pipe = newPipeline(commitEnv{
		log:       log,
		admit:     adm.admitAll,
		publish:   publish,
		published: s.home.snapshot,
		afterRound: func(published, leases bool) {
			if published && cl == nil {
				s.ckpt.maybe()
			}
			if leases {
				s.leases.poke()
			}
		},
		closed:  s.errClosed,
		metrics: s.metrics,
	})
	s.home.pipe = s.pipe
	return adm
}

// purgeOverdue commits one EXPIRE per lease of view that is due now, for
// Open, and returns how many. If the disk is full, the failed write makes
// the journal give up its reserve; the EXPIREs then fit in the space it
// held, so they are tried once more: a store whose leases lapsed while the
// disk was full still opens.
func purgeOverdue(p *pipeline, adm *admission, jnl *journal.Journal, view *materialize.View) (int, error) {
	releases := jnl.Reserve().Releases
	for {
		b := adm.newBatch(view)
		n, err := b.expireDue(b.now)
		if err != nil {
			return 0, err
		}
		err = p.commitAlone(b)
		if err == nil || !journal.IsNoSpace(err) || jnl.Reserve().Releases == releases {
			return n, err
		}
		releases = jnl.Reserve().Releases
	}
}
