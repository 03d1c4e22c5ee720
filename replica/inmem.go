package replica

import (
	"sync"

	"github.com/hashicorp/raft"
)

// InmemNetwork is a set of in-memory raft transports, every one connected
// to every other: the test hook for a cluster in one process. Isolate and
// Heal cut and restore one node's links.
type InmemNetwork struct {
	mu    sync.Mutex
	nodes map[string]*raft.InmemTransport
}

// NewInmemNetwork returns an empty network.
func NewInmemNetwork() *InmemNetwork { return &InmemNetwork{nodes: map[string]*raft.InmemTransport{}} }

// Transport returns the transport of addr, connected both ways to every
// transport made before it. Asking twice for one address returns a new
// transport in its place (a restarted node).
func (n *InmemNetwork) Transport(addr string) *raft.InmemTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, t := raft.NewInmemTransport(raft.ServerAddress(addr))
	n.nodes[addr] = t
	for a, o := range n.nodes {
		if a == addr {
			continue
		}
		t.Connect(raft.ServerAddress(a), o)
		o.Connect(raft.ServerAddress(addr), t)
	}
	return t
}

// Isolate cuts every link to and from addr.
func (n *InmemNetwork) Isolate(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.nodes[addr]
	if !ok {
		return
	}
	t.DisconnectAll()
	for a, o := range n.nodes {
		if a != addr {
			o.Disconnect(raft.ServerAddress(addr))
		}
	}
}

// Heal restores every link to and from addr.
func (n *InmemNetwork) Heal(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.nodes[addr]
	if !ok {
		return
	}
	for a, o := range n.nodes {
		if a != addr {
			t.Connect(raft.ServerAddress(a), o)
			o.Connect(raft.ServerAddress(addr), t)
		}
	}
}
