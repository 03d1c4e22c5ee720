package main

import (
	"os"
	"slices"
	"testing"

	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/natspeer"
	"github.com/keeppeek/statestore/bench/raftpeer"
	"github.com/keeppeek/statestore/bench/report"
)

// TestMain runs a cluster node instead of the tests when the workloads
// under test start one (startCluster re-executes this binary, as it
// re-executes qualify).
func TestMain(m *testing.M) {
	if cfg := os.Getenv(envClusterNode); cfg != "" {
		os.Exit(clusterNodeMain(cfg))
	}
	os.Exit(m.Run())
}

// tinyClusterEnv is the cluster workloads' smallest size: one round of
// 127 serial operations per side, 8 bursts of one operation per writer.
func tinyClusterEnv(t *testing.T) *Env {
	return &Env{Root: t.TempDir(), Ops: 5, Writers: []int{1, 3}, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload}
}

// TestClusterGroupSelectsTheClusterWorkloads: --only cluster runs the
// five cluster workloads, in list order, and nothing else.
func TestClusterGroupSelectsTheClusterWorkloads(t *testing.T) {
	t.Parallel()
	selected, err := selectWorkloads([]string{groupCluster})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range selected {
		names = append(names, w.name)
	}
	want := []string{nameClusterSerial, nameClusterConcurrent, nameFollowerWatch, nameFailover, nameLeaderTransfer}
	if !slices.Equal(names, want) {
		t.Fatalf("--only cluster selects %v, want %v", names, want)
	}
}

// TestClusterSidesAreThreeNodeClusters: every side of the comparison is
// a cluster of three (the store's three processes with one leader, etcd's
// three members, NATS's three servers, raft's three nodes), and owner k's
// client is connected to node k mod 3.
func TestClusterSidesAreThreeNodeClusters(t *testing.T) {
	t.Parallel()
	env := tinyClusterEnv(t)
	var cl closers
	defer func() {
		if err := cl.close(); err != nil {
			t.Error(err)
		}
	}()
	s, err := openClusterSides(env, &cl, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.etcd.(*etcdpeer.DB).Members(); n != clusterSize {
		t.Errorf("etcd runs %d members, want %d", n, clusterSize)
	}
	if n := s.nats.(*natspeer.DB).Servers(); n != clusterSize {
		t.Errorf("NATS runs %d servers, want %d", n, clusterSize)
	}
	for _, f := range []casPeer{s.raft, s.raftlog} {
		if n := f.(*raftpeer.Cluster).Nodes(); n != clusterSize {
			t.Errorf("the floor runs %d raft nodes, want %d", n, clusterSize)
		}
	}
	pids := map[int]bool{}
	for i := range clusterSize {
		pids[s.nodes.proc(i).cmd.Process.Pid] = true
	}
	if len(pids) != clusterSize || pids[os.Getpid()] {
		t.Errorf("node processes %v: want %d of their own", pids, clusterSize)
	}
	for k, c := range s.cas.clients {
		if got, want := c.Endpoint(), s.nodes.endpoints(k % clusterSize)[0]; got != want {
			t.Fatalf("owner %d's client is connected to %s, want %s", k, got, want)
		}
	}
	if err := s.cas.put(0); err != nil {
		t.Fatal(err)
	}
}

// TestClusterWorkloads runs each cluster workload at its smallest size
// and checks that it reports exactly its rows, each with its figures.
func TestClusterWorkloads(t *testing.T) {
	t.Parallel()
	four := func(writers int, names ...string) []row {
		var out []row
		for _, n := range names {
			out = append(out, row{n, writers})
		}
		return out
	}
	concurrent := append(four(1, nameClusterCASConcurrent, etcdpeer.NameClusterCASConcurrent, natspeer.NameR3CASConcurrent, raftpeer.NameFloorConcurrent),
		four(3, nameClusterCASConcurrent, etcdpeer.NameClusterCASConcurrent, natspeer.NameR3CASConcurrent, raftpeer.NameFloorConcurrent)...)
	tests := []struct {
		name   string
		run    func(*Env) ([]harness.Result, error)
		want   []row
		events float64 // the own figures' event count; 0 for the compared rows
	}{
		{nameClusterSerial, runClusterSerial, four(1, "cluster_cas", "etcd_cluster_cas", "nats_kv_r3_cas", "raftwal_cluster_floor", "raftlog_cluster_floor"), 0},
		{nameClusterConcurrent, runClusterConcurrent, concurrent, 0},
		{nameFollowerWatch, runFollowerWatch, []row{{"follower_watch_delivery", 1}}, 5},
		{nameFailover, func(env *Env) ([]harness.Result, error) { return failover(env, 2) }, []row{{"failover", clusterSize}}, 2},
		{nameLeaderTransfer, func(env *Env) ([]harness.Result, error) { return leaderTransfer(env, 2) }, []row{{"leader_transfer", clusterSize}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.run(tinyClusterEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d rows %v, want %v", len(got), got, tc.want)
			}
			for i, r := range got {
				if id := (row{r.Name, r.Writers}); id != tc.want[i] {
					t.Errorf("row %d is %v, want %v", i, id, tc.want[i])
				}
				if r.MaxUs < r.P50us || r.MaxUs <= 0 || len(r.Quantiles) == 0 {
					t.Errorf("%s: p50 %v max %v, %d quantiles", r.Name, r.P50us, r.MaxUs, len(r.Quantiles))
				}
				if tc.events == 0 && (r.P50us <= 0 || r.OpsPerS <= 0 || len(r.Rounds) == 0) {
					t.Errorf("%s: p50 %v ops/s %v, %d rounds: want an alternating row", r.Name, r.P50us, r.OpsPerS, len(r.Rounds))
				}
				if tc.events > 0 && r.Figures[report.FigEvents] != tc.events {
					t.Errorf("%s: %v events, want %v", r.Name, r.Figures[report.FigEvents], tc.events)
				}
			}
			if tc.name == nameClusterSerial {
				// One round of one operation per owner, a third of the
				// owners' clients on the leader's node.
				f := got[0].Figures
				if l, fl := f[report.FigViaLeaderOps], f[report.FigViaFollowerOps]; l+fl != casKeys || l == 0 || fl == 0 || f[report.FigViaFollowerP50Us] <= 0 {
					t.Errorf("%s: %v through the leader's node and %v through a follower's (p50 %v µs), want %d in all, some of each", got[0].Name, l, fl, f[report.FigViaFollowerP50Us], casKeys)
				}
			}
			if tc.name == nameLeaderTransfer {
				if _, ok := got[0].Figures[report.FigUnavailableAnswers]; !ok {
					t.Errorf("%s: no count of UNAVAILABLE answers", got[0].Name)
				}
			}
		})
	}
}
