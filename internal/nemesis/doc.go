// Package nemesis is issue 28's nemesis torture, the engine of `kpjournal
// torture --cluster 3`: three cluster nodes, each its own OS process
// (clusterkill.RunNode over loopback TCP, started through Config.Command
// with NodeEnv set), under a workload through the shipped client package,
// while faults are injected at random from a seed, and a checker that
// did not write the faults judges the history.
//
// Between every ordered pair of nodes sit two fault proxies of this
// package (Proxy), one for raft and one for forwarded calls: node A
// dials B's raft address through its own proxy (NodeConfig.RaftDial, a
// raft stream layer mapping addresses) and B's RPC address through
// another (the Peers A is given), so a partition is a proxy set to Drop
// (connections reset) or Blackhole (silence), and nothing beyond
// loopback is touched. Clients and watchers reach the nodes directly.
//
// The faults (Report.Events): SIGKILL and restart of a node, the leader
// more often; a 1|2 split, an isolated leader and a bridge (two nodes cut
// from each other, the third seeing both); SIGSTOP then SIGCONT; the
// next fdatasyncs of a node's raft log failing with EIO (a Control
// command arming internal/fault's Sync seam in the node); a follower
// removed at the leader, restarted (raft shuts a removed node down) and
// added back. The workload: workers on random sets of endpoints doing
// compare-and-set, create-only and blind writes, deletes at an expected
// revision, and reads, on a few hot keys; a leaser taking never-renewed
// one-second leases; a watcher on every node.
//
// The run goes in rounds: the workload runs through one or two fault
// events, each injected, held and healed; then the workers stop, every
// fault is undone, every node is waited for until it caught up with a
// leader, and after a settle longer than a node's own retry bound each
// hot key is read: a definite observation closing the key's window of
// the history (package regcheck). An operation whose answer never came
// (a timeout, a lost connection, an UNAVAILABLE that may have applied)
// is unknown: it may take effect anywhere up to that observation.
//
// The checks:
//
//   - porcupine finds every key's history linearizable, window by window
//     (regcheck);
//   - no observation misses an acknowledged write: none shows a revision
//     below one acknowledged on its key, nor the key absent when its
//     newest acknowledged operation was a put no delete could follow;
//   - two sources (acks, reads, watches) never show different values at
//     one revision of a key;
//   - every watch delivers updates with contiguous sequences and rising
//     revisions (so each once, in commit order), re-snapshots only after
//     a closure or a lost connection, never back in revision, and at the
//     end holds exactly the cluster's state;
//   - each lease expires once (one EXPIRE revision everywhere, once per
//     watcher), never received before its deadline (the nodes share the
//     machine's clock, so that is the leader's clock too), and is gone on
//     every node at the end; one no watcher saw expire fell where each
//     re-snapshotted;
//   - after each round's heal every node serves a linearizable read
//     through a client of its own (run.probe): the workers' clients move
//     off a node that answers UNAVAILABLE, so a node stuck behind the
//     others (as one was, on a follower whose suffix cut failed) would
//     otherwise go unseen.
//
// # Invariants
//
//  1. A violation comes from evidence only: an answer the store gave, or a
//     definite observation after a quiesce; an operation with no answer is
//     unknown, never counted as applied or as lost.
//     Code: worker.issue, state.record, state.lost, state.roundOps, run.closeWindow.
//     Tests: TestCheckerFindsStaleReadsAndLostWrites, TestNemesis.
//  2. A partition cuts exactly the pairs it names, both directions, raft
//     and RPC, and a heal puts every proxy back; Drop and a heal from
//     Blackhole close the connections they cut.
//     Code: Proxy.Set, Proxy.serve, cluster.cut, cluster.heal.
//     Tests: TestProxyModes.
//  3. An EXPIRE received before its lease's deadline, a second EXPIRE of a
//     lease, or two EXPIRE revisions of one lease are violations.
//     Code: state.expire.
//     Tests: TestLeaseRule.
//  4. Every node process a run starts it ends by PID and waits for, a
//     paused one included.
//     Code: cluster.kill, cluster.close.
//     Tests: TestNemesis.
package nemesis
