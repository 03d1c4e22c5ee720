package statestore

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/stats"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/watch"
)

// Operator metrics. The store counts its work with atomics and the
// lock-free histograms of package stats, so the commit path records every
// operation without taking a lock; Stats assembles a plain snapshot when
// an operator asks (a Prometheus scrape, say), and only that reads the
// counters kept under locks elsewhere (journal, watch registry, view).
// Package promstats exports a Stats as Prometheus metrics; this package
// does not depend on any metrics library.

// Histogram is a snapshot of one of the store's lock-free histograms:
// bucket bounds, counts, sum and extremes.
type Histogram = stats.Snapshot

// ErrLocked is matched (errors.Is) by the cause of an Open that failed
// because another process, or another Open in this one, holds the store's
// LOCK file.
var ErrLocked = disk.ErrLocked

// OpenState says whether a store is serving.
type OpenState int

// Open states.
const (
	// StateOpen: Open succeeded and Close has not been called.
	StateOpen OpenState = iota + 1
	// StateClosed: Close was called.
	StateClosed
	// StateFailed: Open failed; see Stats.Failure.
	StateFailed
)

// String returns "open", "closed" or "failed".
func (s OpenState) String() string {
	switch s {
	case StateOpen:
		return "open"
	case StateClosed:
		return "closed"
	case StateFailed:
		return "failed"
	}
	return "unknown"
}

// OpenFailure classifies why Open failed, in words a dashboard can group
// by; the error text says the rest.
type OpenFailure string

// Open failure classes.
const (
	// FailureInvalidOptions: Options were refused (INVALID_ARGUMENT).
	FailureInvalidOptions OpenFailure = "invalid_options"
	// FailureLocked: another process holds the store's LOCK file.
	FailureLocked OpenFailure = "locked"
	// FailureCorrupt: the journal or every checkpoint image failed
	// validation; kpjournal verify and repair say more.
	FailureCorrupt OpenFailure = "corrupt"
	// FailureStorage: the disk refused a read, write, sync or directory
	// operation.
	FailureStorage OpenFailure = "storage"
	// FailureOther: anything else, such as an image over the limits.
	FailureOther OpenFailure = "other"
)

// Stats is a snapshot of what a store has done since Open, for operators.
// Durations in histograms are in nanoseconds. A Stats built by
// FailedOpenStats has only State, Failure and FailureMessage set.
//
// Writes to settings-backed namespaces (Options.Settings) count in
// WritesCommitted and WritesRefused; the commit pipeline's histograms,
// Journal and Quota describe the journal-backed store, which is all that
// goes through the journal.
type Stats struct {
	State OpenState
	// Failure and FailureMessage say why Open failed (StateFailed only).
	Failure        OpenFailure
	FailureMessage string

	// CommitLatency is nanoseconds from a write entering the commit
	// pipeline (after the checks that need no state) to its reply, for
	// committed writes.
	CommitLatency Histogram
	// SyncLatency is nanoseconds per journal sync (one fdatasync, plus the
	// directory fsync when a new segment file was opened), failed ones too.
	SyncLatency Histogram
	// BatchOps is operations per group-commit batch (refused ones included:
	// they were admitted against the batch).
	BatchOps Histogram
	// SyncRecords is journal records made durable per sync.
	SyncRecords Histogram
	// WritesCommitted counts Put and Delete calls answered without error.
	WritesCommitted uint64
	// WritesRefused counts Put and Delete calls answered with an error, by
	// code; every code but OK is present.
	WritesRefused map[Code]uint64
	// WatchesRefused counts Watch calls answered with an error, by code;
	// every code but OK is present.
	WatchesRefused map[Code]uint64

	// Journal counts batches, records and bytes written, syncs and
	// failures since Open.
	Journal journal.Stats
	// JournalSegments and JournalDiskBytes are the segment files on disk
	// now and their total size (zero if the directory cannot be listed).
	JournalSegments  int
	JournalDiskBytes int64
	// JournalReserve is the journal's reserve: whether a full disk made
	// the store run on it (PUTs refused, deletes and expiries admitted),
	// and how often it was given up and written again since Open.
	JournalReserve journal.ReserveState

	// Watches are the watch registry's counters: open watches, closures by
	// reason, updates delivered and dropped.
	Watches watch.Stats
	// SnapshotEntries and SnapshotBytes are the sizes of the watch
	// snapshots served (entries, and estimated encoded bytes).
	SnapshotEntries Histogram
	SnapshotBytes   Histogram

	Quota       QuotaStats
	Checkpoints CheckpointStats
}

// QuotaStats is the store's use against its ceilings.
type QuotaStats struct {
	Entries    int   // entries in the store
	Bytes      int64 // value bytes in the store
	Namespaces int   // namespaces holding entries
	// FullestNamespaceEntries is the entry count of the fullest namespace,
	// the one nearest MaxEntriesPerNamespace.
	FullestNamespaceEntries int
	MaxTotalBytes           int64
	MaxNamespaces           int
	MaxEntriesPerNamespace  int
}

// CheckpointStats counts checkpoint images written since Open (automatic
// and Checkpoint calls; backups are not checkpoints).
type CheckpointStats struct {
	Written uint64
	Failed  uint64
	// LastIndex is the journal index of the last image written, LastTime
	// when it finished (the store's clock; zero if none), LastDuration how
	// long it took.
	LastIndex    uint64
	LastTime     time.Time
	LastDuration time.Duration
	Duration     Histogram // nanoseconds per image, failed ones too
}

// Histogram bounds. Latencies span a page-cache write (tens of µs) to a
// disk stalling for seconds; sizes go up to their bounds (maxBatch, the
// snapshot limits' defaults).
var (
	latencyBounds = []int64{
		25e3, 50e3, 100e3, 250e3, 500e3, // µs
		1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6, // ms
		1e9, 2.5e9, 5e9, 10e9, // s
	}
	checkpointBounds = []int64{1e6, 5e6, 10e6, 50e6, 100e6, 500e6, 1e9, 5e9, 10e9, 30e9, 60e9}
	batchBounds      = []int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	snapEntryBounds  = []int64{0, 1, 2, 4, 8, 16, 32, 64}
	snapByteBounds   = []int64{256, 1 << 10, 4 << 10, 16 << 10, 64 << 10}
)

const numCodes = int(Unavailable) + 1

// metrics are the store's own counters; see Stats for what each means.
type metrics struct {
	commit, sync, batchOps, syncRecords  *stats.Histogram
	snapEntries, snapBytes, ckptDuration *stats.Histogram

	committed      atomic.Uint64
	writesRefused  [numCodes]atomic.Uint64
	watchesRefused [numCodes]atomic.Uint64

	ckptWritten, ckptFailed, ckptIndex atomic.Uint64
	ckptUnixNano, ckptLastNanos        atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{
		commit: stats.MustHistogram(latencyBounds), sync: stats.MustHistogram(latencyBounds),
		batchOps: stats.MustHistogram(batchBounds), syncRecords: stats.MustHistogram(batchBounds),
		snapEntries: stats.MustHistogram(snapEntryBounds), snapBytes: stats.MustHistogram(snapByteBounds),
		ckptDuration: stats.MustHistogram(checkpointBounds),
	}
}

// wrote counts a Put or Delete answer.
func (m *metrics) wrote(err error) {
	if err == nil {
		m.committed.Add(1)
		return
	}
	m.writesRefused[clampCode(CodeOf(err))].Add(1)
}

// watched counts a refused Watch.
func (m *metrics) watched(err error) {
	if err != nil {
		m.watchesRefused[clampCode(CodeOf(err))].Add(1)
	}
}

func clampCode(c Code) int {
	if c < 0 || int(c) >= numCodes {
		return int(Unavailable)
	}
	return int(c)
}

// epoch anchors monoNow.
var epoch = time.Now()

// monoNow is a monotonic timestamp for latencies. time.Since on a time
// holding a monotonic reading reads only the monotonic clock: half the
// cost of time.Now, which reads the wall clock too (about 30 ns against
// 70-170 ns on the virtual machines measured).
func monoNow() time.Duration { return time.Since(epoch) }

// answered records a pipeline op's latency from when it was queued (a
// monoNow reading).
func (m *metrics) answered(o *op, queued time.Duration) {
	if o.kind != opExpire && o.err == nil {
		m.commit.ObserveDuration(monoNow() - queued)
	}
}

// synced records one journal sync covering records.
func (m *metrics) synced(took time.Duration, records int) {
	m.sync.ObserveDuration(took)
	m.syncRecords.Observe(int64(records))
}

// checkpointed records one checkpoint attempt that started at start (the
// monotonic clock) and ended at end (the store's clock).
func (m *metrics) checkpointed(index uint64, start time.Time, end time.Time, err error) {
	took := time.Since(start)
	m.ckptDuration.ObserveDuration(took)
	if err != nil {
		m.ckptFailed.Add(1)
		return
	}
	m.ckptIndex.Store(index)
	m.ckptUnixNano.Store(end.UnixNano())
	m.ckptLastNanos.Store(int64(took))
	m.ckptWritten.Add(1)
}

// statsSources are the parts of a store Stats reads besides its metrics.
type statsSources struct {
	jnl     *journal.Journal
	watches *watch.Registry
	view    *materialize.View // the journal-backed namespaces, published
	limits  quota.Limits
	closed  bool
}

// collect assembles a Stats from m and src.
func (m *metrics) collect(src statsSources) Stats {
	st := Stats{
		State:         StateOpen,
		CommitLatency: m.commit.Snapshot(), SyncLatency: m.sync.Snapshot(),
		BatchOps: m.batchOps.Snapshot(), SyncRecords: m.syncRecords.Snapshot(),
		WritesCommitted: m.committed.Load(),
		WritesRefused:   codeCounts(&m.writesRefused), WatchesRefused: codeCounts(&m.watchesRefused),
		Journal:         src.jnl.Stats(),
		JournalReserve:  src.jnl.Reserve(),
		Watches:         src.watches.Stats(),
		SnapshotEntries: m.snapEntries.Snapshot(), SnapshotBytes: m.snapBytes.Snapshot(),
		Checkpoints: CheckpointStats{
			Written: m.ckptWritten.Load(), Failed: m.ckptFailed.Load(), LastIndex: m.ckptIndex.Load(),
			LastDuration: time.Duration(m.ckptLastNanos.Load()), Duration: m.ckptDuration.Snapshot(),
		},
	}
	if ns := m.ckptUnixNano.Load(); ns != 0 {
		st.Checkpoints.LastTime = time.Unix(0, ns)
	}
	if src.closed {
		st.State = StateClosed
	}
	if segs, err := journal.ListSegments(src.jnl.Dir()); err == nil {
		st.JournalSegments = len(segs)
		for _, seg := range segs {
			st.JournalDiskBytes += seg.Size
		}
	}
	q := &st.Quota
	q.Entries, q.Bytes, q.Namespaces = src.view.Totals()
	src.view.Namespaces(func(_ string, n NamespaceInfo) bool {
		q.FullestNamespaceEntries = max(q.FullestNamespaceEntries, n.Entries)
		return true
	})
	l := src.limits
	q.MaxTotalBytes, q.MaxNamespaces, q.MaxEntriesPerNamespace = l.MaxTotalBytes, l.MaxNamespaces, l.MaxEntriesPerNamespace
	return st
}

func codeCounts(c *[numCodes]atomic.Uint64) map[Code]uint64 {
	out := make(map[Code]uint64, numCodes-1)
	for code := OK + 1; int(code) < numCodes; code++ {
		out[code] = c[code].Load()
	}
	return out
}

// FailedOpenStats is the Stats of a store that did not open, built from
// the error Open returned, so a dashboard shows "not open" and why even
// though the embedder has no Store. A nil err is classed FailureOther.
func FailedOpenStats(err error) Stats {
	st := Stats{State: StateFailed, Failure: classifyOpenError(err)}
	if err != nil {
		st.FailureMessage = err.Error()
	}
	return st
}

func classifyOpenError(err error) OpenFailure {
	var errno syscall.Errno
	var pathErr *fs.PathError
	switch {
	case err == nil:
		return FailureOther
	case CodeOf(err) == InvalidArgument:
		return FailureInvalidOptions
	case errors.Is(err, disk.ErrLocked):
		return FailureLocked
	case errors.Is(err, journal.ErrCorrupt), errors.Is(err, checkpoint.ErrCorrupt),
		errors.Is(err, checkpoint.ErrVersion), errors.Is(err, checkpoint.ErrLimits):
		return FailureCorrupt
	case errors.Is(err, journal.ErrStorage), errors.As(err, &pathErr), errors.As(err, &errno):
		return FailureStorage
	}
	return FailureOther
}
