// Package consensus is the engine-neutral contract between the store's
// cluster mode (statestore.OpenCluster) and a replication engine: the
// state machine the engine drives (FSM, Entry, Snapshot), the node the
// store drives (Node, Future, State), the outcomes the store tells apart
// (ErrNotLeader, ErrOutcomeUnknown, ErrNothingNewToSnapshot, Mark), the
// store's own peer calls (Handler, Caller, RPC, NotSentError, ErrNoPeer),
// and what opening a node needs (Engine: its durable log in the store's
// journal directory, Start, ServeRPC, and the offline Recover).
//
// The root package talks to these types only, so a program that embeds a
// single-node store links no engine and no network stack: package replica
// is the hashicorp/raft engine (replica.Raft), and only a program that
// opens a cluster imports it. The contract's types carry nothing of raft:
// an entry's index and term, its data, and whether it is a store command
// or one of the engine's own.
//
// # Invariants
//
//  1. The contract links no engine and no network: this package imports
//     only the standard library's basics, journal and internal/fault, so
//     the root package, which imports it, links neither hashicorp/raft nor
//     net, crypto/tls, net/http, net/rpc or text/template (the root's
//     dependencies include this package's, so one check covers both).
//     Code: Engine, Node, FSM, Log.
//     Tests: statestore.TestRootLinksNoReplicationEngine.
//  2. An engine's error marked with an outcome keeps its message and
//     everything it wraps: errors.Is finds the outcome and the engine's
//     own sentinel alike, so the store classifies it without knowing the
//     engine and a client sees the engine's words.
//     Code: Mark, markedError.Error, markedError.Unwrap.
//     Tests: TestMark, replica.TestMapError, statestore.TestRaftOutcome.
//  3. A node's role reads in lower case ("follower", "candidate",
//     "leader", "shutdown"), as Cluster.Stats shows it.
//     Code: State.String.
//     Tests: TestStateString.
package consensus
