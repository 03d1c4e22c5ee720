package statestore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/replica/consensus"
)

// Offline work on a stopped cluster node's directory (kpjournal's compare
// and recover-cluster): the state machine is the one raft drives in a
// running node (fsm.go), so an image rebuilt here, or the snapshot a
// recovery writes, is exactly what the node itself would have built.

// ClusterReplay rebuilds a cluster node's state offline with the store's
// own raft state machine: a snapshot (a checkpoint image) restored, then
// raft entries applied in order, each checked as a running node checks it.
type ClusterReplay struct{ f *fsm }

// NewClusterReplay is an empty state machine for opts' limits and schemas
// (opts.Dir names the node; nothing is opened or written there).
func NewClusterReplay(opts Options) (*ClusterReplay, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.home = &journalBackend{}
	s.home.view.Store(materialize.New())
	return &ClusterReplay{f: &fsm{s: s, changed: make(chan struct{})}}, nil
}

// Restore replaces the state with a raft snapshot's data (a checkpoint
// image), checked as a backup is.
func (r *ClusterReplay) Restore(data io.Reader) error { return r.f.Restore(io.NopCloser(data)) }

// Apply applies one raft entry as a node's state machine does: a store
// command (consensus.EntryCommand; replica.EntryOf converts a raft.Log) is
// decoded and checked record by record; any other type only moves the
// applied index. A refused entry (an error, the state unchanged) is
// refused on every node alike.
func (r *ClusterReplay) Apply(l *consensus.Entry) error {
	if err, ok := r.f.Apply(l).(error); ok {
		return err
	}
	return nil
}

// View is the state rebuilt so far.
func (r *ClusterReplay) View() *materialize.View { return r.f.s.home.published() }

// DecodeRaftEntry decodes the journal records one store command (a raft
// entry of type LogCommand, consensus.EntryCommand) carries, as every node's state machine does.
func DecodeRaftEntry(index uint64, data []byte, lim journal.Limits) ([]*journal.Record, error) {
	return decodeEntry(index, data, lim)
}

// RecoverCluster is the engine's recovery for a lost quorum, on the
// stopped node in opts.Dir: its log, votes and snapshots with the store's
// state machine, and peers as the only configuration (replica.Raft's is
// raft.RecoverCluster: every entry the node holds is applied, a snapshot
// of the result is written carrying peers, and the log is emptied). Every
// node the recovered cluster keeps must be recovered with the same peers
// before any of them starts. It takes the node's LOCK, so it refuses while
// a process has the node open. A nil engine is INVALID_ARGUMENT on field
// "Engine".
func RecoverCluster(opts Options, peers []Peer, engine consensus.Engine) error {
	if engine == nil {
		return newErr(InvalidArgument, "Engine", "recovering a cluster node needs its replication engine (replica.Raft)")
	}
	if err := checkRecoveryPeers(peers); err != nil {
		return err
	}
	s, err := newStore(opts)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.root, StableFileName)); err != nil {
		return wrapErr(InvalidArgument, "Dir", fmt.Errorf("%s holds no cluster node (no %s): %w", s.root, StableFileName, err))
	}
	lock, err := disk.LockFile(filepath.Join(s.root, "LOCK"))
	if errors.Is(err, disk.ErrLocked) {
		return wrapErr(Unavailable, "LOCK", fmt.Errorf("the node in %s is open in a running process: stop it first: %w", s.root, err))
	}
	if err != nil {
		return wrapErr(Storage, "LOCK", err)
	}
	defer lock.Release()
	s.home = &journalBackend{}
	s.home.view.Store(materialize.New())
	cfg := consensus.RecoverConfig{
		Log: consensus.LogOptions{JournalDir: filepath.Join(s.root, "journal"), StableFile: filepath.Join(s.root, StableFileName),
			SegmentSize: opts.SegmentSize, NoSync: opts.NoSync, Faults: opts.Faults},
		SnapshotDir: filepath.Join(s.root, "raft-snapshots"),
	}
	for _, p := range peers {
		cfg.Peers = append(cfg.Peers, consensus.Peer{ID: p.ID, Addr: p.RaftAddr})
	}
	f := &fsm{s: s, changed: make(chan struct{})}
	rerr := engine.Recover(cfg, f)
	if fe := (*consensus.FileError)(nil); errors.As(rerr, &fe) {
		return wrapErr(Storage, fe.File, fe.Err)
	}
	if rerr != nil {
		return wrapErr(Storage, "raft", fmt.Errorf("recover the cluster in %s: %w", s.root, rerr))
	}
	s.log.Info("state store: cluster recovered", slog.Int("voters", len(peers)), slog.Uint64("index", f.appliedIndex()))
	return nil
}

// checkRecoveryPeers refuses a configuration raft would refuse, naming the
// peer: each needs an ID and a raft address, both unique.
func checkRecoveryPeers(peers []Peer) error {
	if len(peers) == 0 {
		return newErr(InvalidArgument, "Peers", "a recovered cluster needs at least one voter")
	}
	ids, addrs := map[string]int{}, map[string]int{}
	for i, p := range peers {
		switch {
		case p.ID == "":
			return newErr(InvalidArgument, fmt.Sprintf("Peers[%d].ID", i), "empty")
		case p.RaftAddr == "":
			return newErr(InvalidArgument, fmt.Sprintf("Peers[%d].RaftAddr", i), "peer %q has no raft address", p.ID)
		}
		if j, dup := ids[p.ID]; dup {
			return newErr(InvalidArgument, fmt.Sprintf("Peers[%d].ID", i), "%q is Peers[%d]'s too", p.ID, j)
		}
		if j, dup := addrs[p.RaftAddr]; dup {
			return newErr(InvalidArgument, fmt.Sprintf("Peers[%d].RaftAddr", i), "%q is Peers[%d]'s too", p.RaftAddr, j)
		}
		ids[p.ID], addrs[p.RaftAddr] = i, i
	}
	return nil
}
