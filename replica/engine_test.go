package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/replica/consensus"
	"github.com/keeppeek/statestore/replica/raftlog"
)

// TestMapError: every raft error the store tells apart is marked with its
// outcome, keeping raft's message and raft's sentinel; others pass as
// they are.
func TestMapError(t *testing.T) {
	t.Parallel()
	other := errors.New("write raft log: no space left on device")
	for _, tc := range []struct {
		err  error
		want error // nil: returned unmarked
	}{
		{raft.ErrNotLeader, consensus.ErrNotLeader},
		{raft.ErrEnqueueTimeout, consensus.ErrNotLeader},
		{raft.ErrLeadershipTransferInProgress, consensus.ErrNotLeader},
		{raft.ErrAbortedByRestore, consensus.ErrNotLeader},
		{fmt.Errorf("apply: %w", raft.ErrNotLeader), consensus.ErrNotLeader},
		{raft.ErrLeadershipLost, consensus.ErrOutcomeUnknown},
		{raft.ErrRaftShutdown, consensus.ErrOutcomeUnknown},
		{raft.ErrNothingNewToSnapshot, consensus.ErrNothingNewToSnapshot},
		{other, nil},
	} {
		got := MapError(tc.err)
		if got.Error() != tc.err.Error() || !errors.Is(got, tc.err) {
			t.Errorf("%v: mapped to %q, which lost raft's message or error", tc.err, got)
		}
		if tc.want == nil {
			if got != tc.err {
				t.Errorf("%v: marked though the store does not tell it apart", tc.err)
			}
			continue
		}
		if !errors.Is(got, tc.want) {
			t.Errorf("%v: not marked %v", tc.err, tc.want)
		}
	}
	if MapError(nil) != nil {
		t.Error("nil mapped to an error")
	}
}

// TestRaftOpenLog: the default log is raftlog's in the journal directory
// (its journal handed to the store, the applied index staged on Close and
// found at the next open); overriding stores keep no journal; half an
// override is refused naming LogStore.
func TestRaftOpenLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := consensus.LogOptions{JournalDir: filepath.Join(dir, "journal"), StableFile: filepath.Join(dir, "raft-stable"), NoSync: true}
	mem := raft.NewInmemStore()
	var ce *consensus.ConfigError
	if _, err := (&Raft{LogStore: mem}).OpenLog(opts); !errors.As(err, &ce) || ce.Field != "LogStore" {
		t.Fatalf("LogStore alone: %v, want a ConfigError naming LogStore", err)
	}
	if _, err := (&Raft{StableStore: mem}).OpenLog(opts); !errors.As(err, &ce) || ce.Field != "LogStore" {
		t.Fatalf("StableStore alone: %v, want a ConfigError naming LogStore", err)
	}
	l, err := (&Raft{LogStore: mem, StableStore: mem}).OpenLog(opts)
	if err != nil || l.Journal() != nil || l.TailCut() != nil || l.Close(5) != nil {
		t.Fatalf("overriding stores: %v, journal %v", err, l.Journal())
	}

	l, err = (&Raft{}).OpenLog(opts)
	if err != nil {
		t.Fatal(err)
	}
	if l.Journal() == nil || l.TailCut() != nil {
		t.Fatalf("the default log: journal %v, tail cut %v", l.Journal(), l.TailCut())
	}
	nl := l.(*nodeLog)
	var logs []*raft.Log
	for i := uint64(1); i <= 3; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := nl.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := nl.stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(3); err != nil {
		t.Fatal(err)
	}
	again, err := raftlog.Open(opts.JournalDir, raftlog.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if c, err := again.GetCommitIndex(); err != nil || c != 3 {
		t.Fatalf("commit index after Close(3): %d, %v", c, err)
	}
}

// snapFSM is a consensus.FSM whose snapshot is the commands applied.
type snapFSM struct {
	mu   sync.Mutex
	data []byte
}

func (f *snapFSM) Apply(e *consensus.Entry) any {
	if e.Type != consensus.EntryCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, e.Data...)
	return fmt.Sprintf("applied %s at %d", e.Data, e.Index)
}

func (f *snapFSM) Snapshot() (consensus.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &bytesSnapshot{b: bytes.Clone(f.data)}, nil
}

func (f *snapFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	f.mu.Lock()
	f.data = b
	f.mu.Unlock()
	return err
}

type bytesSnapshot struct {
	b         []byte
	fail      error
	persisted int
	released  int
}

func (s *bytesSnapshot) Persist(w io.Writer) error {
	if s.fail != nil {
		return s.fail
	}
	_, err := w.Write(s.b)
	return err
}
func (s *bytesSnapshot) Persisted() { s.persisted++ }
func (s *bytesSnapshot) Release()   { s.released++ }

// fakeSink is a raft.SnapshotSink that records how it ended.
type fakeSink struct {
	bytes.Buffer
	closeErr          error
	closed, cancelled bool
}

func (*fakeSink) ID() string      { return "fake" }
func (s *fakeSink) Cancel() error { s.cancelled = true; return nil }
func (s *fakeSink) Close() error  { s.closed = true; return s.closeErr }

// TestRaftSnapshotPersist: a snapshot is counted persisted only once
// raft's sink closed without error; one that fails to write is cancelled.
func TestRaftSnapshotPersist(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                       string
		fail, closeErr             error
		persisted, closed, cancels bool
	}{
		{name: "ok", persisted: true, closed: true},
		{name: "write fails", fail: errors.New("encode"), cancels: true},
		{name: "close fails", closeErr: errors.New("rename"), closed: true},
	} {
		sn := &bytesSnapshot{b: []byte("state"), fail: tc.fail}
		sink := &fakeSink{closeErr: tc.closeErr}
		err := raftSnapshot{sn}.Persist(sink)
		if (err == nil) != (tc.fail == nil && tc.closeErr == nil) || (sn.persisted == 1) != tc.persisted ||
			sink.closed != tc.closed || sink.cancelled != tc.cancels {
			t.Errorf("%s: err %v, persisted %d, closed %v, cancelled %v", tc.name, err, sn.persisted, sink.closed, sink.cancelled)
		}
		raftSnapshot{sn}.Release()
		if sn.released != 1 {
			t.Errorf("%s: released %d times", tc.name, sn.released)
		}
	}
}

// TestRaftServeRPCLoopback: the handler is served on the Loopback until
// Close, and the node's caller reaches it.
func TestRaftServeRPCLoopback(t *testing.T) {
	t.Parallel()
	lb := NewLoopback()
	rpc, err := (&Raft{Loopback: lb}).ServeRPC("rpc-a", func(_ context.Context, req []byte) ([]byte, error) {
		return append([]byte("re: "), req...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := rpc.Call(context.Background(), "rpc-a", []byte("hi")); err != nil || string(out) != "re: hi" {
		t.Fatalf("call = %q, %v", out, err)
	}
	if err := rpc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Call(context.Background(), "rpc-a", nil); !errors.Is(err, consensus.ErrNoPeer) {
		t.Fatalf("after Close: %v, want ErrNoPeer", err)
	}
}

// TestRaftEngineNode: one node through the contract: it leads, an Apply's
// future carries the state machine's answer, a snapshot is taken, and
// after Shutdown a proposal's outcome is unknown.
func TestRaftEngineNode(t *testing.T) {
	t.Parallel()
	e := &Raft{Transport: NewInmemNetwork().Transport("a"), LogStore: raft.NewInmemStore(), SnapshotStore: raft.NewInmemSnapshotStore()}
	e.StableStore = e.LogStore.(*raft.InmemStore)
	if _, err := e.Start(consensus.Config{NodeID: "a", Addr: "a", Peers: []consensus.Peer{{ID: "a", Addr: "a"}}}, nil, &snapFSM{}); err == nil {
		t.Fatal("a log OpenLog did not open was taken")
	}
	log, err := e.OpenLog(consensus.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(consensus.Config{NodeID: "a", Addr: "a"}, log, &snapFSM{}); !errors.As(err, new(*consensus.ConfigError)) {
		t.Fatalf("no peers: %v, want a ConfigError", err)
	}
	f := &snapFSM{}
	n, err := e.Start(consensus.Config{NodeID: "a", Addr: "a", Peers: []consensus.Peer{{ID: "a", Addr: "a"}}}, log, f)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case leads := <-n.LeaderCh():
		if !leads {
			t.Fatal("LeaderCh told of a lost leadership first")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no leadership")
	}
	if n.State() != consensus.Leader || n.CurrentTerm() == 0 || n.ElectionTimeout() != DefaultElectionTimeout {
		t.Fatalf("state %v term %d election timeout %v", n.State(), n.CurrentTerm(), n.ElectionTimeout())
	}
	if id, _ := n.Leader(); id != "a" {
		t.Fatalf("leader %q", id)
	}
	fut := n.Apply([]byte("x"), time.Second)
	if err := fut.Error(); err != nil {
		t.Fatal(err)
	}
	if fut.Response() != fmt.Sprintf("applied x at %d", fut.Index()) || n.LastIndex() < fut.Index() {
		t.Fatalf("response %v at %d, last index %d", fut.Response(), fut.Index(), n.LastIndex())
	}
	if err := n.Barrier(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.VerifyLeader(); err != nil {
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if n.State() != consensus.Shutdown {
		t.Fatalf("after Shutdown: %v", n.State())
	}
	if err := n.Apply([]byte("y"), time.Second).Error(); !errors.Is(err, consensus.ErrOutcomeUnknown) {
		t.Fatalf("a proposal after Shutdown: %v, want ErrOutcomeUnknown", err)
	}
}
