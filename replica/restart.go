package replica

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Restart replay. A log store that persists raft's commit index
// (raft.CommitTrackingLogStore, as replica/raftlog's does) turns on
// raft.Config.RestoreCommittedLogs: NewRaft applies the committed entries
// it holds to the state machine before it returns, so a restarted node
// serves its state (stale reads, its watches' snapshots) before any leader
// is known. Two traps of hashicorp/raft v1.8.0 sit on that path, and
// startLog steps around both by reporting NewRaft a lower commit index:
//
//   - NewRaft restores the configuration only from the newest snapshot and
//     from the entries above the restored commit index (its configuration
//     scan starts after lastApplied, which the replay has moved to the
//     commit index, and applying an entry records no configuration). A node
//     whose configuration entries are all committed and not in a snapshot
//     would restart with no voters and never elect. So the commit index
//     NewRaft reads stops below the newest configuration entry above the
//     newest snapshot: the scan then finds it, exactly as it does with the
//     option off; the entries from it on are applied once a leader's
//     commit index arrives, as without the option.
//   - The replay queues batches of MaxAppendEntries entries on raft's FSM
//     channel (128 deep) before the goroutine draining it is started: more
//     than 128 batches and NewRaft blocks forever. So NewRaft replays at
//     most fsmQueueBatches batches beyond the snapshot; the rest follows,
//     again, from the leader's commit index.
//
// So the cap only ever bites right after a membership change (the
// bootstrap's included), and configFSM takes a raft snapshot as soon as a
// configuration entry is applied, which puts the configuration in the
// snapshot and lifts the cap for every later restart. A crash between
// the two costs only the replay before a leader, never the configuration.

// fsmQueueBatches is how many batches NewRaft's replay may queue: one less
// than raft's FSM channel holds, which raft v1.8.0 makes 128 deep.
const fsmQueueBatches = 127

// restart is what the wrappers below share while NewRaft runs: which
// snapshot raft restored (the snapshot store sees it opened, the state
// machine sees it restored: raft falls back to older snapshots when the
// newest fails), and the cap computed from it at NewRaft's one
// GetCommitIndex.
type restart struct {
	maxAppend int
	mu        sync.Mutex
	opened    uint64 // index of the snapshot last opened
	restored  uint64 // index of the snapshot last restored, 0 for none
	capped    bool
	cap       uint64
}

// startLog is the node's log store: every call is the inner store's, but
// GetCommitIndex, which only NewRaft's replay reads, reports at most the
// cap RestartCap gives (see the comment above).
type startLog struct {
	raft.LogStore
	track raft.CommitTrackingLogStore
	st    *restart
}

var (
	_ raft.MonotonicLogStore      = (*startLog)(nil)
	_ raft.CommitTrackingLogStore = (*startLog)(nil)
)

// IsMonotonic is the inner store's answer: raft asks the store it holds.
func (l *startLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// StageCommitIndex stages idx in the inner store.
func (l *startLog) StageCommitIndex(idx uint64) error { return l.track.StageCommitIndex(idx) }

// GetCommitIndex is the inner store's, at most the cap computed at its
// first call (NewRaft's, right after it restored a snapshot).
func (l *startLog) GetCommitIndex() (uint64, error) {
	idx, err := l.track.GetCommitIndex()
	if err != nil {
		return 0, err
	}
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	if !l.st.capped {
		c, err := RestartCap(l.LogStore, idx, l.st.restored, l.st.maxAppend)
		if err != nil {
			return 0, err
		}
		l.st.cap, l.st.capped = c, true
	}
	return min(idx, l.st.cap), nil
}

// RestartCap is the commit index a node restarting on logs, with the
// snapshot at snapIndex restored (0: none), replays to in NewRaft: commit,
// below the newest configuration entry above snapIndex, and at most
// fsmQueueBatches batches of maxAppend entries beyond snapIndex.
func RestartCap(logs raft.LogStore, commit, snapIndex uint64, maxAppend int) (uint64, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, err
	}
	limit := min(commit, snapIndex+fsmQueueBatches*uint64(maxAppend))
	// The newest configuration entry above the snapshot, scanned from the
	// end: a recent one is found at once, and with none the scan reads
	// what the replay reads next anyway.
	lo := max(snapIndex+1, first, 1)
	var e raft.Log
	for i := last; i >= lo; i-- {
		if err := logs.GetLog(i, &e); err != nil {
			return 0, fmt.Errorf("replica: scan the log for its configuration at index %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			return min(limit, i-1), nil
		}
	}
	return limit, nil
}

// startSnapshots is the node's snapshot store, noting which snapshot raft
// opens so the state machine can tell which one it restored.
type startSnapshots struct {
	raft.SnapshotStore
	st *restart
}

// Open is the inner store's Open, noting the snapshot's index.
func (s *startSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.st.mu.Lock()
		s.st.opened = meta.Index
		s.st.mu.Unlock()
	}
	return meta, rc, err
}

// configFSM is the store's state machine, noting the snapshot it restored
// and told of every configuration entry applied (raft.ConfigurationStore)
// so the node snapshots right after a membership change (see the comment
// above).
type configFSM struct {
	raft.FSM
	st      *restart
	changed chan struct{} // one pending request is enough: it snapshots the newest
}

// Restore is the inner state machine's, noting the snapshot's index.
func (f *configFSM) Restore(rc io.ReadCloser) error {
	if err := f.FSM.Restore(rc); err != nil {
		return err
	}
	f.st.mu.Lock()
	f.st.restored = f.st.opened
	f.st.mu.Unlock()
	return nil
}

// StoreConfiguration asks for a snapshot without waiting: raft calls it
// from the goroutine a snapshot needs.
func (f *configFSM) StoreConfiguration(uint64, raft.Configuration) {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// snapshotAfterChanges takes a snapshot after each configuration change
// until stop closes. A failed attempt is left alone: the cap keeps the
// restart correct, and the next change or raft's own schedule snapshots
// again.
func snapshotAfterChanges(r *raft.Raft, changed <-chan struct{}, stop <-chan struct{}, done func()) {
	defer done()
	for {
		select {
		case <-stop:
			return
		case <-changed:
		}
		select {
		case <-stop:
			return
		default:
		}
		_ = r.Snapshot().Error()
	}
}
