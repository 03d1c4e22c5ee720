package statestore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/raftlog"
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
// command is decoded and checked record by record; any other type only
// moves the applied index. A refused entry (an error, the state
// unchanged) is refused on every node alike.
func (r *ClusterReplay) Apply(l *raft.Log) error {
	if err, ok := r.f.Apply(l).(error); ok {
		return err
	}
	return nil
}

// View is the state rebuilt so far.
func (r *ClusterReplay) View() *materialize.View { return r.f.s.home.published() }

// DecodeRaftEntry decodes the journal records one store command (a raft
// entry of type LogCommand) carries, as every node's state machine does.
func DecodeRaftEntry(index uint64, data []byte, lim journal.Limits) ([]*journal.Record, error) {
	return decodeEntry(index, data, lim)
}

// RecoverCluster is raft's documented recovery for a lost quorum, on the
// stopped node in opts.Dir: its log, votes and snapshots with the store's
// state machine, and peers as the only configuration (raft.RecoverCluster:
// every entry the node holds is applied, a snapshot of the result is
// written carrying peers, and the log is emptied). Every node the
// recovered cluster keeps must be recovered with the same peers before any
// of them starts. It takes the node's LOCK, so it refuses while a process
// has the node open.
func RecoverCluster(opts Options, peers []Peer) error {
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
	logs, err := raftlog.Open(filepath.Join(s.root, "journal"), raftlog.Options{SegmentSize: opts.SegmentSize, NoSync: opts.NoSync})
	if err != nil {
		return wrapErr(Storage, "journal", err)
	}
	stable, err := raftlog.OpenStable(filepath.Join(s.root, StableFileName), opts.Faults)
	if err != nil {
		logs.Close()
		return wrapErr(Storage, StableFileName, err)
	}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(s.root, "raft-snapshots"), replica.DefaultSnapshotRetain, io.Discard)
	if err != nil {
		logs.Close()
		return wrapErr(Storage, "raft-snapshots", err)
	}
	s.home = &journalBackend{}
	s.home.view.Store(materialize.New())
	conf := raft.DefaultConfig()
	// RecoverCluster only validates the config, which needs some ID; the
	// node's own is not recorded in its directory, and the new
	// configuration is all that the recovered log carries.
	conf.LocalID = raft.ServerID(peers[0].ID)
	conf.Logger = nil
	conf.LogOutput = io.Discard
	var cfg raft.Configuration
	for _, p := range peers {
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	_, trans := raft.NewInmemTransport("")
	f := &fsm{s: s, changed: make(chan struct{})}
	rerr := raft.RecoverCluster(conf, f, logs, stable, snaps, trans, cfg)
	if rerr == nil {
		s.log.Info("state store: cluster recovered", slog.Int("voters", len(peers)), slog.Uint64("index", f.appliedIndex()))
	}
	if err := logs.Close(); rerr == nil && err != nil {
		rerr = err
	}
	if rerr != nil {
		return wrapErr(Storage, "raft", fmt.Errorf("recover the cluster in %s: %w", s.root, rerr))
	}
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
