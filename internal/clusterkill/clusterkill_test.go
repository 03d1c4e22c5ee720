package clusterkill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/loopback"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// envNode makes the test binary run RunNode with the JSON NodeConfig it
// holds instead of the tests; envKills sets the loop's kill count.
const (
	envNode  = "CLUSTERKILL_NODE"
	envKills = "CLUSTERKILL_KILLS"
)

// defaultKills is the loop's kill count without CLUSTERKILL_KILLS.
const defaultKills = 200

// checkpointEvery is how often each node takes a raft snapshot: several
// times per node lifetime at the loop's pace, so restarts load snapshots
// and a lagging node may be sent one.
const checkpointEvery = 500 * time.Millisecond

func TestMain(m *testing.M) {
	if os.Getenv(envForwardChild) != "" {
		forwardChild()
	}
	if v := os.Getenv(envNode); v != "" {
		var cfg NodeConfig
		if err := json.Unmarshal([]byte(v), &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "node config:", err)
			os.Exit(2)
		}
		// The parent holds stdin open: its end (the parent died) stops
		// the node, so no node outlives its test.
		if err := ServeLines(cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	ns      = "group/killloop"
	nKeys   = 5
	leaseTT = time.Second // the minimum TTL: leases lapse during the loop
	// hangGuard bounds every wait for the cluster: far above an election
	// and a restart, so only a stuck cluster trips it.
	hangGuard = 20 * time.Second
)

func doc(id string) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":%q,"media_kind":"video","priority":1}`, id)
}

// proc is one node's process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open: the node stops when it closes
	done  chan struct{}  // closed once the process was waited for
	state atomic.Value   // the last of LineLeader / LineFollower
	ready chan struct{}  // closed at LineReady
}

// harness is the parent's side: the nodes, their clients, and every
// observation the checks use.
type harness struct {
	t     *testing.T
	peers []Peer
	dirs  []string
	procs []*proc
	mu    sync.Mutex // guards procs

	kill atomic.Int64 // the kill number in progress, for failure messages

	fmu   sync.Mutex
	fails []string

	omu        sync.Mutex
	maxAcked   map[string]uint64            // per key, the highest acknowledged revision
	seen       map[string]map[uint64]string // key → revision → document source_id, from acks, watches and reads
	acked      int
	unknown    map[string]int             // unknown outcomes by field
	values     map[string]map[string]bool // key → every source_id written to it, acknowledged or with an unknown outcome
	leases     map[string]int64           // lease key → deadline (ms), acknowledged or seen in a watch
	ackLease   map[string]uint64          // leases acknowledged, with their PUT's revision
	expires    map[string]uint64          // lease key → the EXPIRE revision watchers saw
	expSeen    map[string]int             // lease key → watchers that saw its EXPIRE
	lateMs     []int64                    // EXPIRE receipt minus deadline
	unverified int                        // EXPIREs of leases whose deadline no one saw
	unobserved int                        // acknowledged leases whose EXPIRE fell in every watcher's re-snapshot
	killAt     atomic.Int64               // unix nanos of the last kill
	firstAck   chan time.Duration         // the first acknowledgement of a write started after killAt
	probeMu    sync.Mutex                 // orders setting killAt against the acknowledgement taking it
}

func (h *harness) failf(format string, args ...any) {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	if len(h.fails) < 30 {
		h.fails = append(h.fails, fmt.Sprintf("kill %d: ", h.kill.Load())+fmt.Sprintf(format, args...))
	}
}

func (h *harness) failed() bool {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	return len(h.fails) > 0
}

// start runs node i's process on its directory and returns once it
// serves.
func (h *harness) start(i int) *proc {
	t := h.t
	cfg, _ := json.Marshal(NodeConfig{ID: h.peers[i].ID, Dir: h.dirs[i], Peers: h.peers, CheckpointEvery: checkpointEvery})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envNode+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan struct{}), ready: make(chan struct{})}
	p.state.Store(LineFollower)
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); l {
			case LineServing:
				close(serving)
			case LineReady:
				close(p.ready)
			case LineLeader, LineFollower:
				p.state.Store(l)
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	h.mu.Lock()
	h.procs[i] = p
	h.mu.Unlock()
	select {
	case <-serving:
	case <-p.done:
		t.Fatalf("kill %d: node %s exited before serving: %v", h.kill.Load(), h.peers[i].ID, cmd.ProcessState)
	case <-time.After(hangGuard):
		t.Fatalf("kill %d: node %s did not serve within %v", h.kill.Load(), h.peers[i].ID, hangGuard)
	}
	return p
}

// sigkill kills node i by PID and waits for it.
func (h *harness) sigkill(i int) {
	h.mu.Lock()
	p := h.procs[i]
	h.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatalf("kill %d: SIGKILL node %s (pid %d): %v", h.kill.Load(), h.peers[i].ID, p.cmd.Process.Pid, err)
	}
	<-p.done
	p.state.Store(LineFollower) // a dead node leads nothing
}

// stopAll ends every node still running, by PID, and waits for each.
func (h *harness) stopAll() {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// leader returns the one node reporting itself leader, waiting for one.
func (h *harness) leader() int {
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		var ls []int
		for i, p := range h.procs {
			if p.state.Load() == LineLeader {
				ls = append(ls, i)
			}
		}
		h.mu.Unlock()
		if len(ls) == 1 {
			return ls[0]
		}
		time.Sleep(5 * time.Millisecond) // polling the children's reports: bounded by deadline
	}
	h.t.Fatalf("kill %d: no single leader within %v", h.kill.Load(), hangGuard)
	return -1
}

// observe records that key held source_id at rev, failing on two
// different documents at one revision.
func (h *harness) observe(key string, rev uint64, id, where string) {
	h.omu.Lock()
	defer h.omu.Unlock()
	m := h.seen[key]
	if m == nil {
		m = map[uint64]string{}
		h.seen[key] = m
	}
	if old, ok := m[rev]; ok && old != id {
		h.failf("%s: %s at revision %d holds %q, but %q was seen there before", where, key, rev, id, old)
		return
	}
	m[rev] = id
}

func sourceID(e statestore.Entry) string {
	var d struct {
		SourceID string `json:"source_id"`
	}
	json.Unmarshal(e.Document, &d)
	return d.SourceID
}

func (h *harness) floor(key string) uint64 {
	h.omu.Lock()
	defer h.omu.Unlock()
	return h.maxAcked[key]
}

// writer runs compare-and-set and blind puts on the shared keys through
// c until ctx ends.
func (h *harness) writer(ctx context.Context, w int, c *client.Client, name string) {
	r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("k/%d", r.IntN(nKeys))
		id := fmt.Sprintf("w%d-%d", w, i)
		x := statestore.Expect{}
		floor := h.floor(key)
		start := time.Now()
		if r.IntN(10) < 7 {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			cur, err := c.Get(cctx, ns, key)
			cancel()
			switch {
			case err == nil:
				if cur.Revision < floor {
					h.failf("writer %d via %s: Get %s answered revision %d, below %d acknowledged before it began: revisions went back", w, name, key, cur.Revision, floor)
				}
				h.observe(key, cur.Revision, sourceID(cur), "get via "+name)
				x = statestore.IfRevision(cur.Revision)
			case errors.Is(err, statestore.ErrNotFound):
				if floor > 0 {
					h.failf("writer %d via %s: Get %s is NOT_FOUND after revision %d was acknowledged", w, name, key, floor)
				}
				x = statestore.CreateOnly
			default:
				continue // a read during the failover; try again
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		e, err := c.Put(cctx, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc(id), Expect: x})
		cancel()
		if ctx.Err() != nil && err != nil {
			h.noteUnknown(key, id, "shutdown")
			return
		}
		switch {
		case err == nil:
			if e.Revision <= floor {
				h.failf("writer %d via %s: put %s acknowledged at revision %d, not above %d acknowledged before it began", w, name, key, e.Revision, floor)
			}
			h.ack(key, e.Revision, id, start, "put via "+name)
		case statestore.CodeOf(err) == statestore.Conflict:
		default:
			var se *statestore.Error
			field := "other"
			if errors.As(err, &se) {
				field = se.Code.String() + "/" + se.Field
			}
			h.noteUnknown(key, id, field)
		}
	}
}

func (h *harness) ack(key string, rev uint64, id string, start time.Time, where string) {
	h.observe(key, rev, id, where)
	h.omu.Lock()
	h.acked++
	h.maxAcked[key] = max(h.maxAcked[key], rev)
	h.values[key][id] = true
	h.omu.Unlock()
	if k := h.killAt.Load(); k != 0 && start.UnixNano() > k {
		h.probeMu.Lock()
		if h.killAt.CompareAndSwap(k, 0) {
			h.firstAck <- time.Since(time.Unix(0, k))
		}
		h.probeMu.Unlock()
	}
}

func (h *harness) noteUnknown(key, id, field string) {
	h.omu.Lock()
	defer h.omu.Unlock()
	h.unknown[field]++
	if h.values[key] == nil {
		h.values[key] = map[string]bool{}
	}
	h.values[key][id] = true
}

// leaser acquires a never-renewed lease on a fresh key every period.
func (h *harness) leaser(ctx context.Context, c *client.Client, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("lease/%d", i)
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		e, err := c.Put(cctx, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc(fmt.Sprintf("lease-%d", i)), Expect: statestore.CreateOnly, TTL: leaseTT})
		cancel()
		h.omu.Lock()
		h.values[key] = map[string]bool{fmt.Sprintf("lease-%d", i): true}
		switch {
		case err == nil:
			h.leases[key] = e.ExpiresMs
			h.ackLease[key] = e.Revision
		case statestore.CodeOf(err) != statestore.Unavailable:
			h.failf("lease %s: %v", key, err)
		}
		h.omu.Unlock()
	}
}

// watcher follows the namespace through c (one node) and checks every
// sequence and revision until ctx ends. last is its latest revision.
func (h *harness) watcher(ctx context.Context, w *client.Watch, name string, last, since *atomic.Uint64, done chan<- struct{}) {
	defer close(done)
	defer w.Close()
	var seq, rev uint64
	expired := map[string]bool{} // EXPIREs seen on this watcher
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, client.ErrClosed) {
				h.failf("watch via %s: Next: %v", name, err)
				return
			}
			continue // re-opening the watch failed (its node is down): Next tries again
		}
		switch ev.Kind {
		case client.EventSnapshot, client.EventResnapshot:
			if ev.Kind == client.EventResnapshot && !(strings.HasPrefix(ev.Cause, "closed ") || ev.Cause == "disconnected" || strings.HasPrefix(ev.Cause, "client buffer full")) {
				h.failf("watch via %s: re-snapshot without a closure: %s", name, ev.Cause)
			}
			if ev.Revision < rev {
				h.failf("watch via %s: re-snapshot at revision %d after revision %d was delivered: revisions went back (%s)", name, ev.Revision, rev, ev.Cause)
			}
			seq, rev = 0, ev.Revision
			since.Store(rev)
			for _, e := range ev.Entries {
				h.observe(e.Key, e.Revision, sourceID(e), "snapshot via "+name)
				if e.ExpiresMs != 0 {
					h.omu.Lock()
					h.leases[e.Key] = e.ExpiresMs
					h.omu.Unlock()
				}
			}
		case client.EventUpdate:
			if ev.Sequence != seq+1 {
				h.failf("watch via %s: sequence %d after %d", name, ev.Sequence, seq)
			}
			if ev.Revision <= rev {
				h.failf("watch via %s: update %s at revision %d after revision %d", name, ev.Key, ev.Revision, rev)
			}
			seq, rev = ev.Sequence, ev.Revision
			switch ev.Update {
			case watch.Put:
				h.observe(ev.Key, ev.Revision, sourceID(*ev.Entry), "watch via "+name)
				if ev.Entry.ExpiresMs != 0 {
					h.omu.Lock()
					h.leases[ev.Key] = ev.Entry.ExpiresMs
					h.omu.Unlock()
				}
			case watch.Expire:
				now := time.Now().UnixMilli()
				h.omu.Lock()
				dl, ok := h.leases[ev.Key]
				switch {
				case !ok && h.values[ev.Key] != nil:
					h.unverified++ // an unknown outcome whose PUT no watcher saw: its deadline is not known
				case !ok:
					h.failf("watch via %s: EXPIRE of %s at revision %d, a key no lease was seen on", name, ev.Key, ev.Revision)
				case now < dl:
					h.failf("watch via %s: EXPIRE of %s at revision %d received at %d ms, before its deadline %d ms", name, ev.Key, ev.Revision, now, dl)
				default:
					h.lateMs = append(h.lateMs, now-dl)
				}
				if r, ok := h.expires[ev.Key]; ok && r != ev.Revision {
					h.failf("watch via %s: %s expired at revision %d, and at revision %d elsewhere: two EXPIREs", name, ev.Key, ev.Revision, r)
				}
				h.expires[ev.Key] = ev.Revision
				if !expired[ev.Key] {
					h.expSeen[ev.Key]++
				}
				h.omu.Unlock()
				if expired[ev.Key] {
					h.failf("watch via %s: a second EXPIRE of %s at revision %d", name, ev.Key, ev.Revision)
				}
				expired[ev.Key] = true
			case watch.Delete:
				h.failf("watch via %s: DELETE of %s at revision %d, but nothing deletes", name, ev.Key, ev.Revision)
			}
		}
		last.Store(rev)
	}
}

func dial(t *testing.T, eps ...string) *client.Client {
	var urls []string
	for _, e := range eps {
		urls = append(urls, "ws://"+e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoints: urls, Token: Token, DialTimeout: time.Second,
		RequestTimeout: 3 * time.Second, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestLeaderKillLoop is issue 27's leader SIGKILL loop: three node
// processes over loopback TCP; four writers (one through each node, one
// with all three endpoints), a watcher on each node, a fresh one-second
// lease every 150 ms; the leader killed by PID, the time to the first
// acknowledged write begun after the kill measured, the node restarted on
// its directory and waited for until caught up, 200 times
// (CLUSTERKILL_KILLS raises it). Then the checks of the package comment.
func TestLeaderKillLoop(t *testing.T) {
	t.Parallel()
	kills := defaultKills
	if v, err := strconv.Atoi(os.Getenv(envKills)); err == nil && v > 0 {
		kills = v
	}
	h := &harness{t: t, maxAcked: map[string]uint64{}, seen: map[string]map[uint64]string{}, unknown: map[string]int{},
		values: map[string]map[string]bool{}, leases: map[string]int64{}, ackLease: map[string]uint64{},
		expires: map[string]uint64{}, expSeen: map[string]int{}, firstAck: make(chan time.Duration, 1)}
	for i := range nKeys {
		h.values[fmt.Sprintf("k/%d", i)] = map[string]bool{}
	}
	addrs, err := loopback.FreeAddrs(9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		h.peers = append(h.peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: addrs[3*i], RPCAddr: addrs[3*i+1], WSAddr: addrs[3*i+2]})
		h.dirs = append(h.dirs, t.TempDir())
	}
	h.procs = make([]*proc, 3)
	t.Cleanup(h.stopAll)
	began := time.Now()
	for i := range 3 {
		h.start(i)
	}
	for i := range 3 {
		select {
		case <-h.procs[i].ready:
		case <-time.After(hangGuard):
			t.Fatalf("node %s not ready within %v", h.peers[i].ID, hangGuard)
		}
	}
	var clients []*client.Client
	for _, p := range h.peers {
		clients = append(clients, dial(t, p.WSAddr))
	}
	all := dial(t, h.peers[0].WSAddr, h.peers[1].WSAddr, h.peers[2].WSAddr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w, c := range append(slices.Clone(clients), all) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.writer(ctx, w, c, fmt.Sprintf("client %d", w))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.leaser(ctx, all, 150*time.Millisecond)
	}()
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	lasts, sinces := make([]atomic.Uint64, 3), make([]atomic.Uint64, 3)
	wdone := make([]chan struct{}, 3)
	for i, c := range clients {
		// Opened before the first kill, so each begins on its own node.
		var w *client.Watch
		var err error
		for deadline := time.Now().Add(hangGuard); ; {
			// UNAVAILABLE while the first leader settles: try again.
			if w, err = c.Watch(wctx, ns, ""); statestore.CodeOf(err) != statestore.Unavailable || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("watch via %s: %v", h.peers[i].ID, err)
		}
		wdone[i] = make(chan struct{})
		go h.watcher(wctx, w, h.peers[i].ID, &lasts[i], &sinces[i], wdone[i])
	}

	var failovers, catchups []time.Duration
	loopStart := time.Now()
	for k := 1; k <= kills && !h.failed(); k++ {
		h.kill.Store(int64(k))
		l := h.leader()
		h.probeMu.Lock()
		h.killAt.Store(time.Now().UnixNano())
		h.probeMu.Unlock()
		h.sigkill(l)
		select {
		case d := <-h.firstAck:
			failovers = append(failovers, d)
		case <-time.After(hangGuard):
			t.Fatalf("kill %d: no write acknowledged within %v of killing leader %s", k, hangGuard, h.peers[l].ID)
		}
		// Restarted only once the others elected a new leader: a follower
		// that still took the killed node for the leader would forward
		// to the restarting process, whose forwarding port OpenCluster
		// opens before its raft node exists (a nil dereference in
		// clusterNode.write; TestForwardDuringOpenCluster).
		h.leader()
		h.start(l)
		restarted := time.Now()
		select {
		case <-h.procs[l].ready:
		case <-time.After(hangGuard):
			t.Fatalf("kill %d: restarted node %s did not catch up within %v", k, h.peers[l].ID, hangGuard)
		}
		catchups = append(catchups, time.Since(restarted))
		if k%100 == 0 {
			t.Logf("kill %d after %v; the last 100 restarts caught up in p50 %v, max %v", k, time.Since(loopStart).Round(time.Millisecond),
				percentile(catchups[k-100:], .5).Round(time.Millisecond), percentile(catchups[k-100:], 1).Round(time.Millisecond))
		}
	}
	loopTime := time.Since(loopStart)
	cancel()
	wg.Wait()
	if h.failed() {
		t.Fatal(strings.Join(h.fails, "\n"))
	}
	h.verifyEnd(clients, lasts, sinces, wcancel, wdone)
	if h.failed() {
		t.Fatal(strings.Join(h.fails, "\n"))
	}
	h.omu.Lock()
	defer h.omu.Unlock()
	unknown := 0
	for _, n := range h.unknown {
		unknown += n
	}
	slices.Sort(h.lateMs)
	if len(h.lateMs) == 0 {
		t.Fatal("no lease expired during the loop")
	}
	t.Logf("%d kills in %v (%v in all): %d acknowledged writes, %d unknown outcomes %v, %d leases acknowledged, %d expiries seen, %d fell in re-snapshots (receipt after deadline p50 %d ms, max %d ms); leader kill to first acknowledged write p50 %v p90 %v max %v",
		len(failovers), loopTime.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), h.acked, unknown, h.unknown,
		len(h.ackLease), len(h.expires), h.unobserved, h.lateMs[len(h.lateMs)/2], h.lateMs[len(h.lateMs)-1],
		percentile(failovers, .5).Round(time.Millisecond), percentile(failovers, .9).Round(time.Millisecond), percentile(failovers, 1).Round(time.Millisecond))
}

// verifyEnd quiesces and checks what the package comment says holds at
// the end.
func (h *harness) verifyEnd(clients []*client.Client, lasts, sinces []atomic.Uint64, stopWatch context.CancelFunc, wdone []chan struct{}) {
	t := h.t
	ctx := context.Background()
	h.kill.Store(-1) // after the loop
	// Every lease lapses: wait past the last deadline until no node
	// serves any, then a marker write every watcher must reach.
	h.omu.Lock()
	var leaseKeys []string
	var last int64
	for k, dl := range h.leases {
		leaseKeys = append(leaseKeys, k)
		last = max(last, dl)
	}
	for k := range h.values {
		if strings.HasPrefix(k, "lease/") && h.leases[k] == 0 {
			leaseKeys = append(leaseKeys, k) // an unknown outcome never seen: must not exist either
		}
	}
	h.omu.Unlock()
	time.Sleep(time.Until(time.UnixMilli(last))) // the store's own deadline: nothing to wait on before it
	for _, key := range leaseKeys {
		for i, c := range clients {
			deadline := time.Now().Add(hangGuard)
			for {
				_, err := c.Get(ctx, ns, key)
				if errors.Is(err, statestore.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					h.failf("lease %s still served by %s %v after its deadline: %v", key, h.peers[i].ID, hangGuard, err)
					break
				}
				time.Sleep(10 * time.Millisecond) // the leader's expiry loop runs on its own timer
			}
		}
	}
	mark, err := clients[0].Put(ctx, statestore.PutRequest{Namespace: ns, Key: "marker", Schema: schema.MediaIntentV1, Document: doc("marker")})
	if err != nil {
		t.Fatalf("marker write: %v", err)
	}
	for i := range lasts {
		deadline := time.Now().Add(hangGuard)
		for lasts[i].Load() < mark.Revision {
			if time.Now().After(deadline) {
				t.Fatalf("watcher on %s reached revision %d, not the marker's %d, within %v", h.peers[i].ID, lasts[i].Load(), mark.Revision, hangGuard)
			}
			time.Sleep(5 * time.Millisecond) // the watcher's goroutine stores its progress
		}
	}
	stopWatch()
	for _, d := range wdone {
		<-d
	}

	h.omu.Lock()
	defer h.omu.Unlock()
	var keys []string
	for k := range h.values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Every node serves the same entries: each acknowledged write is
	// there or superseded, and what is there was written by someone.
	for _, key := range keys {
		var first *statestore.Entry
		for i, c := range clients {
			e, err := c.Get(ctx, ns, key)
			if strings.HasPrefix(key, "lease/") {
				if !errors.Is(err, statestore.ErrNotFound) {
					h.failf("lease %s on %s: %+v, %v; want NOT_FOUND", key, h.peers[i].ID, e, err)
				}
				continue
			}
			if err != nil {
				if h.maxAcked[key] > 0 || !errors.Is(err, statestore.ErrNotFound) {
					h.failf("%s on %s: %v after revision %d was acknowledged", key, h.peers[i].ID, err, h.maxAcked[key])
				}
				continue
			}
			id := sourceID(e)
			switch {
			case e.Revision < h.maxAcked[key]:
				h.failf("%s on %s at revision %d, but revision %d was acknowledged", key, h.peers[i].ID, e.Revision, h.maxAcked[key])
			case !h.values[key][id]:
				h.failf("%s on %s holds %q at revision %d, which no writer sent", key, h.peers[i].ID, id, e.Revision)
			case h.seen[key][e.Revision] != "" && h.seen[key][e.Revision] != id:
				h.failf("%s on %s holds %q at revision %d, where %q was acknowledged or seen", key, h.peers[i].ID, id, e.Revision, h.seen[key][e.Revision])
			}
			if first == nil {
				first = &e
			} else if first.Revision != e.Revision || string(first.Document) != string(e.Document) {
				h.failf("%s differs between nodes: revision %d %q on %s, revision %d %q on %s", key, first.Revision, sourceID(*first), h.peers[0].ID, e.Revision, id, h.peers[i].ID)
			}
		}
	}
	// Every acknowledged lease expired once (checked as the EXPIREs
	// came): one no watcher saw must have fallen where each re-snapshotted
	// after its PUT, since every lease was gone before the marker, which
	// each watcher's last stream reached.
	for key, put := range h.ackLease {
		if h.expSeen[key] > 0 {
			continue
		}
		for i := range sinces {
			if s := sinces[i].Load(); s <= put {
				h.failf("lease %s put at revision %d is gone, but the watcher on %s, following since revision %d, never saw its EXPIRE", key, put, h.peers[i].ID, s)
			}
		}
		h.unobserved++
	}
}
