package statestore_test

import (
	"errors"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/consensus"
)

// RecoverCluster refuses a configuration raft would refuse, and a
// directory that holds no cluster node, naming the field, before it
// touches anything.
func TestRecoverClusterRefusals(t *testing.T) {
	t.Parallel()
	p := func(id, addr string) statestore.Peer { return statestore.Peer{ID: id, RaftAddr: addr} }
	for _, tc := range []struct {
		name   string
		peers  []statestore.Peer
		field  string
		engine consensus.Engine
	}{
		{"no engine", []statestore.Peer{p("n1", "a")}, "Engine", nil},
		{"none", nil, "Peers", &replica.Raft{}},
		{"no id", []statestore.Peer{p("", "a")}, "Peers[0].ID", &replica.Raft{}},
		{"no address", []statestore.Peer{p("n1", "a"), p("n2", "")}, "Peers[1].RaftAddr", &replica.Raft{}},
		{"duplicate id", []statestore.Peer{p("n1", "a"), p("n1", "b")}, "Peers[1].ID", &replica.Raft{}},
		{"duplicate address", []statestore.Peer{p("n1", "a"), p("n2", "a")}, "Peers[1].RaftAddr", &replica.Raft{}},
		{"not a cluster node", []statestore.Peer{p("n1", "a")}, "Dir", &replica.Raft{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := statestore.RecoverCluster(statestore.Options{Dir: t.TempDir()}, tc.peers, tc.engine)
			var se *statestore.Error
			if !errors.As(err, &se) || se.Code != statestore.InvalidArgument || se.Field != tc.field {
				t.Fatalf("RecoverCluster = %v, want INVALID_ARGUMENT naming %s", err, tc.field)
			}
		})
	}
}

// A ClusterReplay refuses an entry the state machine refuses, as every
// node does, and keeps its state; other entry types only pass.
func TestClusterReplayRefusesWhatTheNodeRefuses(t *testing.T) {
	t.Parallel()
	rp, err := statestore.NewClusterReplay(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	before := rp.View()
	if err := rp.Apply(&consensus.Entry{Index: 1, Type: consensus.EntryOther}); err != nil {
		t.Fatalf("a no-op: %v", err)
	}
	err = rp.Apply(&consensus.Entry{Index: 2, Type: consensus.EntryCommand, Data: []byte("not a batch")})
	var ee *statestore.EntryError
	if !errors.As(err, &ee) || ee.Index != 2 {
		t.Fatalf("a command that does not decode: %v, want an *EntryError at index 2", err)
	}
	if rp.View() != before {
		t.Fatal("a refused entry changed the state")
	}
}
