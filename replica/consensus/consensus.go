package consensus

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/journal"
)

// State is a node's role in its group.
type State uint32

// The roles, as every engine names them.
const (
	Follower State = iota
	Candidate
	Leader
	Shutdown
)

// String is the role in lower case ("follower", "candidate", "leader",
// "shutdown"), as Cluster.Stats shows it.
func (s State) String() string {
	switch s {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	case Shutdown:
		return "shutdown"
	}
	return "unknown"
}

// EntryType tells a store command from the engine's own entries.
type EntryType uint8

const (
	// EntryCommand is an entry the store proposed (Node.Apply): one
	// group-commit batch.
	EntryCommand EntryType = iota
	// EntryOther is an entry of the engine's own (a term's no-op, a
	// barrier, a configuration change): it only moves the applied index.
	EntryOther
)

// Entry is one committed log entry handed to the state machine.
type Entry struct {
	Index uint64
	Term  uint64
	Type  EntryType
	// Data is what Node.Apply proposed; the state machine may keep it.
	Data []byte
}

// FSM is the store as an engine's state machine. The engine calls Apply
// for every committed entry in index order, from one goroutine at a
// time, and Snapshot and Restore between them.
type FSM interface {
	// Apply applies one committed entry; what it returns is the
	// Response of the entry's Future on the node that proposed it (an
	// error for a batch the state machine refused).
	Apply(e *Entry) any
	// Snapshot captures the applied state, to be persisted while Apply
	// goes on.
	Snapshot() (Snapshot, error)
	// Restore replaces the state with a persisted snapshot's, and closes
	// rc.
	Restore(rc io.ReadCloser) error
}

// Snapshot is a captured state the engine persists.
type Snapshot interface {
	// Persist writes the snapshot to w; on an error the engine discards
	// what was written.
	Persist(w io.Writer) error
	// Release is called once the engine is done with the snapshot.
	Release()
}

// PersistNoter is a Snapshot that wants to know when the engine made a
// snapshot it persisted durable (after Persist returned nil and the
// engine's own store closed it without error).
type PersistNoter interface {
	Persisted()
}

// Future is a proposal's outcome.
type Future interface {
	// Error blocks until the entry was applied on this node or failed;
	// a failure errors.Is one of ErrNotLeader or ErrOutcomeUnknown when
	// the engine knows which, and keeps the engine's message.
	Error() error
	// Index is the entry's log index, once Error returned nil.
	Index() uint64
	// Response is what FSM.Apply returned for it, once Error returned
	// nil.
	Response() any
}

// The outcomes an engine maps its errors onto, so the store classifies
// them without knowing the engine (errors.Is on what Future.Error,
// Node.Snapshot and the others return).
var (
	// ErrNotLeader is a proposal applied nowhere: this node does not
	// lead, it could not enqueue the proposal in time, a leadership
	// transfer was under way, or a snapshot restore aborted it. It may be
	// retried at the leader.
	ErrNotLeader = errors.New("consensus: not applied (not the leader)")
	// ErrOutcomeUnknown is a proposal whose leader lost leadership, or
	// whose node shut down, before it was known committed: it may or may
	// not be applied.
	ErrOutcomeUnknown = errors.New("consensus: outcome unknown")
	// ErrNothingNewToSnapshot is a snapshot asked for while nothing was
	// applied since the last one.
	ErrNothingNewToSnapshot = errors.New("consensus: nothing new to snapshot")
)

// Mark returns err marked as the outcome sentinel: errors.Is finds both
// sentinel and everything err wraps, and the message is err's alone. A
// nil err stays nil.
func Mark(sentinel, err error) error {
	if err == nil {
		return nil
	}
	return &markedError{sentinel: sentinel, err: err}
}

type markedError struct {
	sentinel error
	err      error
}

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.sentinel, e.err} }

// Member is one server of a group's configuration.
type Member struct {
	ID    string
	Addr  string
	Voter bool
}

// Peer is one member of a group's initial configuration.
type Peer struct {
	ID   string // unique forever: a wiped node rejoins under a new ID
	Addr string // its replication address
}

// Node is one started replication node, as the store drives it.
type Node interface {
	// State is this node's role now.
	State() State
	// CurrentTerm is the term this node is in.
	CurrentTerm() uint64
	// LastIndex is the last index its log (or latest snapshot) holds,
	// committed or not; CommitIndex the highest it knows committed.
	LastIndex() uint64
	CommitIndex() uint64
	// LastContact is when this node last heard from a leader, zero if
	// never.
	LastContact() time.Time
	// LeaderCh delivers true when this node gains leadership and false
	// when it loses it.
	LeaderCh() <-chan bool
	// Apply proposes data as one entry, waiting at most timeout to
	// enqueue it.
	Apply(data []byte, timeout time.Duration) Future
	// Barrier returns once every entry before it was applied here (on
	// the leader only).
	Barrier(timeout time.Duration) error
	// VerifyLeader confirms with a quorum that this node still leads.
	VerifyLeader() error
	// Snapshot takes a snapshot of the state machine now; errors.Is
	// ErrNothingNewToSnapshot when nothing was applied since the last.
	Snapshot() error
	// Leader is the current leader's ID and address, "" when none is
	// known.
	Leader() (id, addr string)
	// Members is the current configuration.
	Members() ([]Member, error)
	// AddVoter adds (or promotes) a voter; RemoveServer removes a
	// server; only the leader can.
	AddVoter(id, addr string, timeout time.Duration) error
	RemoveServer(id string, timeout time.Duration) error
	// TransferLeadership hands leadership to id, or to the most caught-up
	// follower when id is "".
	TransferLeadership(id string) error
	// LeaderChanges is how many times this node learned of a leader
	// since it started, after knowing none or another.
	LeaderChanges() uint64
	// ElectionTimeout is the election timeout in force.
	ElectionTimeout() time.Duration
	// Shutdown stops the node.
	Shutdown() error
}

// ConfigError is a configuration an engine cannot start a node with,
// naming the field.
type ConfigError struct {
	Field  string
	Reason string
}

// Error names the field and the reason.
func (e *ConfigError) Error() string { return fmt.Sprintf("replica config %s: %s", e.Field, e.Reason) }

// LogOptions say where and how a node keeps its durable log, when its
// engine keeps it in the store's journal directory.
type LogOptions struct {
	// JournalDir is the store's journal directory; StableFile the file
	// for the node's term and vote.
	JournalDir string
	StableFile string
	// The store's journal options (Options of the root package).
	SegmentSize int
	NoSync      bool
	NoPrewrite  bool
	DirectSync  bool
	Faults      *fault.Hooks
	// Contended reports whether another write waits on this node, for
	// the log's choice between parking its fdatasync and holding a
	// processor; nil means never.
	Contended func() bool
}

// Log is a node's open durable log.
type Log interface {
	// Journal is the store's journal holding the log, nil when the
	// engine keeps its log elsewhere (the store then opens an empty
	// journal of its own, so its statistics and Close behave alike).
	Journal() *journal.Journal
	// TailCut is what opening the log cut off its damaged tail, nil for
	// nothing.
	TailCut() *journal.TailCut
	// Close closes the log once the node stopped; applied is the index
	// the state machine applied, which a log persisting the commit index
	// stages first, so the next open replays every entry applied here.
	Close(applied uint64) error
}

// Config configures one node.
type Config struct {
	// NodeID is this node's ID; Addr its replication address.
	NodeID string
	Addr   string
	// Peers is the initial configuration, this node included (a joining
	// node lists itself last).
	Peers []Peer
	// Join starts a node that is not in the initial configuration: it
	// never bootstraps and waits for the leader's AddVoter.
	Join bool
	// Timeouts; zero fields take the engine's defaults.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many entries may follow the last snapshot
	// before another; TrailingLogs how many a snapshot leaves in the log;
	// 0 is the engine's default.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotDir is where a node with a durable log keeps its snapshots.
	SnapshotDir string
}

// RecoverConfig is an offline recovery of a stopped node's directory
// (Engine.Recover).
type RecoverConfig struct {
	// Log is where the node's log and votes are.
	Log LogOptions
	// SnapshotDir is where its snapshots are.
	SnapshotDir string
	// Peers is the new configuration, every one a voter.
	Peers []Peer
}

// FileError is an offline operation that could not open one of a node's
// files, naming it (File is "journal", the stable file's name, or
// "snapshots").
type FileError struct {
	File string
	Err  error
}

// Error is the cause's message.
func (e *FileError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// RPC is a node's side of the store's own peer calls: Call reaches the
// peers, and Close stops serving this node's address and closes the
// connections.
type RPC interface {
	Caller
	Close() error
}

// Engine is a replication engine, as OpenCluster and RecoverCluster use
// it. One value configures one node.
type Engine interface {
	// OpenLog opens the node's durable log in the store's journal
	// directory, or, for an engine given a log of its own, a Log whose
	// Journal is nil.
	OpenLog(opts LogOptions) (Log, error)
	// Start starts a node over log (what OpenLog returned) applying to
	// fsm, bootstrapping cfg.Peers when the node holds no state and does
	// not join. A configuration it refuses is a *ConfigError.
	Start(cfg Config, log Log, fsm FSM) (Node, error)
	// ElectionTimeout is the election timeout a node started with
	// configured (0 for the default) runs with.
	ElectionTimeout(configured time.Duration) time.Duration
	// ServeRPC serves h on addr for the peers' calls and returns this
	// node's side of the calls.
	ServeRPC(addr string, h Handler) (RPC, error)
	// Recover rewrites a stopped node's state with cfg.Peers as its only
	// configuration, applying every entry it holds to fsm first; a file
	// that does not open is a *FileError.
	Recover(cfg RecoverConfig, fsm FSM) error
}
