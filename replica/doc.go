// Package replica is the raft wiring of the store's cluster mode
// (statestore.OpenCluster): hashicorp/raft's configuration with the
// store's timeouts, the transports (TCP, over mutual TLS when configured,
// or in memory for tests), the stores, the bootstrap of a fresh cluster,
// membership and leadership calls (Node), and a small request/answer
// channel for the store's own peer calls, forwarded writes and read
// indexes (RPCServer, TCPCaller, Loopback). Raft is all of it as a
// replication engine of package replica/consensus, the contract the root
// package talks to: Raft (statestore.ClusterOptions.Engine) opens the
// node's log (raftlog's in the store's journal, or the stores it was
// given), starts a Node, which implements consensus.Node with raft's
// errors marked by outcome (MapError), serves the peer calls and runs
// raft's offline recovery. It knows nothing of the store: the root package
// is the state machine and says what the calls carry, and it imports no
// package of this one, so only a program that opens a cluster links raft,
// net and crypto/tls.
//
// # How the cluster works
//
// The leader admits every write as a single store does (policy, schema,
// quota, compare-and-set against its pending view), so a refused write
// never reaches the log. One raft entry carries one group-commit batch of
// the store's CRC-framed journal records. Every node's state machine
// checks each record with the replay checks (recovery.Checker) and
// publishes it to its own view and watches; the leader answers only after
// its own state machine applied the entry. A new leader waits for its
// Barrier, rebuilds its pending view from the applied state and expires
// overdue leases before it admits anything. A follower forwards a write,
// with its principal, to the leader and relays the answer once its own
// state machine applied what the leader had applied when it answered
// (a commit lag, about a CommitTimeout), so the caller reads its own
// write on the node it wrote to, in Namespace and Usage and under
// statestore.StaleOK too; Get and Watch are linearizable on every node
// (the leader's read index, which covers every acknowledged write, then
// the local state machine). StaleOK reads the local state, which may be
// behind writes acknowledged on other nodes. Outcomes: no leader for two
// election timeouts is UNAVAILABLE naming the leader if known; a batch
// whose leader lost leadership before it was known committed is
// UNAVAILABLE with field "commit" (the outcome is unknown); a failure of
// the leader's log is STORAGE.
//
// # Time and leases
//
// The leader stamps each batch with its clock, never below the time of
// the last applied record, and no state machine reads a clock. Only the
// leader expires leases, as journaled EXPIREs after its Barrier; a new
// leader first purges the leases that lapsed, as Open does. No lease is
// extended on failover: etcd's reset to the full TTL keeps leases alive
// forever under repeated elections. The lease helper renews at a third of
// the TTL, which leaves two thirds as failover slack: 6.7 s at a 10 s TTL,
// against 0.6-0.7 s measured per leader kill at the default 300 ms
// timeouts and 13-26 ms per leadership transfer. A longer failover
// expires the lease, as a restart does. A follower that sees a lease due
// by its own clock asks the leader to expire; if the leader keeps it, the
// follower serves it (the leader's clock rules).
//
// # A node without a leader
//
// A node that has heard from no leader for ClusterOptions.LeaderlessAfter
// (default 3 s: raft's last contact on a follower; a leader counts as
// hearing itself while raft keeps it leader, which it stops being once
// its lease finds no quorum) closes every watch with the close reason
// UNAVAILABLE, so their clients re-snapshot on another node, and refuses
// writes, linearizable reads and new watches as UNAVAILABLE with field
// "leaderless_after", saying for how long no leader was heard. StaleOK
// reads are still served from the local state. Once a leader is heard
// again, within a tick of a tenth of the bound, it serves everything.
//
// # Limits and schemas agree
//
// Every node must admit and replay alike, so before its raft node starts
// a node asks every peer it reaches (verb "agree" on the peer channel)
// for its limits and its schemas' fingerprints (schema.Registry.
// Fingerprints) and refuses to open, INVALID_ARGUMENT naming the first
// limit ("limits.MaxKeyBytes") or schema ("schema <name>") that differs;
// the leader asks a joining node the same before AddVoter. A peer not
// started yet is not asked: it asks when it starts, so of two nodes that
// disagree the later one is refused.
//
// # Building a cluster in a test
//
// Three nodes in one process, as the root package's cluster tests do
// (newTestCluster in cluster_test.go):
//
//	net, lb := replica.NewInmemNetwork(), replica.NewLoopback()
//	clk := clock.NewFake(start) // one fake clock shared by every node
//	peers := []statestore.Peer{
//		{ID: "n1", RaftAddr: "raft-n1", RPCAddr: "rpc-n1"}, // any unique names
//		{ID: "n2", RaftAddr: "raft-n2", RPCAddr: "rpc-n2"},
//		{ID: "n3", RaftAddr: "raft-n3", RPCAddr: "rpc-n3"},
//	}
//	for _, p := range peers {
//		s, err := statestore.OpenCluster(statestore.Options{Dir: t.TempDir(), Clock: clk},
//			statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: peers,
//				Engine: &replica.Raft{Transport: net.Transport(p.RaftAddr), Loopback: lb}})
//		// ...
//	}
//	<-s.Cluster().Ready() // on each node: a leader known, the local state caught up
//
// Then any node serves every call; s.Cluster().IsLeader() finds the
// leader, Close on it fails it over, and InmemNetwork.Isolate and Heal cut
// and restore a node's links. The stores are durable by default: each
// node's raft log is replica/raftlog's LogStore in its store's journal
// directory, its term and vote raftlog's StableStore beside it, its
// snapshots in raft-snapshots, so Close then OpenCluster on the same Dir
// restarts a node (it replays its log to the persisted commit index before
// a leader is known, see restart.go). Give Raft.LogStore and StableStore
// both (raft.InmemStore, with Raft.SnapshotStore) for a node that keeps
// nothing across a restart. Raft runs on real time (its timeouts), the store
// on the fake clock: advancing the clock expires leases at the leader.
// Over TCP, leave Raft's Transport and Loopback nil and give 127.0.0.1
// addresses (TestClusterOverTCP). The root package's contract and scenario tests
// run against such a cluster's leader and one of its followers as homes
// "cluster-leader" and "cluster-follower" (cluster_contract_test.go),
// each node on raft stores the test keeps, so a node closed and opened
// again finds its log.
//
// # Invariants
//
//  1. A write is acknowledged only after raft committed its batch and the
//     leader's own state machine applied it; an op raft did not apply
//     (not the leader, refused) is retried at the leader for up to two
//     election timeouts, and one whose outcome is unknown is never
//     answered as a success.
//     Code: statestore.raftLog, statestore.raftOutcome, statestore.clusterNode.write,
//     statestore.pipeline.syncOutcomes.
//     Tests: statestore.TestClusterWritesAtLeaderAndFollowerVisibleEverywhere,
//     statestore.TestClusterLeaderLossKeepsAcknowledgedWrites.
//  2. Every node applies the same entries with the same checks to the same
//     state, reading no clock, so their views at one index are the same
//     bytes; an entry that fails a check is refused whole on every node.
//     Code: statestore.fsm.Apply, statestore.decodeEntry, statestore.encodeEntry.
//     Tests: statestore.TestClusterImagesAreByteIdentical, statestore.TestEntryCodec,
//     statestore.TestFSMRefusesABadEntryOnEveryNode.
//  3. A new leader admits nothing before its Barrier applied every earlier
//     entry, its pending view was rebuilt from the applied state and its
//     overdue leases were purged.
//     Code: statestore.clusterNode.leaderLoop, statestore.clusterNode.takeOver,
//     statestore.clusterNode.leaderReady.
//     Tests: statestore.TestClusterLeaderLossKeepsAcknowledgedWrites,
//     statestore.TestClusterCompareAndSet.
//  4. Only the leader expires leases, once each, at its clock; a follower's
//     watch sees each update once, in order.
//     Code: statestore.clusterNode.expireIfLeader, statestore.clusterNode.stamp.
//     Tests: statestore.TestClusterLeasesExpireOnceAtTheLeader,
//     statestore.TestClusterFollowerWatchSeesEveryUpdateOnceInOrder.
//  5. A Get and a Watch wait until this node applied the leader's read
//     index, so no node answers older than an acknowledged write.
//     Code: statestore.clusterNode.linearize, statestore.clusterNode.localReadIndex,
//     statestore.clusterNode.waitApplied.
//     Tests: statestore.TestClusterWritesAtLeaderAndFollowerVisibleEverywhere.
//  6. A peer call that failed before it was sent may be retried; one that
//     failed after is an unknown outcome. Messages are bounded both ways.
//     Raft and peer calls run over TLS when configured. A peer call's
//     connection is kept for the next only after a call succeeded on it,
//     and not once its peer closed it.
//     Code: TCPCaller.Call, TCPCaller.get, TCPCaller.put, NotSentError, MaxMessage, newNetworkTransport, NewStreamTransport, ServeRPC.
//     Tests: TestRPCOverTCP, TestRPCBounds, TestRPCKeepsConnections, TestRPCKeepsTLSConnections,
//     statestore.TestClusterOverTCP.
//  7. A node that heard from no leader for its bound closes its watches
//     UNAVAILABLE and refuses writes, linearizable reads and new watches
//     until it hears one; stale reads go on.
//     Code: statestore.clusterNode.watchLeaderless, statestore.clusterNode.refuseLeaderless.
//     Tests: statestore.TestClusterLeaderless, statestore.TestClusterLeaderlessAfterRefused.
//  8. No node serves beside a peer whose limits or schemas differ: it
//     refuses to open, or the leader refuses to add it.
//     Code: statestore.clusterNode.agreeWithPeers, statestore.clusterNode.agreeWithJoiner,
//     statestore.disagreement.
//     Tests: statestore.TestClusterAgreementAtOpen, statestore.TestClusterAgreementAtAddVoter.
//  9. A node restarting on a log that persists raft's commit index replays
//     it in NewRaft, capped below the newest configuration entry above the
//     snapshot raft restored (so raft's configuration scan finds it and
//     the node knows its voters) and at fsmQueueBatches batches (so
//     NewRaft never blocks on raft's FSM queue); a snapshot follows every
//     configuration entry applied, which lifts the cap for later restarts.
//     Code: RestartCap, startLog.GetCommitIndex, configFSM.StoreConfiguration,
//     snapshotAfterChanges, Start.
//     Tests: TestRestartCap, statestore.TestClusterRestartAfterMembershipChangeWithoutSnapshots,
//     statestore.TestClusterRestartAllThree.
//  10. The raft state shown to operators costs a write nothing: raft's own
//     counters, leader changes counted in a raft observer's filter, and
//     each follower's progress from one peer call every progressInterval
//     while the node leads (the follower telling its own silence from
//     raft), so a follower that stops answering, or that raft no longer
//     reaches, shows a lag and a last contact that grow; a snapshot a node restores from
//     its own disk while it opens is not counted as installed.
//     Code: Node.LeaderChanges, statestore.Cluster.Stats, statestore.Cluster.LeaderStats,
//     statestore.clusterNode.pollProgress, statestore.clusterNode.askProgress, statestore.fsm.Restore.
//     Tests: statestore.TestClusterStats, statestore.TestClusterStatsFollowerCutOffFromRaft,
//     statestore.TestClusterSnapshotInstallClosesWatches,
//     statestore.TestClusterRestartAllThree.
//  11. Raft replicates pipelined, and a leader that loses its term on a
//     pipelined answer still stops: the answer raft's decoder stops on
//     closes the transport's pipeline, so no send waits for a decoder
//     that will never read again, and Shutdown returns.
//     Code: Transport.AppendEntriesPipeline, relayPipeline.relay, MaxRPCsInFlight.
//     Tests: TestPipelineSendAfterStaleTermFails, TestLeaderLosingTermOnPipelineShutsDown,
//     statestore.TestClusterOverTCP.
//  12. Raft keeps the store's contract with the engine (replica/consensus):
//     raft's errors reach the store marked with the outcome it tells apart
//     (not applied anywhere, outcome unknown, nothing new to snapshot),
//     raft's message and sentinel kept; a snapshot counts as persisted
//     only once raft's sink closed without error; the default log is
//     raftlog's in the store's journal and Close stages the applied index
//     into it; half a log override is refused naming LogStore.
//     Code: MapError, applyFuture.Error, raftSnapshot.Persist, Raft.OpenLog, nodeLog.Close, Raft.Start.
//     Tests: TestMapError, TestRaftSnapshotPersist, TestRaftOpenLog, TestRaftEngineNode,
//     TestRaftServeRPCLoopback, statestore.TestRaftOutcome.
package replica
