package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keeppeek/statestore/internal/clusterkill"
	"github.com/keeppeek/statestore/internal/loopback"
)

// clusterSize is the number of nodes (and of every peer cluster's
// members).
const clusterSize = 3

// clusterGuard bounds every wait for the cluster's nodes: far above an
// election and a process start, so only a stuck cluster trips it.
const clusterGuard = 30 * time.Second

// nodeProc is one node's running process.
type nodeProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser // held open: the node stops when it closes
	done    chan struct{}  // closed once the process was waited for
	leading atomic.Bool
	// changed is signalled (never blocking) on every leadership line.
	changed chan struct{}
	ready   chan struct{}
	// answers carries the replies to clusterkill.ControlTransfer.
	answers chan string
	stderr  *lockedBuffer
}

// lockedBuffer is the tail of a child's stderr, for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if n := len(l.b); n > 4096 {
		l.b = l.b[n-4096:]
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.b))
}

// clusterNodes is the parent's side of three node processes.
type clusterNodes struct {
	exe   string
	peers []clusterkill.Peer
	dirs  []string
	mu    sync.Mutex // guards procs
	procs []*nodeProc
}

// startCluster starts clusterSize node processes, each in a scratch
// directory of its own under env's, and returns once every node is ready
// and one leads.
func startCluster(env *Env, name string) (*clusterNodes, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: this executable, to run the nodes: %w", name, err)
	}
	addrs, err := loopback.FreeAddrs(3 * clusterSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &clusterNodes{exe: exe, procs: make([]*nodeProc, clusterSize)}
	for i := range clusterSize {
		c.peers = append(c.peers, clusterkill.Peer{ID: fmt.Sprintf("node-%d", i), RaftAddr: addrs[3*i], RPCAddr: addrs[3*i+1], WSAddr: addrs[3*i+2]})
		dir, err := env.Scratch(fmt.Sprintf("%s-node-%d", name, i))
		if err != nil {
			return nil, err
		}
		c.dirs = append(c.dirs, dir)
	}
	for i := range clusterSize {
		if err := c.start(i); err != nil {
			return nil, errors.Join(err, c.close())
		}
	}
	for i := range clusterSize {
		if err := c.awaitReady(i); err != nil {
			return nil, errors.Join(err, c.close())
		}
	}
	if _, err := c.leader(); err != nil {
		return nil, errors.Join(err, c.close())
	}
	return c, nil
}

// endpoints returns the nodes' WebSocket URLs starting at node first: a
// client given them connects to first and moves on in turn.
func (c *clusterNodes) endpoints(first int) []string {
	var out []string
	for k := range clusterSize {
		out = append(out, "ws://"+c.peers[(first+k)%clusterSize].WSAddr)
	}
	return out
}

// leads reports whether the node serving endpoint (one of endpoints'
// URLs) reports that it leads.
func (c *clusterNodes) leads(endpoint string) bool {
	for i, p := range c.peers {
		if "ws://"+p.WSAddr == endpoint {
			pr := c.proc(i)
			return pr != nil && pr.leading.Load()
		}
	}
	return false
}

// start runs node i's process on its directory and returns once it
// serves.
func (c *clusterNodes) start(i int) error {
	cfg, err := json.Marshal(clusterkill.NodeConfig{ID: c.peers[i].ID, Dir: c.dirs[i], Peers: c.peers})
	if err != nil {
		return err
	}
	cmd := exec.Command(c.exe)
	cmd.Env = append(os.Environ(), envClusterNode+"="+string(cfg))
	p := &nodeProc{cmd: cmd, done: make(chan struct{}), changed: make(chan struct{}, 1), ready: make(chan struct{}),
		answers: make(chan string, 4), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: start %s: %w", c.peers[i].ID, c.exe, err)
	}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); {
			case l == clusterkill.LineServing:
				close(serving)
			case l == clusterkill.LineReady:
				close(p.ready)
			case l == clusterkill.LineLeader, l == clusterkill.LineFollower:
				p.leading.Store(l == clusterkill.LineLeader)
				select {
				case p.changed <- struct{}{}:
				default:
				}
			case l == transferOK, strings.HasPrefix(l, transferErr):
				p.answers <- l
			}
		}
		cmd.Wait()
		p.leading.Store(false)
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	select {
	case <-serving:
		return nil
	case <-p.done:
		return fmt.Errorf("node %s exited before serving (%v): %s", c.peers[i].ID, cmd.ProcessState, p.stderr)
	case <-time.After(clusterGuard):
		return fmt.Errorf("node %s did not serve within %v", c.peers[i].ID, clusterGuard)
	}
}

func (c *clusterNodes) proc(i int) *nodeProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

// awaitReady waits until node i caught up with a leader.
func (c *clusterNodes) awaitReady(i int) error {
	p := c.proc(i)
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("node %s exited before it was ready (%v): %s", c.peers[i].ID, p.cmd.ProcessState, p.stderr)
	case <-time.After(clusterGuard):
		return fmt.Errorf("node %s not ready within %v", c.peers[i].ID, clusterGuard)
	}
}

// leader returns the one live node reporting that it leads, waiting for
// one up to clusterGuard.
func (c *clusterNodes) leader() (int, error) {
	deadline := time.Now().Add(clusterGuard)
	for time.Now().Before(deadline) {
		var ls []int
		for i := range clusterSize {
			if p := c.proc(i); p != nil && p.leading.Load() {
				ls = append(ls, i)
			}
		}
		if len(ls) == 1 {
			return ls[0], nil
		}
		time.Sleep(leaderPoll) // polling the children's reports: bounded by deadline
	}
	return -1, fmt.Errorf("no single leader among %d nodes within %v", clusterSize, clusterGuard)
}

// kill sends node i SIGKILL, by its PID, and waits for it.
func (c *clusterNodes) kill(i int) error {
	p := c.proc(i)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL node %s (pid %d): %w", c.peers[i].ID, p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// A node's answers to clusterkill.ControlTransfer: done, or refused with
// the error after transferErr.
const (
	transferOK  = clusterkill.LineControlOK + " " + clusterkill.ControlTransfer
	transferErr = clusterkill.LineControlErr + " " + clusterkill.ControlTransfer
)

// transfer asks node i (the leader) to hand leadership on, and returns
// once it answered.
func (c *clusterNodes) transfer(i int) error {
	p := c.proc(i)
	if _, err := fmt.Fprintln(p.stdin, clusterkill.ControlTransfer); err != nil {
		return fmt.Errorf("node %s: send %s: %w", c.peers[i].ID, clusterkill.ControlTransfer, err)
	}
	select {
	case a := <-p.answers:
		if a != transferOK {
			return fmt.Errorf("node %s: %s", c.peers[i].ID, a)
		}
		return nil
	case <-p.done:
		return fmt.Errorf("node %s exited during a transfer: %s", c.peers[i].ID, p.stderr)
	case <-time.After(clusterGuard):
		return fmt.Errorf("node %s: no answer to %s within %v", c.peers[i].ID, clusterkill.ControlTransfer, clusterGuard)
	}
}

// close stops every node still running (its stdin closed, then SIGKILL
// by PID if it is still there after clusterGuard) and waits for each.
func (c *clusterNodes) close() error {
	var errs []error
	for i := range clusterSize {
		p := c.proc(i)
		if p == nil {
			continue
		}
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(clusterGuard):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			errs = append(errs, fmt.Errorf("node %s did not stop within %v", c.peers[i].ID, clusterGuard))
			continue
		}
		if st := p.cmd.ProcessState; st != nil && !st.Success() && !killed(st) {
			errs = append(errs, fmt.Errorf("node %s exited %v: %s", c.peers[i].ID, st, p.stderr))
		}
	}
	return errors.Join(errs...)
}

// killed reports whether the process ended by SIGKILL (the failover's
// own kills).
func killed(st *os.ProcessState) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
