package replica

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// countFSM records the commands it applied.
type countFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return nil
}

func (f *countFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots here") }
func (f *countFSM) Restore(io.ReadCloser) error         { return nil }

// TestNodesBootstrapElectReplicateAndTransfer: three nodes on an
// InmemNetwork bootstrap the same configuration once, elect a leader,
// replicate a command everywhere, hand leadership over and survive the
// isolation of the leader.
func TestNodesBootstrapElectReplicateAndTransfer(t *testing.T) {
	t.Parallel()
	network := NewInmemNetwork()
	peers := []Peer{{ID: "a", Addr: "a"}, {ID: "b", Addr: "b"}, {ID: "c", Addr: "c"}}
	nodes := map[string]*Node{}
	fsms := map[string]*countFSM{}
	for _, p := range peers {
		fsms[p.ID] = &countFSM{}
		n, err := Start(Config{NodeID: p.ID, Addr: p.Addr, Peers: peers, Transport: network.Transport(p.Addr)}, fsms[p.ID])
		if err != nil {
			t.Fatal(err)
		}
		nodes[p.ID] = n
		defer n.Shutdown()
	}
	leader := func(not string) *Node {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for id, n := range nodes {
				if id != not && n.Raft().State() == raft.Leader {
					return n
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no leader")
		return nil
	}
	l := leader("")
	if err := l.Raft().Apply([]byte("one"), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	members, err := l.Members()
	if err != nil || len(members) != 3 || !members[0].Voter {
		t.Fatalf("members = %+v, %v", members, err)
	}
	if id, addr := nodes["b"].Leader(); id != l.ID() || addr != l.ID() {
		t.Fatalf("b sees leader %q at %q, want %q", id, addr, l.ID())
	}
	var to string
	for id := range nodes {
		if id != l.ID() {
			to = id
			break
		}
	}
	if err := l.TransferLeadership(to); err != nil {
		t.Fatal(err)
	}
	l2 := leader(l.ID())
	if l2.ID() != to {
		t.Fatalf("leadership went to %s, asked for %s", l2.ID(), to)
	}
	network.Isolate(l2.ID())
	l3 := leader(l2.ID())
	if err := l3.Raft().Apply([]byte("two"), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	network.Heal(l2.ID())
	deadline := time.Now().Add(20 * time.Second)
	for _, f := range fsms {
		for len(f.applied()) < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := f.applied(); len(got) != 2 || got[0] != "one" || got[1] != "two" {
			t.Fatalf("a node applied %q", got)
		}
	}
}
