package main

import (
	"github.com/keeppeek/statestore/bench/boltpeer"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/natspeer"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/bench/serialwork"
	"github.com/keeppeek/statestore/bench/sqlitepeer"
	"github.com/keeppeek/statestore/bench/walpeer"
)

// casKeys is the number of owners (documents) of the CAS workloads; with the
// default --ops of 3810 every key is updated 30 times.
const casKeys = serialwork.Owners

// workloads lists every workload qualify knows, in run order. Add a workload
// by appending {name, run}: run receives the shared Env and returns one
// Result per measured row (for example one per writer count). Use
// env.Scratch(name) for files and env.Budget / env.Writers / env.Ops /
// env.Payload for sizing so that the command-line flags apply.
var workloads = []workload{
	{name: nameDurableCAS, run: runDurableCAS},
	{name: nameDurableCASMetrics, run: runDurableCASMetrics},
	{name: nameWireCAS, run: runWireCAS},
	{name: nameWSCAS, run: runWSCAS},
	{name: nameTCPCASFloor, run: runTCPCASFloor},
	{name: harness.NameRawAppend, run: runRawAppend},
	{name: harness.NameRawOverwrite, run: serialRaw(harness.RawOverwriteFdatasync)},
	{name: harness.NameRawFallocate, run: serialRaw(harness.RawFallocateFdatasync)},
	{name: nameDurableCASAppend, run: runDurableCASAppend},
	{name: nameMemoryCAS, run: runMemoryCAS},
	// The specification's process figures, in a process of their own
	// (process_workloads.go).
	{name: report.SerialProcess, run: runSerialProcess},
	{name: report.SerialProcessFloor, run: runSerialFloor},
	{name: nameValidateMediaIntent, run: runValidateMediaIntent},
	{name: nameWatchFanout, run: runWatchFanout},
	{name: nameWireFanout, run: runWireFanout},
	{name: nameWireFanoutDecoded, run: runWireFanoutDecoded},
	// The three in-process fan-outs alternating (inprocess_fanout.go).
	{name: nameInProcessFanout, run: runInProcessFanout},
	{name: nameWSLoad, run: runWSLoad},
	// The fan-out over the network beside its peers (fanout_peers.go).
	{name: nameWSFanout, run: runWSFanout},
	{name: etcdpeer.NameWatchFanout, run: runEtcdWatchFanout},
	{name: natspeer.NameWatchFanout, run: runNATSWatchFanout},
	{name: nameOneEntrySnapshot, run: runOneEntrySnapshot},
	{name: nameOpenFullStore, run: runOpenFullStore},
	{name: nameReplayJournal, run: runReplayJournal},
	{name: nameBackupFullStore, run: runBackupFullStore},
	{name: report.ContinuousChurn, run: runContinuousChurn},
	{name: nameDurableCASConcurrent, run: runDurableCASConcurrent},
	{name: nameDurableCASConcurrentAppend, run: runDurableCASConcurrentAppend},
	{name: nameMemoryCASConcurrent, run: runMemoryCASConcurrent},
	{name: harness.NameRawGroup, run: runRawGroup},
	{name: walpeer.NameGroup, run: runWALGroup},
	{name: sqlitepeer.NameCAS, run: serialPeer(sqlitepeer.NameCAS, openSQLite, "wal sync=full")},
	{name: sqlitepeer.NameCASConcurrent, run: concurrentPeer(sqlitepeer.NameCASConcurrent, openSQLite, "wal sync=full conns=1")},
	{name: boltpeer.NameCAS, run: serialPeer(boltpeer.NameCAS, openBolt(false), "Update per CAS")},
	{name: boltpeer.NameCASConcurrent, run: concurrentPeer(boltpeer.NameCASConcurrent, openBolt(true), "Batch")},
	{name: etcdpeer.NameCAS, run: serialPeer(etcdpeer.NameCAS, openEtcd, "embedded single member, in-process client")},
	{name: etcdpeer.NameCASConcurrent, run: concurrentPeer(etcdpeer.NameCASConcurrent, openEtcd, "embedded single member, in-process client")},
	{name: nameWSCASConcurrent, run: runWSCASConcurrent},
	{name: etcdpeer.NameGRPCCAS, run: serialPeer(etcdpeer.NameGRPCCAS, openEtcdGRPC(1), etcdGRPCNote)},
	{name: etcdpeer.NameGRPCCASConcurrent, run: concurrentPeerFor(etcdpeer.NameGRPCCASConcurrent, openEtcdGRPC, etcdGRPCNote+", one connection per writer")},
	{name: natspeer.NameCAS, run: serialPeer(natspeer.NameCAS, openNATS(1), natsNote)},
	{name: natspeer.NameCASConcurrent, run: concurrentPeerFor(natspeer.NameCASConcurrent, openNATS, natsNote+", one connection per writer")},
	// The targets' own measurement: their sides in alternating rounds
	// (target_workloads.go).
	{name: nameTargetsSerial, run: runTargetsSerial},
	{name: nameTargetsConcurrent, run: runTargetsConcurrent},
	// The network path's ratios, the same way (network_workloads.go).
	{name: nameNetworkSerial, run: runNetworkSerial},
	{name: nameNetworkConcurrent, run: runNetworkConcurrent},
	{name: nameNetworkFanout, run: runNetworkFanout},
	// The cluster beside its peer clusters, and its own figures
	// (cluster_workloads.go); --only cluster runs these alone.
	{name: nameClusterSerial, run: runClusterSerial},
	{name: nameClusterConcurrent, run: runClusterConcurrent},
	{name: nameFollowerWatch, run: runFollowerWatch},
	{name: nameFailover, run: runFailover},
	{name: nameLeaderTransfer, run: runLeaderTransfer},
}

// groups are names --only accepts for several workloads at once.
var groups = map[string][]string{
	groupCluster: {nameClusterSerial, nameClusterConcurrent, nameFollowerWatch, nameFailover, nameLeaderTransfer},
}

// serialFigure and concurrentFigure are the workloads the report draws,
// in legend order.
var (
	serialFigure = []string{nameDurableCAS, nameDurableCASAppend, harness.NameRawAppend, harness.NameRawOverwrite,
		harness.NameRawFallocate, sqlitepeer.NameCAS, boltpeer.NameCAS, etcdpeer.NameCAS}
	concurrentFigure = []string{nameDurableCASConcurrent, nameDurableCASConcurrentAppend, nameMemoryCASConcurrent,
		harness.NameRawGroup, walpeer.NameGroup, sqlitepeer.NameCASConcurrent, boltpeer.NameCASConcurrent, etcdpeer.NameCASConcurrent}
	// measuredModules are the versions BENCHMARKS.md reports.
	measuredModules = []string{"github.com/keeppeek/statestore", "github.com/tidwall/wal", "modernc.org/sqlite",
		"go.etcd.io/bbolt", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/client/v3", "google.golang.org/grpc",
		"github.com/nats-io/nats-server/v2", "github.com/nats-io/nats.go",
		"github.com/hashicorp/raft", "github.com/hashicorp/raft-wal",
		"github.com/coder/websocket", "gonum.org/v1/plot"}
)

// runRawAppend is the serial write+fdatasync floor, env.Ops operations.
var runRawAppend = serialRaw(harness.RawAppendFdatasync)

// serialRaw turns a serial physical baseline into a workload of env.Ops
// operations of env.Payload bytes in a scratch directory of its own.
func serialRaw(measure func(dir string, payload, n int) (harness.Result, error)) func(env *Env) ([]harness.Result, error) {
	return func(env *Env) ([]harness.Result, error) {
		dir, err := env.Scratch("raw")
		if err != nil {
			return nil, err
		}
		r, err := measure(dir, env.Payload, env.Ops)
		if err != nil {
			return nil, err
		}
		return []harness.Result{r}, nil
	}
}

// runRawGroup is the group-commit ceiling, once per writer count.
var runRawGroup = groupPerWriters(harness.NameRawGroup, harness.RawGroupFdatasync)

// runWALGroup is the floor of the journal's library at each writer count:
// the writers' bytes through tidwall/wal by one group committer.
var runWALGroup = groupPerWriters(walpeer.NameGroup, walpeer.Group)

// groupPerWriters runs a group-commit baseline once per writer count, each
// in a fresh scratch directory.
func groupPerWriters(name string, measure func(dir string, payload, writers int, b harness.Budget) (harness.Result, error)) func(env *Env) ([]harness.Result, error) {
	return func(env *Env) ([]harness.Result, error) {
		var out []harness.Result
		for _, w := range env.Writers {
			dir, err := env.Scratch(name)
			if err != nil {
				return out, err
			}
			r, err := measure(dir, env.Payload, w, env.Budget)
			if err != nil {
				return out, err
			}
			env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
			out = append(out, r)
		}
		return out, nil
	}
}
