package nemesis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keeppeek/statestore/internal/clusterkill"
	"github.com/keeppeek/statestore/internal/loopback"
)

// nodes is the cluster's size.
const nodes = 3

// hangGuard bounds every wait for the cluster: far above an election, a
// restart and a catch-up, so only a stuck cluster trips it.
const hangGuard = 30 * time.Second

// checkpointEvery is how often each node takes a raft snapshot, so that
// restarts load snapshots and a node that fell behind may be sent one.
const checkpointEvery = time.Second

// proc is one node's running process.
type proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser // held open: the node stops when it closes
	done    chan struct{}  // closed once the process was waited for
	serving chan struct{}  // closed at LineServing
	ready   chan struct{}  // closed at LineReady
	state   atomic.Value   // the last of LineLeader / LineFollower
	paused  atomic.Bool    // SIGSTOPped and not yet continued
	killed  atomic.Bool    // the harness sent it SIGKILL: an exit it caused
	replies chan string    // answers to Control commands
}

// cluster is the parent's side of the three node processes and the fault
// proxies between them.
type cluster struct {
	peers   []clusterkill.Peer // each node's real addresses
	dirs    []string
	command func() *exec.Cmd
	logs    []*os.File // each node's stderr, kept across its restarts
	trace   *os.File   // the faults injected, in order (faults.log)
	// raft and rpc are the proxies [from][to]: what node from dials to
	// reach node to (nil on the diagonal).
	raft, rpc [nodes][nodes]*Proxy

	mu    sync.Mutex // guards procs
	procs [nodes]*proc
}

func newCluster(dir string, command func() *exec.Cmd) (*cluster, error) {
	addrs, err := loopback.FreeAddrs(3 * nodes)
	if err != nil {
		return nil, fmt.Errorf("nemesis: addresses: %w", err)
	}
	c := &cluster{command: command}
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		c.peers = append(c.peers, clusterkill.Peer{ID: id, RaftAddr: addrs[3*i], RPCAddr: addrs[3*i+1], WSAddr: addrs[3*i+2]})
		d := filepath.Join(dir, id)
		if err := os.MkdirAll(d, 0o755); err != nil {
			c.close()
			return nil, err
		}
		c.dirs = append(c.dirs, d)
		f, err := os.OpenFile(filepath.Join(dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.close()
			return nil, err
		}
		c.logs = append(c.logs, f)
	}
	if c.trace, err = os.OpenFile(filepath.Join(dir, "faults.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		c.close()
		return nil, err
	}
	for from := range nodes {
		for to := range nodes {
			if from == to {
				continue
			}
			if c.raft[from][to], err = NewProxy(c.peers[to].RaftAddr); err != nil {
				c.close()
				return nil, err
			}
			if c.rpc[from][to], err = NewProxy(c.peers[to].RPCAddr); err != nil {
				c.close()
				return nil, err
			}
		}
	}
	return c, nil
}

// config is node i's configuration: its peers' raft and RPC traffic
// through i's own proxies, its own addresses real.
func (c *cluster) config(i int) clusterkill.NodeConfig {
	cfg := clusterkill.NodeConfig{ID: c.peers[i].ID, Dir: c.dirs[i], CheckpointEvery: checkpointEvery, RaftDial: map[string]string{}}
	for j, p := range c.peers {
		if j != i {
			p.RPCAddr = c.rpc[i][j].Addr()
			cfg.RaftDial[p.RaftAddr] = c.raft[i][j].Addr()
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	return cfg
}

// start runs node i's process on its directory and returns once it
// serves.
func (c *cluster) start(i int) error {
	cfg, err := json.Marshal(c.config(i))
	if err != nil {
		return err
	}
	cmd := c.command()
	cmd.Env = append(cmd.Environ(), NodeEnv+"="+string(cfg))
	cmd.Stderr = c.logs[i]
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nemesis: start node %s: %w", c.peers[i].ID, err)
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan struct{}), serving: make(chan struct{}), ready: make(chan struct{}),
		replies: make(chan string, 4)}
	p.state.Store(clusterkill.LineFollower)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); {
			case l == clusterkill.LineServing:
				close(p.serving)
			case l == clusterkill.LineReady:
				close(p.ready)
			case l == clusterkill.LineLeader || l == clusterkill.LineFollower:
				p.state.Store(l)
			case strings.HasPrefix(l, "ctl "):
				select {
				case p.replies <- l:
				default: // an answer no one waits for any more
				}
			}
		}
		cmd.Wait()
		p.state.Store(clusterkill.LineFollower) // a dead node leads nothing
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	select {
	case <-p.serving:
		return nil
	case <-p.done:
		return fmt.Errorf("nemesis: node %s exited before serving: %v (see %s)", c.peers[i].ID, cmd.ProcessState, c.logs[i].Name())
	case <-time.After(hangGuard):
		return fmt.Errorf("nemesis: node %s did not serve within %v", c.peers[i].ID, hangGuard)
	}
}

func (c *cluster) proc(i int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

// alive reports whether node i's process runs (paused or not).
func (c *cluster) alive(i int) bool {
	p := c.proc(i)
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// crashed reports whether node i's process exited without the harness
// killing it (a panic, a fatal error), and how.
func (c *cluster) crashed(i int) (bool, string) {
	p := c.proc(i)
	if p == nil || c.alive(i) || p.killed.Load() {
		return false, ""
	}
	return true, p.cmd.ProcessState.String()
}

// kill SIGKILLs node i by PID and waits for it.
func (c *cluster) kill(i int) error {
	p := c.proc(i)
	p.killed.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		select {
		case <-p.done:
			return nil // it had exited already
		default:
		}
		return fmt.Errorf("nemesis: SIGKILL node %s (pid %d): %w", c.peers[i].ID, p.cmd.Process.Pid, err)
	}
	<-p.done
	p.paused.Store(false)
	return nil
}

// pause SIGSTOPs node i; resume SIGCONTs it.
func (c *cluster) pause(i int) error {
	p := c.proc(i)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("nemesis: SIGSTOP node %s: %w", c.peers[i].ID, err)
	}
	p.paused.Store(true)
	return nil
}

func (c *cluster) resume(i int) error {
	p := c.proc(i)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("nemesis: SIGCONT node %s: %w", c.peers[i].ID, err)
	}
	p.paused.Store(false)
	return nil
}

// control sends node i a Control command and waits for its answer.
func (c *cluster) control(i int, line string) error {
	p := c.proc(i)
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		return fmt.Errorf("nemesis: node %s: %s: %w", c.peers[i].ID, line, err)
	}
	select {
	case r := <-p.replies:
		if strings.HasPrefix(r, clusterkill.LineControlOK) {
			return nil
		}
		return fmt.Errorf("nemesis: node %s: %s", c.peers[i].ID, r)
	case <-p.done:
		return fmt.Errorf("nemesis: node %s exited before answering %s", c.peers[i].ID, line)
	case <-time.After(hangGuard):
		return fmt.Errorf("nemesis: node %s did not answer %s within %v", c.peers[i].ID, line, hangGuard)
	}
}

// leader returns the one running, unpaused node reporting itself leader,
// waiting up to guard for there to be exactly one; -1 if there never was.
func (c *cluster) leader(guard time.Duration) int {
	deadline := time.Now().Add(guard)
	for {
		var ls []int
		for i := range nodes {
			if p := c.proc(i); p != nil && c.alive(i) && !p.paused.Load() && p.state.Load() == clusterkill.LineLeader {
				ls = append(ls, i)
			}
		}
		if len(ls) == 1 {
			return ls[0]
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(5 * time.Millisecond) // polling the nodes' reports: bounded by deadline
	}
}

// cut partitions nodes a and b from each other, both directions, raft
// and RPC; heal puts every proxy back to Pass.
func (c *cluster) cut(a, b int, m Mode) {
	for _, px := range []*Proxy{c.raft[a][b], c.raft[b][a], c.rpc[a][b], c.rpc[b][a]} {
		px.Set(m)
	}
}

func (c *cluster) heal() {
	for from := range nodes {
		for to := range nodes {
			if from != to {
				c.raft[from][to].Set(Pass)
				c.rpc[from][to].Set(Pass)
			}
		}
	}
}

// close ends every node still running, by PID, waits for each, and
// closes the proxies and logs.
func (c *cluster) close() {
	for i := range nodes {
		p := c.proc(i)
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		p.killed.Store(true)
		p.cmd.Process.Signal(syscall.SIGKILL) // a stopped process dies of SIGKILL too
		<-p.done
	}
	for from := range nodes {
		for to := range nodes {
			for _, px := range []*Proxy{c.raft[from][to], c.rpc[from][to]} {
				if px != nil {
					px.Close()
				}
			}
		}
	}
	for _, f := range c.logs {
		f.Close()
	}
	if c.trace != nil {
		c.trace.Close()
	}
}
