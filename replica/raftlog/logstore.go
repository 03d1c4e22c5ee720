package raftlog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/journal"
)

// DefaultMaxEntryBytes bounds one raft entry's data and extensions: one
// group-commit batch of the store (at most 512 records of at most the
// largest document each) with room to spare, and the bound Open's torn-tail
// judgement trusts a length prefix up to.
const DefaultMaxEntryBytes = 64 << 20

// Options configure a LogStore.
type Options struct {
	// SegmentSize is the journal's segment size; 0 means
	// journal.DefaultSegmentSize.
	SegmentSize int
	// MaxEntryBytes bounds an entry's data and extensions together; 0
	// means DefaultMaxEntryBytes. An entry over it is refused by
	// StoreLogs, and a frame over it on disk is damage.
	MaxEntryBytes int
	// WaitInSyscall makes StoreLogs wait in fdatasync(2) itself
	// (journal.Sync) instead of parking on an io_uring completion
	// (journal.SyncParked, the default): a node's raft loop shares two
	// processors with its FSM, transport and clients, and a goroutine
	// parked on the disk holds none of them.
	WaitInSyscall bool
	// Contended, when set (and WaitInSyscall is not), is asked before
	// each StoreLogs' fdatasync: true parks on the io_uring as without
	// it, false waits in fdatasync(2) itself. The ring's completion
	// reaches the waiter through a kernel worker, an eventfd, the
	// network poller and a reaper goroutine: on an idle node that cost
	// 65-90 us per fdatasync (100-150 us in raftlog_cluster_floor's one
	// process), and a serial commit waits for two (the leader's, then a
	// follower's). Holding the processor is the faster
	// way when no other goroutine wants it, as for a lone writer's sync
	// in the store's own pipeline; under load parking leaves it to them.
	Contended func() bool
	// NoSync, NoPrewrite, DirectSync and Faults are the journal's options
	// of the same names (for measurements and tests: a log opened with
	// NoSync is not durable, yet still counts a Sync per StoreLogs).
	NoSync     bool
	NoPrewrite bool
	DirectSync bool
	Faults     *fault.Hooks
}

// ErrRefused is wrapped by every operation the LogStore refuses because
// raft asked for something its contract rules out; nothing changed.
var ErrRefused = errors.New("raftlog: refused")

// Why a request was refused, wrapped by a *RefusedError beside ErrRefused.
var (
	// ErrGap: StoreLogs whose first index does not follow LastIndex, or
	// whose entries are not consecutive (the store is monotonic).
	ErrGap = errors.New("entries not contiguous")
	// ErrCommitted: a suffix deletion reaching the commit floor, which
	// would drop entries raft already called committed.
	ErrCommitted = errors.New("at or below the commit floor")
	// ErrRange: a DeleteRange that is neither a prefix, nor a suffix, nor
	// everything (a hole), or with min > max.
	ErrRange = errors.New("not a prefix, a suffix or the whole log")
	// ErrTooLarge: an entry whose data and extensions exceed MaxEntryBytes.
	ErrTooLarge = errors.New("entry too large")
)

// RefusedError names the operation and the raft index it was refused at.
type RefusedError struct {
	Op     string // "store logs", "delete range"
	Index  uint64
	Reason string
	Err    error // ErrGap, ErrCommitted, ErrRange or ErrTooLarge
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("raftlog: %s at index %d refused (%v): %s", e.Op, e.Index, e.Err, e.Reason)
}

// Unwrap returns ErrRefused and the reason's sentinel.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// CorruptError is a raft entry whose frame failed its checks, or a journal
// record that is not a raft entry: it names the index (and, from Open, the
// segment and offset).
type CorruptError = journal.CorruptError

// LogStore is hashicorp/raft's LogStore, MonotonicLogStore and
// CommitTrackingLogStore over a journal (see the package documentation).
// It is safe for concurrent use: raft's replication goroutines read while
// its main loop stores and deletes.
type LogStore struct {
	// mu orders the changes (StoreLogs, DeleteRange, Close) and guards
	// the fields; GetLog takes it only to read them.
	mu      sync.Mutex
	j       *journal.Journal
	dir     string
	maxData int
	direct  bool        // Options.WaitInSyscall
	busy    func() bool // Options.Contended, nil: always park
	cut     *journal.TailCut
	staged  uint64 // StageCommitIndex's, persisted by the next StoreLogs
	commit  uint64 // the persisted commit floor (see the package doc)
	closed  bool
	// restoring is the index of the snapshot raft is restoring, while
	// restoringSet: the next deletion of the whole log keeps the entries
	// above it (RestoringSnapshot).
	restoring    uint64
	restoringSet bool
	recs         []*journal.Record
	ents         []journal.RaftEntry

	// undo holds the entries a suffix deletion removed, until the
	// StoreLogs after it succeeds (raft's appendEntries stores right
	// after it cuts a conflicting suffix). Raft v1.8.0 moves its own
	// last-log index only when that StoreLogs succeeds: if the deletion
	// or the StoreLogs fails, raft still counts the deleted entries as
	// its log, asks for them (GetLog of an index it believes stored),
	// fails the AppendEntries, and the leader walks back one index per
	// round trip until it sends a snapshot: the follower stalls for as
	// long. So once a failure made them owed (undoOwed), the log answers
	// as if they were there (GetLog, LastIndex: LogStore.owed) and writes
	// them back before any other change is made. Until a failure the log
	// answers as without them, as raft.InmemStore would. Written under
	// mu and rmu (setUndo), so read under either: GetLog does not take
	// mu.
	undo     []*raft.Log
	undoOwed bool

	// recent holds the newest entries stored, entry i at i mod its
	// length, so that raft's replication (which reads back what the
	// leader just stored, for every follower) is served from memory, not
	// the journal. Guarded by rmu, not mu: GetLog must not wait for a
	// StoreLogs' fdatasync. Any deletion empties it.
	rmu         sync.RWMutex
	recent      []*raft.Log
	recentBytes int    // the data and extensions recent holds, at most recentMaxBytes
	recentLow   uint64 // no entry below it is held: where eviction resumes
}

// recentEntries is the length of LogStore.recent: more than raft sends a
// follower in one AppendEntries (MaxAppendEntries, 64 by default) times
// the batches a slow follower trails by.
const recentEntries = 512

// recentMaxBytes bounds what recent holds: an entry is a store batch, up
// to a writer's document per writer, so 512 of them could hold hundreds of
// megabytes. Past the bound the oldest entries held make room for the
// newest (which replication reads back at once); older ones, and an entry
// larger than the bound, are read from the journal.
const recentMaxBytes = 8 << 20

func logBytes(l *raft.Log) int { return len(l.Data) + len(l.Extensions) }

var (
	_ raft.LogStore               = (*LogStore)(nil)
	_ raft.MonotonicLogStore      = (*LogStore)(nil)
	_ raft.CommitTrackingLogStore = (*LogStore)(nil)
)

// limits are the journal's decoder bounds for a raft journal.
func limits(maxData int) journal.Limits {
	lim := journal.DefaultLimits
	lim.MaxRaftEntry = maxData
	return lim
}

// Open opens (creating if needed) the raft log in dir. It cuts a torn final
// entry that was never acknowledged (TailCut reports it), then reads every
// entry and refuses a log holding damage anywhere else, or a record that is
// not a raft entry, with a *CorruptError naming the index, the segment and
// the offset.
func Open(dir string, opts Options) (*LogStore, error) {
	if opts.MaxEntryBytes <= 0 {
		opts.MaxEntryBytes = DefaultMaxEntryBytes
	}
	lim := limits(opts.MaxEntryBytes)
	j, cut, err := journal.Open(dir, journal.Options{
		SegmentSize: opts.SegmentSize, Limits: lim, NoSync: opts.NoSync, NoPrewrite: opts.NoPrewrite, DirectSync: opts.DirectSync,
		Faults: opts.Faults, ExternalFloor: true,
		// The leader reads the records it sends, most just below the tail.
		CacheSealed: true,
		// The reserve keeps a store's deletions possible on a full disk;
		// a raft log's deletions free space without writing.
		ReserveBytes: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	s := &LogStore{j: j, dir: dir, maxData: opts.MaxEntryBytes, direct: opts.WaitInSyscall, busy: opts.Contended, cut: cut}
	first, last := j.FirstIndex(), j.LastIndex()
	var lastCommit uint64
	err = j.Replay(first, func(index uint64, rec *journal.Record) error {
		if rec.Kind != journal.KindRaft {
			return fmt.Errorf("a %s record in a raft log", rec.Kind)
		}
		if index == last {
			lastCommit = rec.Raft.Commit
		}
		return nil
	})
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	// The newest persisted commit index: the last entry's, or the marker's
	// (written at Close and Reset), whichever is higher; never above the
	// last entry, so a cut tail cannot leave it pointing past the log.
	s.commit = min(max(lastCommit, j.Floor().Index), last)
	s.staged = s.commit
	return s, nil
}

// TailCut reports the torn final entry Open cut, or nil.
func (s *LogStore) TailCut() *journal.TailCut { return s.cut }

// Dir is the journal directory.
func (s *LogStore) Dir() string { return s.dir }

// Stats are the journal's counters (Appends and Syncs: one each per
// StoreLogs).
func (s *LogStore) Stats() journal.Stats { return s.j.Stats() }

// Journal is the journal the log is stored in, for its statistics, its
// reserve and its directory (a store in cluster mode reports them as its
// own). Writing to it or closing it directly breaks the log: Close is
// the LogStore's.
func (s *LogStore) Journal() *journal.Journal { return s.j }

// bounds are the log's first and last index as raft sees it, and whether
// it holds no entry (first > last then): the journal's, extended by the
// entries of a suffix deletion not yet settled (LogStore.undo). mu is
// held.
func (s *LogStore) bounds() (first, last uint64, empty bool) {
	first, last, empty = s.stored()
	if owed := s.owed(); len(owed) > 0 {
		last = owed[len(owed)-1].Index
		if empty {
			first = owed[0].Index
		}
		empty = false
	}
	return first, last, empty
}

// owed are the entries of a failed suffix deletion the log still answers
// for, nil when none are owed. mu or rmu is held.
func (s *LogStore) owed() []*raft.Log {
	if !s.undoOwed {
		return nil
	}
	return s.undo
}

// stored are the journal's own first and last index, and whether it
// holds no entry.
func (s *LogStore) stored() (first, last uint64, empty bool) {
	first, last = s.j.FirstIndex(), s.j.LastIndex()
	return first, last, first > last
}

// FirstIndex is the first index stored, 0 when none is.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, journal.ErrClosed
	}
	first, _, empty := s.bounds()
	if empty {
		return 0, nil
	}
	return first, nil
}

// LastIndex is the last index stored, 0 when none is.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, journal.ErrClosed
	}
	_, last, empty := s.bounds()
	if empty {
		return 0, nil
	}
	return last, nil
}

// GetLog reads the entry at index into log; raft.ErrLogNotFound when the
// log does not hold it. Each read checks the entry's CRC.
func (s *LogStore) GetLog(index uint64, log *raft.Log) error {
	s.rmu.RLock()
	if owed := s.owed(); len(owed) > 0 && index >= owed[0].Index && index <= owed[len(owed)-1].Index {
		*log = *owed[index-owed[0].Index]
		s.rmu.RUnlock()
		return nil
	}
	if len(s.recent) > 0 {
		if l := s.recent[index%uint64(len(s.recent))]; l != nil && l.Index == index {
			*log = *l
			s.rmu.RUnlock()
			return nil
		}
	}
	s.rmu.RUnlock()
	frame, err := s.j.Read(index, nil)
	if errors.Is(err, journal.ErrNoRecord) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftlog: get log %d: %w", index, err)
	}
	var f journal.Frame
	if err := f.Parse(frame, limits(s.maxData)); err != nil {
		return &CorruptError{Offset: -1, Index: index, Reason: "stored entry fails its checks", Err: err}
	}
	if f.Kind != journal.KindRaft {
		return &CorruptError{Offset: -1, Index: index, Reason: fmt.Sprintf("a %s record in a raft log", f.Kind)}
	}
	// f aliases frame, a copy of its own: the entry may keep it.
	*log = raft.Log{Index: index, Term: f.Raft.Term, Type: raft.LogType(f.Raft.Type), Data: f.Raft.Data,
		Extensions: f.Raft.Extensions, AppendedAt: f.Raft.AppendedAt}
	return nil
}

// StoreLog stores one entry (StoreLogs of one).
func (s *LogStore) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores logs as one journal batch: one write, one fdatasync
// (journal.Write, then SyncParked or Sync). The entries must be consecutive and follow
// LastIndex (any index when the log is empty: raft deletes everything
// after a snapshot install). Each entry carries the commit index staged
// before the call, so the one sync persists it too. Nothing of a refused
// or failed batch is kept.
func (s *LogStore) StoreLogs(logs []*raft.Log) (err error) {
	if len(logs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return journal.ErrClosed
	}
	start := logs[0].Index
	if len(s.undo) > 0 && (s.undoOwed || start != s.undo[0].Index) {
		// Not the batch that replaces the deleted suffix: the suffix is
		// raft's log again first.
		s.setUndo(s.undo, true)
		if err := s.settle(); err != nil {
			return err
		}
	}
	if len(s.undo) > 0 {
		defer func() {
			if err != nil {
				// Raft keeps its last-log index where the deleted suffix
				// ended: the suffix goes back (or is owed).
				s.setUndo(s.undo, true)
				_ = s.settle() // the error returned is the batch's; a failed write-back is retried by the next change
				return
			}
			s.setUndo(nil, false)
		}()
	}
	first, last, empty := s.stored()
	for i, l := range logs {
		if l.Index != start+uint64(i) {
			return &RefusedError{Op: "store logs", Index: l.Index, Err: ErrGap,
				Reason: fmt.Sprintf("entry %d of the batch has index %d, expected %d", i, l.Index, start+uint64(i))}
		}
		if n := len(l.Data) + len(l.Extensions); n > s.maxData {
			return &RefusedError{Op: "store logs", Index: l.Index, Err: ErrTooLarge,
				Reason: fmt.Sprintf("%d bytes of data and extensions, the bound is %d", n, s.maxData)}
		}
	}
	switch {
	case start == 0:
		return &RefusedError{Op: "store logs", Index: 0, Err: ErrGap, Reason: "raft indexes start at 1"}
	case empty && start != first:
		// The log is empty: it may continue anywhere (the entries
		// before start live in a snapshot). Reset is durable before the
		// batch is written, so a crash leaves an empty log at start.
		s.forget()
		if err := s.j.Reset(start); err != nil {
			return fmt.Errorf("raftlog: store logs at index %d: %w", start, err)
		}
		// The entries before start are a snapshot's: committed.
		s.commit = start - 1
	case !empty && start != last+1:
		return &RefusedError{Op: "store logs", Index: start, Err: ErrGap,
			Reason: fmt.Sprintf("the log holds %d..%d, so the next entry is %d", first, last, last+1)}
	}
	commit := s.staged
	if err := s.append(logs, commit); err != nil {
		return fmt.Errorf("raftlog: store logs %d..%d: %w", start, start+uint64(len(logs))-1, err)
	}
	s.commit = max(s.commit, min(commit, start+uint64(len(logs))-1))
	s.remember(logs)
	return nil
}

// append writes logs, which continue the journal, as one batch carrying
// commit, and syncs it. mu is held.
func (s *LogStore) append(logs []*raft.Log, commit uint64) error {
	if cap(s.ents) < len(logs) {
		s.ents = make([]journal.RaftEntry, len(logs))
		s.recs = make([]*journal.Record, len(logs))
		for i := range s.recs {
			s.recs[i] = &journal.Record{Kind: journal.KindRaft}
		}
	}
	ents, recs := s.ents[:len(logs)], s.recs[:len(logs)]
	for i, l := range logs {
		ents[i] = journal.RaftEntry{Term: l.Term, Commit: commit, Type: uint8(l.Type), AppendedAt: l.AppendedAt,
			Extensions: l.Extensions, Data: l.Data}
		recs[i].Raft = &ents[i]
	}
	start := logs[0].Index
	_, err := s.j.Write(recs, start)
	if err == nil && s.waitInSyscall() {
		err = s.j.Sync(start + uint64(len(logs)) - 1)
	} else if err == nil {
		err = s.j.SyncParked(start + uint64(len(logs)) - 1)
	}
	// Drop the references to raft's buffers either way.
	for i := range ents {
		ents[i] = journal.RaftEntry{}
	}
	return err
}

// waitInSyscall reports whether the next fdatasync should hold its
// processor: always with WaitInSyscall, never without Contended, else
// whenever Contended says nobody else wants it.
func (s *LogStore) waitInSyscall() bool {
	return s.direct || (s.busy != nil && !s.busy())
}

// setUndo replaces the entries of the unsettled suffix deletion, and
// whether their write-back is owed. mu is held; rmu is taken for GetLog's
// sake.
func (s *LogStore) setUndo(logs []*raft.Log, owed bool) {
	s.rmu.Lock()
	s.undo, s.undoOwed = logs, owed && logs != nil
	s.rmu.Unlock()
}

// settle writes back the entries of a suffix deletion raft did not see
// through, when owed (LogStore.undo): with the persisted commit floor, not
// the staged one, so that a restart never counts them committed (raft's
// commit index may already cover the leader's entries at those indexes,
// never these). It fails while the journal refuses; the next change tries
// again. mu is held.
func (s *LogStore) settle() error {
	if !s.undoOwed || len(s.undo) == 0 {
		return nil
	}
	lo := s.undo[0].Index
	if err := s.append(s.undo, s.commit); err != nil {
		return fmt.Errorf("raftlog: writing back %d..%d, a suffix deletion raft did not complete: %w", lo, s.undo[len(s.undo)-1].Index, err)
	}
	s.remember(s.undo)
	s.setUndo(nil, false)
	return nil
}

// undoMaxBytes bounds the entries a suffix deletion keeps in memory
// (LogStore.undo): a deposed leader's unreplicated entries, a few batches
// as a rule. A larger suffix is deleted without them, and a failure right
// after falls back to raft's own recovery (the leader walks back to a
// snapshot).
const undoMaxBytes = 64 << 20

// remember puts logs, just stored, into recent. Raft never changes an
// entry it handed to StoreLogs, so holding it is safe.
func (s *LogStore) remember(logs []*raft.Log) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.recent == nil {
		s.recent = make([]*raft.Log, recentEntries)
	}
	for _, l := range logs {
		slot := &s.recent[l.Index%uint64(len(s.recent))]
		if *slot != nil {
			s.recentBytes -= logBytes(*slot)
			*slot = nil
		}
		n := logBytes(l)
		if n > recentMaxBytes {
			continue
		}
		// Over the bound the oldest entries leave, not the newest:
		// replication reads back what was stored last.
		s.recentLow = max(s.recentLow, l.Index-min(l.Index, uint64(len(s.recent))-1))
		for ; s.recentBytes+n > recentMaxBytes && s.recentLow < l.Index; s.recentLow++ {
			old := &s.recent[s.recentLow%uint64(len(s.recent))]
			if *old != nil && (*old).Index == s.recentLow {
				s.recentBytes -= logBytes(*old)
				*old = nil
			}
		}
		*slot = l
		s.recentBytes += n
	}
}

// forget empties recent (entries were deleted, or the store closed).
func (s *LogStore) forget() {
	s.rmu.Lock()
	clear(s.recent)
	s.recentBytes, s.recentLow = 0, 0
	s.rmu.Unlock()
}

// DeleteRange deletes the entries min..max (inclusive). Three shapes are
// accepted: a prefix (min at or below FirstIndex, max below LastIndex:
// after a snapshot), a suffix (min above FirstIndex, max at or above
// LastIndex: a follower's conflicting entries), refused with ErrCommitted
// when min is at or below the commit floor, and everything (raft's
// MonotonicLogStore reset after a snapshot install), after which the next
// StoreLogs may start at any index. A hole in the middle is refused
// (ErrRange). Each is durable when it returns.
func (s *LogStore) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return journal.ErrClosed
	}
	if lo > hi {
		return &RefusedError{Op: "delete range", Index: lo, Err: ErrRange, Reason: fmt.Sprintf("min %d is above max %d", lo, hi)}
	}
	switch {
	case s.undoOwed:
		if err := s.settle(); err != nil {
			return err
		}
	case len(s.undo) > 0 && hi+1 >= s.undo[0].Index:
		// A deletion after a suffix deletion that did not fail is of
		// the shorter log: the first one stands. Only a prefix that
		// leaves an entry below it (raft's compaction, from its
		// snapshot goroutine, between the cut and the StoreLogs) leaves
		// it pending.
		s.setUndo(nil, false)
	}
	first, last, empty := s.bounds()
	if !(empty || hi < first || lo > last) {
		// Whatever is deleted (or fails half way) is no longer served
		// from memory.
		defer s.forget()
	}
	switch {
	case empty || hi < first || lo > last:
		return nil // nothing stored in the range
	case lo <= first && hi >= last && s.restoringSet && s.restoring < last:
		// Everything, right after raft restored the snapshot at
		// s.restoring, which the log outruns: raft still counts the
		// entries above the snapshot as its log (RestoringSnapshot), so
		// they stay, and only those the snapshot holds go.
		s.restoringSet = false
		if s.restoring >= first {
			if err := s.j.TruncateFront(s.restoring + 1); err != nil {
				return fmt.Errorf("raftlog: delete range %d..%d keeping %d..%d above the restored snapshot: %w", lo, hi, s.restoring+1, last, err)
			}
		}
	case lo <= first && hi >= last:
		// Everything: the journal starts over after last; StoreLogs
		// moves it to wherever raft continues.
		s.restoringSet = false
		if err := s.j.Reset(last + 1); err != nil {
			return fmt.Errorf("raftlog: delete range %d..%d: %w", lo, hi, err)
		}
		s.commit = last
	case lo <= first:
		if err := s.j.TruncateFront(hi + 1); err != nil {
			return fmt.Errorf("raftlog: delete range %d..%d: %w", lo, hi, err)
		}
	case hi >= last:
		if lo <= s.commit {
			return &RefusedError{Op: "delete range", Index: lo, Err: ErrCommitted,
				Reason: fmt.Sprintf("deleting %d..%d would drop entries up to the persisted commit index %d", lo, last, s.commit)}
		}
		kept, err := s.suffix(lo, last)
		if err != nil {
			return fmt.Errorf("raftlog: delete range %d..%d: %w", lo, hi, err)
		}
		if err := s.j.TruncateBack(lo - 1); err != nil {
			if kept != nil {
				s.setUndo(kept, true)
				_ = s.settle() // the error returned is the deletion's; a failed write-back is retried by the next change
			}
			return fmt.Errorf("raftlog: delete range %d..%d: %w", lo, hi, err)
		}
		s.setUndo(kept, false)
	default:
		return &RefusedError{Op: "delete range", Index: lo, Err: ErrRange,
			Reason: fmt.Sprintf("%d..%d lies strictly inside %d..%d and would leave a hole", lo, hi, first, last)}
	}
	return nil
}

// RestoringSnapshot notes that raft is restoring the snapshot at index
// (replica.SnapshotRestoreNoter). Raft v1.8.0 follows the install of a
// leader's snapshot with a deletion of the whole log (removeOldLogs) but
// leaves its own last-log index where the log ended: were the entries
// above the snapshot deleted too, the next AppendEntries would be taken
// after that index, and the entries between the snapshot and it would be
// in neither. So the next deletion of everything keeps the entries above
// index, as raft's own compaction of a non-monotonic log would; entries
// that conflict with the leader's are then cut as any suffix is.
func (s *LogStore) RestoringSnapshot(index uint64) {
	s.mu.Lock()
	s.restoring, s.restoringSet = index, true
	s.mu.Unlock()
}

// IsMonotonic reports true: the log holds no gaps, so raft deletes every
// entry after a snapshot install instead of leaving one.
func (s *LogStore) IsMonotonic() bool { return true }

// StageCommitIndex stages idx, to be persisted with the next StoreLogs, or
// by Close if none follows. raft stages its commit index before each
// StoreLogs; a caller may stage what it knows committed too (the store
// stages its state machine's applied index before Close): a committed
// index is persisted only as far as the log reaches (capped at
// LastIndex).
func (s *LogStore) StageCommitIndex(idx uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A commit index never goes back; a lower one (raft's right after a
	// restart, from the capped replay) would only delay the next Open's.
	s.staged = max(s.staged, idx)
	return nil
}

// GetCommitIndex is the newest persisted commit index, never above
// LastIndex (0 for an empty log).
func (s *LogStore) GetCommitIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, journal.ErrClosed
	}
	_, last, empty := s.bounds()
	if empty {
		return 0, nil
	}
	return min(s.commit, last), nil
}

// Close records the commit floor, raised to the staged commit index, in
// the journal's ACKNOWLEDGED marker (so an emptied tail is noticed at the
// next Open even without the entries that carried it, and the next Open's
// GetCommitIndex reaches every entry known committed, the last batch's
// included: raft persists a batch's commit only with the next one) and
// closes the journal.
func (s *LogStore) Close() error {
	s.forget()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return journal.ErrClosed
	}
	s.closed = true
	// An unsettled suffix deletion: written back if owed, else it stands
	// (raft reads LastIndex afresh at the next start).
	undoErr := s.settle()
	s.setUndo(nil, false)
	_, last, empty := s.bounds()
	err := undoErr
	if floor := min(max(s.commit, s.staged), last); !empty && floor > s.j.Floor().Index {
		err = errors.Join(err, s.j.RaiseFloor(floor))
	}
	return errors.Join(err, s.j.Close())
}

// suffix reads the entries lo..last a suffix deletion is about to remove,
// for LogStore.undo; nil when they hold more than undoMaxBytes. mu is
// held.
func (s *LogStore) suffix(lo, last uint64) ([]*raft.Log, error) {
	var kept []*raft.Log
	n := 0
	for i := lo; i <= last; i++ {
		l := new(raft.Log)
		if err := s.GetLog(i, l); err != nil {
			return nil, err
		}
		if n += logBytes(l); n > undoMaxBytes {
			return nil, nil
		}
		kept = append(kept, l)
	}
	return kept, nil
}
