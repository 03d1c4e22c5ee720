package raftlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// countFSM counts the commands applied to it; its snapshot is the count.
type countFSM struct{ n atomic.Int64 }

func (f *countFSM) Apply(*raft.Log) any { return f.n.Add(1) }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	return countSnapshot(f.n.Load()), nil
}
func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) != 8 {
		return fmt.Errorf("count snapshot of %d bytes: %v", len(b), err)
	}
	f.n.Store(int64(binary.LittleEndian.Uint64(b)))
	return nil
}

type countSnapshot int64

func (c countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.LittleEndian.AppendUint64(nil, uint64(c))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (countSnapshot) Release() {}

// startNode runs a one-voter raft on the stores in dir and waits (bounded)
// until it leads.
func startNode(t *testing.T, dir string, fsm raft.FSM) (*raft.Raft, *LogStore, *StableStore) {
	t.Helper()
	logs := openStore(t, filepath.Join(dir, "log"), Options{})
	stable, err := OpenStable(filepath.Join(dir, "stable"), nil)
	if err != nil {
		t.Fatal(err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.LogOutput = io.Discard
	conf.RestoreCommittedLogs = true
	conf.TrailingLogs = 0
	_, trans := raft.NewInmemTransport("a")
	snaps, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := raft.HasExistingState(logs, stable, snaps); err != nil {
		t.Fatal(err)
	} else if !ok {
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans,
			raft.Configuration{Servers: []raft.Server{{ID: "a", Address: trans.LocalAddr()}}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.LeaderCh():
	case <-time.After(10 * time.Second): // a bound, not a measurement
		t.Fatal("no leadership within 10 s")
	}
	return r, logs, stable
}

// TestRaftRunsOnTheStores: hashicorp/raft itself bootstraps, commits,
// restarts and replays committed entries (RestoreCommittedLogs, from the
// commit index the entries carry) on a LogStore and a StableStore.
func TestRaftRunsOnTheStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsm := &countFSM{}
	r, logs, _ := startNode(t, dir, fsm)
	for i := range 50 {
		if err := r.Apply(fmt.Appendf(nil, "cmd-%d", i), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			// raft v1.8.0 with RestoreCommittedLogs restores the cluster
			// configuration only from a snapshot or from entries above
			// the persisted commit index (api.go, NewRaft's scan starts
			// after lastApplied): without this snapshot the restarted
			// node forgets its voters. The snapshot also compacts the
			// log (a prefix DeleteRange) with TrailingLogs 0.
			if err := r.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	term, err := strconv.ParseUint(r.Stats()["term"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := logs.Close(); err != nil {
		t.Fatal(err)
	}

	fsm2 := &countFSM{}
	r2, logs2, stable2 := startNode(t, dir, fsm2)
	defer func() {
		r2.Shutdown()
		logs2.Close()
	}()
	if got, _ := stable2.GetUint64([]byte("CurrentTerm")); got < term || got == 0 {
		t.Fatalf("CurrentTerm %d after restart, was %d", got, term)
	}
	if err := r2.Barrier(time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if fsm2.n.Load() != 50 {
		t.Fatalf("the restarted node applied %d commands, want 50", fsm2.n.Load())
	}
	if f, _ := logs2.FirstIndex(); f <= 1 {
		t.Fatalf("first index %d: the snapshot compacted nothing", f)
	}
	if c, _ := logs2.GetCommitIndex(); c < 50 {
		t.Fatalf("commit index %d after the barrier", c)
	}
}
