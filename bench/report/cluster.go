package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/keeppeek/statestore/bench/harness"
)

// The cluster's rows (issue 28), as qualify names them: the store's three
// nodes and each peer cluster of three, measured in alternating rounds in
// one process (qualify's cluster_serial and cluster_concurrent), and the
// cluster's own figures.
const (
	ClusterCAS                  = "cluster_cas"
	ClusterCASConcurrent        = "cluster_cas_concurrent"
	EtcdClusterCAS              = "etcd_cluster_cas"
	EtcdClusterCASConcurrent    = "etcd_cluster_cas_concurrent"
	NATSR3CAS                   = "nats_kv_r3_cas"
	NATSR3CASConcurrent         = "nats_kv_r3_cas_concurrent"
	RaftWALFloor                = "raftwal_cluster_floor"
	RaftWALFloorConcurrent      = "raftwal_cluster_floor_concurrent"
	RaftlogFloor                = "raftlog_cluster_floor"
	FollowerWatchDelivery       = "follower_watch_delivery"
	Failover                    = "failover"
	LeaderTransfer              = "leader_transfer"
	FigUnavailableAnswers       = "unavailable_answers"
	FigOtherErrors              = "other_errors"
	FigEvents                   = "events"
	FigUpdatesBeforeAck         = "updates_before_ack"
	followerWatchP50Bound       = 5 * time.Millisecond
	followerWatchMaxBound       = 15 * time.Millisecond
	failoverP50Bound            = 800 * time.Millisecond
	failoverMaxBound            = 1500 * time.Millisecond
	leaderTransferBound         = 50 * time.Millisecond
	clusterCASPeerBound         = 0.7
	clusterConcurrentPeerBound  = 2.0
	clusterConcurrentFloorBound = 0.8
)

// The cluster's sides, in table order.
var (
	clusterSerial = []networkSide{
		{ClusterCAS, "the store: three node processes (raft over TCP, the durable default log), client/ over WebSocket to any node"},
		{EtcdClusterCAS, "three embedded etcd members, client/v3 over gRPC to any member"},
		{NATSR3CAS, "three embedded nats-servers, JetStream KV with 3 replicas, nats.go to any server"},
		{RaftWALFloor, "hashicorp/raft with raft-wal and a no-op FSM, three nodes over TCP, applied at the leader"},
		{RaftlogFloor, "the same floor with the store's log (replica/raftlog on its journal) as log and stable store"},
	}
	clusterConcurrent = []networkSide{
		{ClusterCASConcurrent, clusterSerial[0].what},
		{EtcdClusterCASConcurrent, clusterSerial[1].what},
		{NATSR3CASConcurrent, clusterSerial[2].what},
		{RaftWALFloorConcurrent, clusterSerial[3].what},
	}
	clusterOwn = []networkSide{
		{FollowerWatchDelivery, "the leader's answer to a write to the follower's watch update of it, through client/"},
		{Failover, "the leader's SIGKILL to the first acknowledged write started after it"},
		{LeaderTransfer, "TransferLeadership called at the leader to the first acknowledged write started after it returned"},
	}
)

// ClusterMeasured reports whether results hold any row of the cluster
// (qualify prints the section then).
func ClusterMeasured(results []harness.Result) bool {
	for _, group := range [][]networkSide{clusterSerial, clusterConcurrent, clusterOwn} {
		for _, s := range group {
			if _, ok := find(results, s.name, 0); ok {
				return true
			}
		}
	}
	return false
}

// clusterTarget is ratioTarget on the cluster's rows, naming the rows it
// misses as results name them.
func clusterTarget(name string, a, b harness.Result, fig func(harness.RoundStat) float64, unit string, bound float64, atMost bool) Target {
	t := ratioTarget(name, a, b, fig, unit, bound, atMost)
	if t.Ratio == 0 {
		t.Measured = fmt.Sprintf("missing %s or %s", rowID(a), rowID(b))
	}
	return t
}

// rowID names a row with its writer count when it has one above 1.
func rowID(r harness.Result) string {
	if r.Writers > 1 {
		return fmt.Sprintf("%s at %d writers", r.Name, r.Writers)
	}
	return r.Name
}

// clusterRow returns the row name at writers (0: any), named even when
// the run did not measure it.
func clusterRow(results []harness.Result, name string, writers int) harness.Result {
	r, ok := find(results, name, writers)
	if !ok {
		return harness.Result{Name: name, Writers: writers}
	}
	return r
}

// boundTarget judges one of a row's figures (in µs) against an absolute
// bound.
func boundTarget(name string, r harness.Result, figure string, us float64, bound time.Duration) Target {
	t := Target{Name: name, Bound: float64(bound.Microseconds()), AtMost: true, Measured: "missing " + r.Name}
	if us > 0 {
		t.Ratio = us
		t.Measured = fmt.Sprintf("%s %s over %.0f events", figure, time.Duration(us*float64(time.Microsecond)).Round(10*time.Microsecond), r.Figures[FigEvents])
	}
	return t
}

// ClusterTargets judges the cluster's targets: cluster_cas p50 against
// each peer cluster's, cluster_cas_concurrent at 127 writers against the
// better peer and the raft-wal floor (all on cluster_serial's and
// cluster_concurrent's alternating rows), and the follower watch,
// failover and leader transfer figures against their bounds. A row the
// run did not measure leaves its targets not measured.
func ClusterTargets(results []harness.Result) []Target {
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	ops := func(r harness.RoundStat) float64 { return r.OpsPerS }
	cas := clusterRow(results, ClusterCAS, 1)
	var out []Target
	for _, peer := range []string{EtcdClusterCAS, NATSR3CAS} {
		out = append(out, clusterTarget(fmt.Sprintf("cluster_cas p50 ≤ %.1f× %s p50", clusterCASPeerBound, peer), cas, clusterRow(results, peer, 1), p50, "µs", clusterCASPeerBound, true))
	}
	conc := clusterRow(results, ClusterCASConcurrent, TargetWriters)
	best := clusterRow(results, EtcdClusterCASConcurrent, TargetWriters)
	if n := clusterRow(results, NATSR3CASConcurrent, TargetWriters); n.OpsPerS > best.OpsPerS {
		best = n
	}
	out = append(out, clusterTarget(fmt.Sprintf("cluster_cas_concurrent ≥ %.0f× the better of etcd_cluster_cas_concurrent and nats_kv_r3_cas_concurrent at %d writers (%s)", clusterConcurrentPeerBound, TargetWriters, best.Name),
		conc, best, ops, "ops/s", clusterConcurrentPeerBound, false))
	out = append(out, clusterTarget(fmt.Sprintf("cluster_cas_concurrent ≥ %.1f× raftwal_cluster_floor_concurrent at %d writers", clusterConcurrentFloorBound, TargetWriters),
		conc, clusterRow(results, RaftWALFloorConcurrent, TargetWriters), ops, "ops/s", clusterConcurrentFloorBound, false))
	fw := clusterRow(results, FollowerWatchDelivery, 0)
	out = append(out, boundTarget(fmt.Sprintf("follower_watch_delivery p50 ≤ %v", followerWatchP50Bound), fw, "p50", fw.P50us, followerWatchP50Bound))
	out = append(out, boundTarget(fmt.Sprintf("follower_watch_delivery max ≤ %v", followerWatchMaxBound), fw, "max", fw.MaxUs, followerWatchMaxBound))
	fo := clusterRow(results, Failover, 0)
	out = append(out, boundTarget(fmt.Sprintf("failover p50 ≤ %v", failoverP50Bound), fo, "p50", fo.P50us, failoverP50Bound))
	out = append(out, boundTarget(fmt.Sprintf("failover max ≤ %v", failoverMaxBound), fo, "max", fo.MaxUs, failoverMaxBound))
	lt := clusterRow(results, LeaderTransfer, 0)
	out = append(out, boundTarget(fmt.Sprintf("leader_transfer ≤ %v (every transfer: max)", leaderTransferBound), lt, "max", lt.MaxUs, leaderTransferBound))
	un := Target{Name: "leader_transfer: 0 UNAVAILABLE answers to the retrying writers", AtMost: true, Measured: "missing " + LeaderTransfer}
	if n, ok := lt.Figures[FigUnavailableAnswers]; ok && lt.MaxUs > 0 {
		un.Ratio, un.MeasuredZero = n, true
		un.Measured = fmt.Sprintf("%.0f UNAVAILABLE answers over %.0f transfers", n, lt.Figures[FigEvents])
	}
	return append(out, un)
}

// WriteCluster writes the section "The cluster": the rows of qualify's
// cluster workloads, their ratios and the cluster's targets, all from
// results; a side the run did not measure is said so, never guessed.
func WriteCluster(w io.Writer, results []harness.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## The cluster\n\n")
	if !ClusterMeasured(results) {
		fmt.Fprintf(&b, "Not measured in this run: `qualify --only cluster` measures it.\n\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "Three nodes on loopback on this one machine for every side: the store's three node processes (`statestore.OpenCluster`, raft over TCP, each node's raft log in its journal, replica's default timeouts), reached through client/ over WebSocket with one client per owner, owner k's client connected to node k mod 3 (writes at a follower are forwarded to the leader); ")
	fmt.Fprintf(&b, "a three-member etcd cluster embedded in qualify's process (go.etcd.io/etcd/server/v3 embed), reached through client/v3 over gRPC, key k's client connected to member k mod 3; three nats-servers embedded and routed into one JetStream cluster, a KV bucket of 3 replicas on file storage, key k's nats.go connection to server k mod 3; ")
	fmt.Fprintf(&b, "and the floor of the engine the store chose: three hashicorp/raft nodes over raft's TCP transport with raft-wal as log and stable store and a state machine that does nothing, each entry of the journal's record size applied at the leader. ")
	fmt.Fprintf(&b, "Durability is equal on every side: an acknowledged write is on the disks of a quorum (two of three), each having synced it before it answered its leader: the store's nodes fdatasync their journal per batch; etcd fsyncs its WAL before it acknowledges an entry (UnsafeNoFsync false); every nats-server runs with SyncAlways, so each replica fsyncs before it acknowledges; raft-wal syncs every appended batch. ")
	fmt.Fprintf(&b, "The serial rows run the specification's workload (127 owners, the 2,193-byte document, compare-and-set on the revision last written) in `cluster_serial`'s alternating rounds of 127 operations, the order rotated every round; the concurrent rows run `cluster_concurrent`'s alternating bursts at each writer count (writer w owns the owners k with k mod W = w).\n\n")
	if anyClusterRow(results, clusterSerial) {
		p50 := func(r harness.RoundStat) float64 { return r.P50us }
		cas := clusterRow(results, ClusterCAS, 1)
		fmt.Fprintf(&b, "| workload | | p50 µs | p95 µs | p99 µs | max µs | ops/s | cluster_cas p50 ÷ its p50 |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range clusterSerial {
			r := clusterRow(results, s.name, 1)
			ratio := "-"
			if r.P50us > 0 && cas.P50us > 0 {
				ratio = fmt.Sprintf("%.2f×", cas.P50us/r.P50us)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.what, cell(r.P50us), cell(r.P95us), cell(quantile(r, 99)), cell(r.MaxUs), cell(r.OpsPerS), ratio)
		}
		fmt.Fprintf(&b, "\n")
		for _, peer := range clusterSerial[1:] {
			fmt.Fprintf(&b, "- cluster_cas ÷ %s, p50: %s\n", peer.name, clusterTarget("", cas, clusterRow(results, peer.name, 1), p50, "µs", 1, true).Measured)
		}
		writeVia(&b, cas)
		fmt.Fprintf(&b, "\n")
	} else {
		fmt.Fprintf(&b, "`cluster_serial` was not run: its ratios are not measured.\n\n")
	}
	if anyClusterRow(results, clusterConcurrent) {
		fmt.Fprintf(&b, "| workload | writers | p50 µs | p95 µs | ops/s | cluster_cas_concurrent ops/s ÷ its ops/s |\n|---|---:|---:|---:|---:|---:|\n")
		for _, s := range clusterConcurrent {
			for _, r := range results {
				if r.Name != s.name {
					continue
				}
				ratio := "-"
				if own := clusterRow(results, ClusterCASConcurrent, r.Writers); own.OpsPerS > 0 && r.OpsPerS > 0 {
					ratio = fmt.Sprintf("%.2f×", own.OpsPerS/r.OpsPerS)
				}
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", s.name, r.Writers, cell(r.P50us), cell(r.P95us), cell(r.OpsPerS), ratio)
			}
		}
		fmt.Fprintf(&b, "\n")
		if r := clusterRow(results, ClusterCASConcurrent, TargetWriters); r.OpsPerS > 0 {
			writeVia(&b, r)
			fmt.Fprintf(&b, "\n")
		}
	} else {
		fmt.Fprintf(&b, "`cluster_concurrent` was not run: its ratios are not measured.\n\n")
	}
	fmt.Fprintf(&b, "The cluster's own figures, each on a fresh three-node cluster of processes; the writers retry an UNAVAILABLE answer after 2 ms, as a client/ caller does:\n\n")
	fmt.Fprintf(&b, "| figure | | events | p50 µs | max µs | note |\n|---|---|---:|---:|---:|---|\n")
	for _, s := range clusterOwn {
		r := clusterRow(results, s.name, 0)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.name, s.what, eventsCell(r), cell(r.P50us), cell(r.MaxUs), strings.TrimSpace(r.Note))
	}
	fmt.Fprintf(&b, "\nTargets of the cluster (issue 28), on the rows above:\n\n")
	for _, t := range ClusterTargets(results) {
		fmt.Fprintf(&b, "- %s: **%s**, %s\n", t.Name, t.Verdict(), t.Measured)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// anyClusterRow reports whether results hold a row of one of sides.
func anyClusterRow(results []harness.Result, sides []networkSide) bool {
	for _, s := range sides {
		if _, ok := find(results, s.name, 0); ok {
			return true
		}
	}
	return false
}

// eventsCell is a row's event count, "-" when it has none.
func eventsCell(r harness.Result) string {
	if n, ok := r.Figures[FigEvents]; ok {
		return fmt.Sprintf("%.0f", n)
	}
	return "-"
}

// The figures qualify gives cluster_cas rows: the operations answered
// through the leader's node and through a follower's, split.
const (
	FigViaLeaderOps     = "via_leader_ops"
	FigViaLeaderP50Us   = "via_leader_p50_us"
	FigViaFollowerOps   = "via_follower_ops"
	FigViaFollowerP50Us = "via_follower_p50_us"
)

// writeVia writes a cluster_cas row's split by the node that answered,
// when the row carries it.
func writeVia(b *strings.Builder, r harness.Result) {
	if r.Figures[FigViaLeaderOps] == 0 || r.Figures[FigViaFollowerOps] == 0 {
		return
	}
	fmt.Fprintf(b, "- %s by the node its client reached: through the leader's node p50 %s µs (%.0f operations), through a follower's p50 %s µs (%.0f): a follower forwards the write to the leader over its peer connection and answers once the leader did (one more round trip between two processes), without waiting to apply the entry itself\n",
		rowID(r), cell(r.Figures[FigViaLeaderP50Us]), r.Figures[FigViaLeaderOps], cell(r.Figures[FigViaFollowerP50Us]), r.Figures[FigViaFollowerOps])
}
