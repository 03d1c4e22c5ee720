// Package clusterkill is issue 27's leader SIGKILL loop with real
// processes: three cluster nodes (statestore.OpenCluster over loopback
// TCP, each its own OS process serving the wire protocol through
// wire/wstransport), writers, watchers and leases driven through the
// shipped client package, and the leader killed with SIGKILL again and
// again. RunNode is the node process (ServeLines its main, commands on
// its stdin; internal/nemesis and bench/cmd/qualify's cluster rows run
// it too, the latter with replica's default timeouts); the test in this
// package is the parent and holds the checks:
//
//   - every acknowledged write is present or superseded on every node,
//     and a read or write never answers a revision older than one
//     acknowledged before it started (revisions never go back);
//   - every node serves the same entries at the end (linearizable reads
//     after quiescing);
//   - each lease, acquired and never renewed, is expired by exactly one
//     EXPIRE (every watcher that saw it saw the same revision), never
//     before its deadline, and is gone everywhere at the end;
//   - every watch sequence is contiguous with increasing revisions; a
//     re-snapshot is allowed only after a closure or a lost connection,
//     never after a sequence gap, and never goes back in revision.
//
// A killed leader is restarted only once the other two elected a new one:
// a follower that still took it for the leader would forward a write to
// the restarting process, which OpenCluster answers before its raft node
// exists, and crashes (TestForwardDuringOpenCluster, skipped until
// cluster.go is fixed).
//
// Not checked here: the byte identity of the nodes' checkpoint images
// (the root package's TestClusterImagesAreByteIdentical does it in
// process); the nodes' views are compared entry by entry instead.
//
// The raft timeouts are short so that a kill costs little wall time:
// HeartbeatTimeout and ElectionTimeout 100 ms, LeaderLeaseTimeout 50 ms,
// CommitTimeout package replica's default, 2 ms. The store runs on
// the wall clock: the nodes are processes on one machine and share it.
package clusterkill

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The node's raft timeouts: short, so an election after a kill takes a
// few hundred milliseconds.
const (
	HeartbeatTimeout   = 100 * time.Millisecond
	ElectionTimeout    = 100 * time.Millisecond
	LeaderLeaseTimeout = 50 * time.Millisecond
)

// The node's raft snapshot settings: a snapshot leaves a short log, so a
// restart (which reads every entry of its log) stays fast over a thousand
// kills, and a node that fell behind may be sent a snapshot. Raft's own
// snapshot timer (SnapshotInterval, 2-4 minutes) never fires in the
// loop, since every node is restarted within seconds, so NodeConfig's
// CheckpointEvery takes the snapshots (Store.Checkpoint).
const (
	SnapshotThreshold = 1024
	TrailingLogs      = 512
)

// Token is the bearer token every node accepts, for Principal.
const Token = "clusterkill"

// Principal is the one principal the nodes serve.
var Principal = statestore.Principal{ID: "clusterkill", Admin: true}

// Peer is one node of the cluster: its raft, forwarding and WebSocket
// addresses on 127.0.0.1.
type Peer struct {
	ID       string
	RaftAddr string
	RPCAddr  string
	WSAddr   string
}

// NodeConfig is what a node process is started with.
type NodeConfig struct {
	ID    string // which of Peers this node is
	Dir   string // its directory, kept across restarts
	Peers []Peer
	// CheckpointEvery, when positive, takes a raft snapshot
	// (Store.Checkpoint) this often.
	CheckpointEvery time.Duration
	// RaftDial, when set, maps a peer's raft address (as the raft
	// configuration holds it, the same on every node) to the address this
	// node dials it at: internal/nemesis puts a fault proxy per ordered
	// pair of nodes there, so it can cut one direction of one pair. The
	// node still listens on its own RaftAddr. Addresses it does not map
	// are dialed as they are.
	RaftDial map[string]string `json:",omitempty"`
	// Control, when set, takes commands while the node runs (ControlFailSync,
	// ControlRemove, ControlAdd, ControlTransfer); each is answered with
	// one line starting LineControlOK or LineControlErr followed by the
	// command. ServeLines reads them from the parent's pipe.
	Control <-chan string `json:"-"`
	// Faults arms the journal's fault hooks (statestore.Options.Faults),
	// which ControlFailSync needs; a node without them runs the journal's
	// path as an operator's does.
	Faults bool `json:",omitempty"`
	// ReplicaDefaults leaves the raft timeouts and snapshot settings at
	// package replica's defaults, what an operator runs, instead of this
	// package's short ones: bench/cmd/qualify's cluster rows measure that.
	ReplicaDefaults bool `json:",omitempty"`
	// LeaderPoll is how often the node checks whether it leads: the lag
	// of its LineLeader and LineFollower. 0 means 5 ms.
	LeaderPoll time.Duration `json:",omitempty"`
	// Authenticator, when set, replaces Token for Principal: qualify's
	// nodes serve a principal per owner, as its single-store rows do.
	Authenticator wstransport.Authenticator `json:"-"`
}

// Control commands, each a line of words: the command, then its argument.
const (
	// ControlFailSync N fails the next N fdatasyncs of the node's journal
	// (its raft log) with EIO, through internal/fault's Sync seam.
	ControlFailSync = "failsync"
	// ControlRemove ID removes ID from the configuration; only the
	// leader can.
	ControlRemove = "remove"
	// ControlAdd ID adds ID, one of Peers, back as a voter, with the
	// addresses this node knows it by; only the leader can.
	ControlAdd = "add"
	// ControlTransfer [ID] hands leadership to ID, or without one to
	// whichever follower raft picks, and is answered once the transfer
	// completed; only the leader can.
	ControlTransfer = "transfer"
)

// Lines a node prints on its output, one per line.
const (
	LineServing  = "serving"  // the store is open and the WebSocket listener up
	LineReady    = "ready"    // a leader is known and this node caught up with it
	LineLeader   = "leader"   // this node leads and admits writes
	LineFollower = "follower" // this node stopped leading
	// LineControlOK and LineControlErr start the answer to a Control
	// command: "ctl ok <command>", "ctl err <command>: <error>".
	LineControlOK  = "ctl ok"
	LineControlErr = "ctl err"
)

// RunNode runs one node until stop is closed: the store as a cluster node
// over TCP, served over WebSocket on its WSAddr at client.WebSocketPath.
// It prints LineServing once serving, LineReady once caught up, and
// LineLeader and LineFollower as its leadership changes (polled every
// cfg.LeaderPoll), so the parent knows whom to kill.
func RunNode(cfg NodeConfig, out io.Writer, stop <-chan struct{}) error {
	var self *Peer
	var peers []statestore.Peer
	for i, p := range cfg.Peers {
		peers = append(peers, statestore.Peer{ID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr})
		if p.ID == cfg.ID {
			self = &cfg.Peers[i]
		}
	}
	if self == nil {
		return fmt.Errorf("clusterkill: node %q is not among the peers", cfg.ID)
	}
	engine := &replica.Raft{}
	co := statestore.ClusterOptions{NodeID: cfg.ID, RaftAddr: self.RaftAddr, RPCAddr: self.RPCAddr, Peers: peers, Engine: engine}
	if !cfg.ReplicaDefaults {
		co.HeartbeatTimeout, co.ElectionTimeout, co.LeaderLeaseTimeout = HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout
		co.SnapshotThreshold, co.TrailingLogs = SnapshotThreshold, TrailingLogs
	}
	var trans *replica.Transport
	if cfg.RaftDial != nil {
		ln, err := net.Listen("tcp", self.RaftAddr)
		if err != nil {
			return fmt.Errorf("clusterkill: node %s raft listen: %w", cfg.ID, err)
		}
		trans = replica.NewStreamTransport(&dialMap{ln: ln, to: cfg.RaftDial})
		engine.Transport = trans
	}
	opts := statestore.Options{Dir: cfg.Dir}
	if cfg.Faults {
		opts.Faults = &fault.Hooks{}
	}
	s, err := statestore.OpenCluster(opts, co)
	if err != nil {
		if trans != nil {
			trans.Close()
		}
		return fmt.Errorf("clusterkill: node %s open: %w", cfg.ID, err)
	}
	closeStore := func() error {
		err := s.Close()
		if trans != nil {
			// The store's raft node leaves a transport it was given open.
			err = errors.Join(err, trans.Close())
		}
		return err
	}
	auth := cfg.Authenticator
	if auth == nil {
		auth = wstransport.TokenAuthenticator{Token: Token, Principal: Principal}
	}
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{Authenticator: auth})
	if err != nil {
		closeStore()
		return err
	}
	ln, err := net.Listen("tcp", self.WSAddr)
	if err != nil {
		h.Close()
		closeStore()
		return fmt.Errorf("clusterkill: node %s listen: %w", cfg.ID, err)
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
	say(LineServing)
	go func() {
		select {
		case <-s.Cluster().Ready():
			say(LineReady)
		case <-stop:
		}
	}()
	if cfg.CheckpointEvery > 0 {
		go func() {
			t := time.NewTicker(cfg.CheckpointEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					// A refusal (nothing new to snapshot, a snapshot
					// under way) is the next tick's to retry.
					s.Checkpoint()
				}
			}
		}()
	}
	if cfg.Control != nil {
		go control(cfg, s, opts.Faults, say, stop)
	}
	tick := time.NewTicker(cmp.Or(cfg.LeaderPoll, 5*time.Millisecond))
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
					say(LineLeader)
				} else {
					say(LineFollower)
				}
			}
		}
	}
	h.Close()
	srv.Close()
	if errors.Is(serr, http.ErrServerClosed) {
		serr = nil
	}
	return errors.Join(serr, closeStore())
}

// ServeLines runs RunNode with its Control commands read from in, one a
// line, until in ends (the parent closed it, or died): the main of a node
// process whose parent holds its stdin, so no node outlives its parent.
func ServeLines(cfg NodeConfig, in io.Reader, out io.Writer) error {
	ctl := make(chan string)
	stop := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(stop)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case ctl <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	cfg.Control = ctl
	return RunNode(cfg, out, stop)
}

// control runs cfg.Control's commands until stop.
func control(cfg NodeConfig, s *statestore.Store, hooks *fault.Hooks, say func(string), stop <-chan struct{}) {
	var failing *atomic.Int64 // fdatasyncs still to fail; nil without hooks
	if hooks != nil {
		failing = new(atomic.Int64)
		hooks.SetSync(func(string) error {
			for {
				n := failing.Load()
				if n <= 0 {
					return nil
				}
				if failing.CompareAndSwap(n, n-1) {
					return syscall.EIO
				}
			}
		})
	}
	for {
		var line string
		select {
		case <-stop:
			return
		case l, ok := <-cfg.Control:
			if !ok {
				return
			}
			line = l
		}
		if err := command(cfg, s, failing, line); err != nil {
			say(fmt.Sprintf("%s %s: %v", LineControlErr, line, err))
		} else {
			say(LineControlOK + " " + line)
		}
	}
}

// command runs one Control command.
func command(cfg NodeConfig, s *statestore.Store, failing *atomic.Int64, line string) error {
	f := strings.Fields(line)
	if len(f) == 1 && f[0] == ControlTransfer {
		return s.Cluster().TransferLeadership("")
	}
	if len(f) != 2 {
		return fmt.Errorf("want a command and one argument")
	}
	switch f[0] {
	case ControlTransfer:
		return s.Cluster().TransferLeadership(f[1])
	case ControlFailSync:
		if failing == nil {
			return fmt.Errorf("the node's fault hooks are not armed (NodeConfig.Faults)")
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("count %q: want a whole number", f[1])
		}
		failing.Store(n)
		return nil
	case ControlRemove:
		return s.Cluster().RemoveServer(f[1])
	case ControlAdd:
		for _, p := range cfg.Peers {
			if p.ID == f[1] {
				return s.Cluster().AddVoter(statestore.Peer{ID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr})
			}
		}
		return fmt.Errorf("node %q is not among the peers", f[1])
	}
	return fmt.Errorf("unknown command %q", f[0])
}

// dialMap is a raft.StreamLayer listening on the node's own raft address
// and dialing each peer at the address to, when it maps it, names.
type dialMap struct {
	ln net.Listener
	to map[string]string
}

func (d *dialMap) Accept() (net.Conn, error) { return d.ln.Accept() }
func (d *dialMap) Close() error              { return d.ln.Close() }
func (d *dialMap) Addr() net.Addr            { return d.ln.Addr() }

func (d *dialMap) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	if to, ok := d.to[addr]; ok {
		addr = to
	}
	return net.DialTimeout("tcp", addr, timeout)
}
