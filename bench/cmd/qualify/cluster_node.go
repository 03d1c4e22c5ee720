package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The cluster's nodes are processes, as an operator runs them (and as the
// failover row needs: SIGKILL ends a process, not a goroutine). qualify
// re-executes itself with envClusterNode holding a clusterNodeConfig; the
// child serves that node until its stdin ends, so no node outlives the
// parent.
const envClusterNode = "QUALIFY_CLUSTER_NODE"

// envNodeProfile, when set in qualify's environment, names a directory
// where every node process writes a CPU profile of its life
// (node-ID-PID.pprof; a node killed by SIGKILL leaves none): where a
// cluster row's time goes inside the nodes, which qualify's own
// --cpuprofile does not see.
const envNodeProfile = "QUALIFY_NODE_CPUPROFILE"

// clusterPeer is one node's addresses on 127.0.0.1.
type clusterPeer struct {
	ID       string
	RaftAddr string
	RPCAddr  string
	WSAddr   string
}

// clusterNodeConfig is what a node process is started with.
type clusterNodeConfig struct {
	ID    string
	Dir   string
	Peers []clusterPeer
}

// Lines a node prints on stdout, and the commands it reads on stdin.
const (
	nodeServing     = "serving"     // the store is open and its WebSocket listener up
	nodeReady       = "ready"       // a leader is known and this node caught up
	nodeLeader      = "leader"      // this node leads
	nodeFollower    = "follower"    // this node stopped leading
	nodeTransferred = "transferred" // answer to cmdTransfer: the transfer completed
	nodeTransferErr = "transfer-error"
	cmdTransfer     = "transfer" // TransferLeadership("") at this node
)

// leaderPoll is how often a node checks whether it leads: the lag of the
// parent's view of the leader.
const leaderPoll = 2 * time.Millisecond

// clusterNodeMain runs the node described by the JSON config cfg and
// returns the process's exit code.
func clusterNodeMain(cfg string) int {
	var c clusterNodeConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, "qualify: cluster node config:", err)
		return 2
	}
	if dir := os.Getenv(envNodeProfile); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", c.ID, os.Getpid())))
		if err != nil {
			fmt.Fprintln(os.Stderr, "qualify: cluster node profile:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "qualify: cluster node profile:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if err := runClusterNode(c, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "qualify: cluster node:", err)
		return 3
	}
	return 0
}

// runClusterNode opens the node (statestore.OpenCluster over TCP with the
// durable default log and replica's default timeouts) and serves the wire
// protocol over WebSocket, every owner's bearer token mapped to its
// principal as ws_cas does, until in ends.
func runClusterNode(cfg clusterNodeConfig, in io.Reader, out io.Writer) error {
	var self *clusterPeer
	var peers []statestore.Peer
	for i, p := range cfg.Peers {
		peers = append(peers, statestore.Peer{ID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr})
		if p.ID == cfg.ID {
			self = &cfg.Peers[i]
		}
	}
	if self == nil {
		return fmt.Errorf("node %q is not among the peers", cfg.ID)
	}
	s, err := statestore.OpenCluster(statestore.Options{Dir: cfg.Dir}, statestore.ClusterOptions{
		NodeID: cfg.ID, RaftAddr: self.RaftAddr, RPCAddr: self.RPCAddr, Peers: peers})
	if err != nil {
		return fmt.Errorf("node %s: open: %w", cfg.ID, err)
	}
	table := tokenTable{}
	for _, o := range newOwners(casKeys) {
		table[tokenOf(o)] = o.Principal
	}
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{Authenticator: table})
	if err != nil {
		return errors.Join(err, s.Close())
	}
	ln, err := net.Listen("tcp", self.WSAddr)
	if err != nil {
		return errors.Join(fmt.Errorf("node %s: listen: %w", cfg.ID, err), h.Close(), s.Close())
	}
	mux := http.NewServeMux()
	mux.Handle(client.WebSocketPath, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, line)
	}
	say(nodeServing)
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if sc.Text() == cmdTransfer {
				if err := s.Cluster().TransferLeadership(""); err != nil {
					say(nodeTransferErr + " " + err.Error())
				} else {
					say(nodeTransferred)
				}
			}
		}
	}()
	go func() {
		select {
		case <-s.Cluster().Ready():
			say(nodeReady)
		case <-stop:
		}
	}()
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	leading := false
	var serr error
loop:
	for {
		select {
		case <-stop:
			break loop
		case serr = <-served:
			break loop
		case <-tick.C:
			if l := s.Cluster().IsLeader(); l != leading {
				leading = l
				if l {
					say(nodeLeader)
				} else {
					say(nodeFollower)
				}
			}
		}
	}
	err = errors.Join(h.Close(), srv.Close())
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, s.Close())
}
