package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/keeppeek/statestore/internal/clusterkill"
)

// The cluster's nodes are processes, as an operator runs them (and as the
// failover row needs: SIGKILL ends a process, not a goroutine). qualify
// re-executes itself with envClusterNode holding a clusterkill.NodeConfig; the
// child serves that node until its stdin ends, so no node outlives the
// parent.
const envClusterNode = "QUALIFY_CLUSTER_NODE"

// envNodeProfile, when set in qualify's environment, names a directory
// where every node process writes a CPU profile of its life
// (node-ID-PID.pprof; a node killed by SIGKILL leaves none): where a
// cluster row's time goes inside the nodes, which qualify's own
// --cpuprofile does not see.
const envNodeProfile = "QUALIFY_NODE_CPUPROFILE"

// leaderPoll is how often a node checks whether it leads: the lag of the
// parent's view of the leader.
const leaderPoll = 2 * time.Millisecond

// clusterNodeMain runs the node described by the JSON config cfg (a
// clusterkill.NodeConfig: ID, Dir, Peers) and returns the process's exit
// code. The node is clusterkill's, as an operator runs it: the durable
// default log and replica's default timeouts, no fault hooks, every
// owner's bearer token mapped to its principal as ws_cas does; it serves
// until its stdin ends, and takes clusterkill.ControlTransfer there.
func clusterNodeMain(cfg string) int {
	var c clusterkill.NodeConfig
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
	table := tokenTable{}
	for _, o := range newOwners(casKeys) {
		table[tokenOf(o)] = o.Principal
	}
	c.Authenticator, c.ReplicaDefaults, c.LeaderPoll, c.Faults = table, true, leaderPoll, false
	if err := clusterkill.ServeLines(c, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "qualify: cluster node:", err)
		return 3
	}
	return 0
}
