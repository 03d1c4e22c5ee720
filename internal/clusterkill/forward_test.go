package clusterkill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/loopback"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/schema"
)

const envForwardChild = "CLUSTERKILL_FORWARD_CHILD"

// slowLog is raft's in-memory log whose LastIndex waits for release: it
// holds OpenCluster inside replica.Start (raft.HasExistingState reads it).
type slowLog struct {
	*raft.InmemStore
	called  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (l *slowLog) LastIndex() (uint64, error) {
	l.once.Do(func() { close(l.called) })
	<-l.release
	return l.InmemStore.LastIndex()
}

// forwardChild opens a node whose raft start is held, sends its
// forwarding port a forwarded put (what a follower that still takes this
// restarting node for the leader it was sends), and exits 0 once the call
// was answered.
func forwardChild() {
	addrs, err := loopback.FreeAddrs(2)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	logs := &slowLog{InmemStore: raft.NewInmemStore(), called: make(chan struct{}), release: make(chan struct{})}
	peers := []statestore.Peer{{ID: "a", RaftAddr: addrs[0], RPCAddr: addrs[1]}}
	dir, _ := os.MkdirTemp("", "clusterkill-forward-")
	defer os.RemoveAll(dir)
	opened := make(chan error, 1)
	go func() {
		s, err := statestore.OpenCluster(statestore.Options{Dir: dir}, statestore.ClusterOptions{NodeID: "a", RaftAddr: addrs[0], RPCAddr: addrs[1],
			Peers: peers, Engine: &replica.Raft{LogStore: logs, StableStore: logs.InmemStore, SnapshotStore: raft.NewInmemSnapshotStore()}})
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	<-logs.called // the forwarding port is open; raft is not started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// fsm.go's forwarded request, as a follower's clusterNode.forward
	// encodes a put.
	body, _ := json.Marshal(map[string]any{"verb": "put", "principal": map[string]any{"id": Principal.ID, "admin": true},
		"namespace": "group/g", "key": "k", "schema": schema.MediaIntentV1, "document": doc("forwarded")})
	(&replica.TCPCaller{}).Call(ctx, addrs[1], body)
	close(logs.release)
	<-opened
	os.Exit(0)
}

// TestForwardDuringOpenCluster: a forwarded write reaching a node while
// OpenCluster is still starting raft must be answered (UNAVAILABLE, not
// the leader), not crash the process. Today openCluster (cluster.go)
// opens the forwarding port (replica.ServeRPC) before replica.Start sets
// clusterNode.node, and clusterNode.write calls c.node.Leader() on the nil
// node: a nil dereference that killed the process. The kill loop met it as
// a restarted former leader, forwarded to by a follower that had not yet
// noticed the kill, dying at once (and still restarts only after a new
// leader is known). Now such a call is answered not applied until raft
// runs (clusterNode.started), and the forwarder retries elsewhere.
func TestForwardDuringOpenCluster(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envForwardChild+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the node died on a forwarded write during OpenCluster: %v\n%s", err, stderr.String())
	}
}
