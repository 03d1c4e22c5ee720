package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/clusterkill"
	"github.com/keeppeek/statestore/internal/regcheck"
	"github.com/keeppeek/statestore/schema"
)

// Config is one nemesis run.
type Config struct {
	Dir    string // holds the nodes' directories and logs; must exist
	Events int    // fault events to inject, at least 1
	Seed   uint64 // the faults' and the workload's randomness
	// Command returns a process that runs NodeMain when NodeEnv is set in
	// its environment (Run adds it): the caller's own executable, with
	// whatever selects that role.
	Command func() *exec.Cmd
	// Workers is how many clients run the hot-key workload; 0 means 6.
	Workers int
	// Faults, when set, is the fault kinds to draw from (FaultKill, ...),
	// each at its usual weight; nil means every kind.
	Faults []string
	// Progress, when set, gets one line per round.
	Progress io.Writer
}

// The fault kinds, as Report.Events counts them.
const (
	FaultKill          = "kill"             // SIGKILL and restart of a node, the leader two times in three
	FaultPause         = "pause"            // SIGSTOP, then SIGCONT, of a node, the leader one time in two
	FaultSplit         = "partition-split"  // one follower cut from the two others (1|2)
	FaultIsolateLeader = "partition-leader" // the leader cut from both followers
	FaultBridge        = "partition-bridge" // two nodes cut from each other, the third seeing both
	FaultSync          = "failed-fdatasync" // the next 1-3 fdatasyncs of a node's raft log fail with EIO, the leader's two times in three
	FaultMembership    = "membership"       // a follower removed, restarted and added back
)

// faultWeight is how often a kind is drawn.
type faultWeight struct {
	kind   string
	weight int
}

// FaultKinds lists every fault kind, in a fixed order.
func FaultKinds() []string {
	var out []string
	for _, f := range faultWeights {
		out = append(out, f.kind)
	}
	return out
}

// faultWeights is how often each kind is drawn.
var faultWeights = []faultWeight{
	{FaultKill, 20}, {FaultPause, 15}, {FaultSplit, 12}, {FaultIsolateLeader, 12}, {FaultBridge, 10},
	{FaultSync, 16}, {FaultMembership, 15},
}

// Report is what a run did and found.
type Report struct {
	Dir    string         `json:"dir"`
	Seed   uint64         `json:"seed"`
	Rounds int            `json:"rounds"`
	Events map[string]int `json:"events"` // fault events injected, by kind
	// Skipped counts fault events drawn but not injectable at that moment
	// (no leader known to aim at), by kind; they do not count as events.
	Skipped            map[string]int `json:"skipped"`
	Ops                int            `json:"operations"` // on the hot keys, recorded in the history
	Reads              int            `json:"reads"`
	AcknowledgedWrites int            `json:"acknowledged_writes"` // puts and deletes answered success
	Conflicts          int            `json:"conflicts"`
	Unknown            map[string]int `json:"unknown_outcomes"` // by operation and error code/field
	AcknowledgedLeases int            `json:"acknowledged_leases"`
	Expiries           int            `json:"expiries"` // leases whose EXPIRE a watcher saw
	EarlyExpiries      int            `json:"early_expiries"`
	WatchUpdates       int            `json:"watch_updates"`
	Resnapshots        int            `json:"resnapshots"`
	Lost               int            `json:"lost_writes"` // observations missing an acknowledged write
	// Linearizable is porcupine's verdict on the hot keys' history.
	Linearizable regcheck.Linearizability `json:"linearizability"`
	Violations   []string                 `json:"violations"` // the first 50
	Seconds      float64                  `json:"seconds"`

	violations int // all of them
}

// EventCount is the fault events injected, all kinds.
func (r *Report) EventCount() int {
	n := 0
	for _, v := range r.Events {
		n += v
	}
	return n
}

// Failed reports whether the run found any violation.
func (r *Report) Failed() bool {
	return r.violations > 0 || len(r.Violations) > 0 || r.Linearizable.Result == "illegal"
}

// run is one Run's state.
type run struct {
	cfg     Config
	rng     *rand.Rand
	c       *cluster
	st      *state
	check   *regcheck.Checker
	rep     *Report
	workers []*worker
	all     *client.Client // every endpoint: the leaser's and the observations'
	clients []*client.Client
	watches []*watcher
	leaseN  int
}

// Run starts the cluster, injects cfg.Events fault events under the
// workload and checks the history (package comment). The error is the
// harness's (a node that would not start, a cluster that never recovered
// after every fault was healed); violations are in the report.
func Run(cfg Config) (*Report, error) {
	switch {
	case cfg.Events < 1:
		return nil, fmt.Errorf("nemesis: Events %d: at least 1", cfg.Events)
	case cfg.Command == nil:
		return nil, errors.New("nemesis: Config.Command is required")
	case cfg.Workers < 0:
		return nil, fmt.Errorf("nemesis: Workers %d is negative", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 6
	}
	for i, k := range cfg.Faults {
		if !slices.ContainsFunc(faultWeights, func(f faultWeight) bool { return f.kind == k }) {
			return nil, fmt.Errorf("nemesis: Faults[%d]: unknown fault kind %q (want one of %s)", i, k, strings.Join(FaultKinds(), ", "))
		}
	}
	if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("nemesis: Dir %q: not a directory (%v)", cfg.Dir, err)
	}
	began := time.Now()
	rep := &Report{Dir: cfg.Dir, Seed: cfg.Seed, Events: map[string]int{}, Skipped: map[string]int{}, Unknown: map[string]int{}, Violations: []string{}}
	c, err := newCluster(cfg.Dir, cfg.Command)
	if err != nil {
		return nil, err
	}
	defer c.close()
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), c: c, st: newState(rep), rep: rep,
		check: regcheck.NewChecker(10 * time.Second)}
	r.check.Unit, r.check.Observation = "round", "quiesce"
	defer r.closeClients()
	err = r.loop()
	rep.Violations = append(rep.Violations, r.st.fails...)
	rep.Violations = append(rep.Violations, r.check.Close(rep.Rounds)...)
	rep.Linearizable = r.check.Result()
	if len(rep.Violations) > maxFails {
		rep.Violations = rep.Violations[:maxFails]
	}
	rep.Seconds = time.Since(began).Seconds()
	return rep, err
}

func (r *run) closeClients() {
	for _, cl := range append(slices.Clone(r.clients), r.all) {
		if cl != nil {
			cl.Close()
		}
	}
}

func (r *run) loop() error {
	for i := range nodes {
		if err := r.c.start(i); err != nil {
			return err
		}
	}
	if err := r.awaitReady(); err != nil {
		return err
	}
	ctx := context.Background()
	var eps []string
	for _, p := range r.c.peers {
		eps = append(eps, p.WSAddr)
	}
	var err error
	if r.all, err = dial(ctx, eps...); err != nil {
		return err
	}
	// One watcher per node, on that node alone, so each follows its
	// own node's commit order.
	wctx, wcancel := context.WithCancel(ctx)
	defer func() {
		wcancel()
		for _, w := range r.watches {
			<-w.done
		}
	}()
	for i, p := range r.c.peers {
		cl, err := dial(ctx, p.WSAddr)
		if err != nil {
			return err
		}
		r.clients = append(r.clients, cl)
		var w *client.Watch
		for deadline := time.Now().Add(hangGuard); ; {
			// UNAVAILABLE while the first leader settles: try again.
			if w, err = cl.Watch(wctx, ns, ""); statestore.CodeOf(err) != statestore.Unavailable || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("nemesis: watch via %s: %w", r.c.peers[i].ID, err)
		}
		wt := &watcher{name: p.ID, w: w, view: map[string]statestore.Entry{}, done: make(chan struct{})}
		r.watches = append(r.watches, wt)
		go wt.follow(wctx, r.st)
	}
	// Workers on random endpoints: one to three nodes, in random order.
	for i := range r.cfg.Workers {
		perm := r.rng.Perm(nodes)[:1+r.rng.IntN(nodes)]
		var weps, names []string
		for _, j := range perm {
			weps = append(weps, eps[j])
			names = append(names, r.c.peers[j].ID)
		}
		cl, err := dial(ctx, weps...)
		if err != nil {
			return err
		}
		r.clients = append(r.clients, cl)
		r.workers = append(r.workers, &worker{id: i + 1, c: cl, name: "client " + strings.Join(names, ","),
			rng: rand.New(rand.NewPCG(r.rng.Uint64(), uint64(i))), known: map[string]int64{}})
	}
	// The store is new: every hot key is absent, a definite observation.
	for k := range nKeys {
		if !r.observe(-1, casKey(k)) {
			return fmt.Errorf("nemesis: the first read of %s failed", casKey(k))
		}
	}
	for events := 0; events < r.cfg.Events; r.rep.Rounds++ {
		n := min(1+r.rng.IntN(2), r.cfg.Events-events)
		if err := r.round(r.rep.Rounds, n); err != nil {
			return fmt.Errorf("round %d: %w", r.rep.Rounds, err)
		}
		events += n
		if r.cfg.Progress != nil {
			fmt.Fprintf(r.cfg.Progress, "round %d: %d events, %d operations, %d violations\n", r.rep.Rounds, events, r.rep.Ops, r.rep.violations)
		}
	}
	return r.finish(wcancel)
}

// round runs the workload through n fault events, one after another, each
// injected, held a while and healed; then it quiesces and observes every
// hot key, closing its window.
func (r *run) round(round, n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, r.st, round)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.st.leaser(ctx, r.all, 150*time.Millisecond, &r.leaseN)
	}()
	var ferr error
	for range n {
		r.pause(50, 200)
		if ferr = r.inject(); ferr != nil {
			break
		}
	}
	r.pause(50, 150)
	cancel()
	wg.Wait()
	if ferr != nil {
		return ferr
	}
	// Quiesce: every fault healed, every node back and caught up, then a
	// settle longer than a node's own retry bound (two election timeouts)
	// so that nothing still in flight inside a node can apply after the
	// observation.
	r.c.heal()
	for i := range nodes {
		if p := r.c.proc(i); p.paused.Load() {
			if err := r.c.resume(i); err != nil {
				return err
			}
		}
		if crashed, how := r.c.crashed(i); crashed {
			r.st.failf("round %d: node %s exited by itself (%s; see %s)", round, r.c.peers[i].ID, how, r.c.logs[i].Name())
		}
		if !r.c.alive(i) {
			if err := r.c.start(i); err != nil {
				return err
			}
		}
	}
	if err := r.awaitReady(); err != nil {
		return err
	}
	time.Sleep(settle) // nothing to wait on: the bound of a node's own retries
	r.addRound(round, r.st.now())
	for k := range nKeys {
		r.observe(round, casKey(k))
	}
	// Every node must serve again, not only the one the observations
	// reached: a client moves off a node that answers UNAVAILABLE, so a
	// node stuck behind the others would otherwise go unnoticed.
	for i, cl := range r.clients[:nodes] {
		r.probe(round, i, cl)
	}
	return nil
}

// probe asks node i for a linearizable read (through its own client,
// which never moves) until it answers, within probeBound of the heal;
// the read is not part of the history.
func (r *run) probe(round, i int, cl *client.Client) {
	var err error
	for deadline := time.Now().Add(probeBound); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, err = cl.Get(ctx, ns, casKey(0))
		cancel()
		if err == nil || errors.Is(err, statestore.ErrNotFound) {
			return
		}
		time.Sleep(20 * time.Millisecond) // the node's catch-up has no signal here: bounded by probeBound
	}
	r.st.failf("round %d: node %s served no read within %v of the heal: %v", round, r.c.peers[i].ID, probeBound, err)
}

// probeBound is how long a healed, caught-up cluster's node may take to
// serve a read: far above a catch-up of one round's entries.
const probeBound = 10 * time.Second

// settle is the quiet time before a round's observation: above a node's
// retry bound for a call (two election timeouts, 200 ms) and the
// lifetime of a call the client gave up on.
const settle = 500 * time.Millisecond

// awaitReady waits for every node to have caught up with a leader.
func (r *run) awaitReady() error {
	for i := range nodes {
		select {
		case <-r.c.proc(i).ready:
		case <-time.After(hangGuard):
			return fmt.Errorf("nemesis: node %s not caught up within %v of the faults' heal", r.c.peers[i].ID, hangGuard)
		}
	}
	if r.c.leader(hangGuard) < 0 {
		return fmt.Errorf("nemesis: no single leader within %v of the faults' heal", hangGuard)
	}
	return nil
}

// addRound puts the round's operations into the history, those whose
// outcome is unknown returning at ts: the round has quiesced, so nothing
// applies them after the observations that follow.
func (r *run) addRound(round int, ts int64) {
	for _, o := range r.st.roundOps(ts) {
		if err := r.check.Add(o); err != nil {
			r.st.failf("round %d: %v", round, err)
		}
	}
}

// observe reads key with nothing in flight, a definite observation that
// closes its window. It reports whether the read answered (a failed one
// closes nothing: the window runs on into the next round).
func (r *run) observe(round int, key string) bool {
	for try := 0; ; try++ {
		callTs := r.st.now()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		e, err := r.all.Get(ctx, ns, key)
		cancel()
		switch {
		case err == nil:
			r.closeWindow(round, key, callTs, regcheck.Result{Code: regcheck.OK, Rev: e.Revision, Value: sourceID(e)}, r.st.now())
			return true
		case errors.Is(err, statestore.ErrNotFound):
			r.closeWindow(round, key, callTs, regcheck.Result{Code: regcheck.NotFound}, r.st.now())
			return true
		case try >= 20:
			r.st.failf("round %d: the observation of %s failed 20 times: %v", round, key, err)
			return false
		}
	}
}

// closeWindow checks an observation of key: no acknowledged write lost,
// and the key's window linearizable up to it.
func (r *run) closeWindow(round int, key string, callTs int64, res regcheck.Result, retTs int64) {
	if round >= 0 && r.st.lost(key, res) {
		r.rep.Lost++
		r.st.failf("round %d: %s observed as %v, missing an acknowledged write", round, key, res)
	}
	o := porcupine.Operation{ClientId: 0, Input: regcheck.Call{Kind: regcheck.Get, Key: key}, Call: callTs, Output: res, Return: retTs}
	if v := r.check.Observe(round, o); v != "" {
		r.st.failf("%s", v)
	}
}

// pause waits between lo and hi milliseconds, drawn from the run's seed:
// the time a fault is held, or between two.
func (r *run) pause(lo, hi int) {
	time.Sleep(time.Duration(lo+r.rng.IntN(hi-lo+1)) * time.Millisecond)
}

// draw picks a fault kind by weight.
func (r *run) draw() string {
	var from []faultWeight
	total := 0
	for _, f := range faultWeights {
		if r.cfg.Faults == nil || slices.Contains(r.cfg.Faults, f.kind) {
			from = append(from, f)
			total += f.weight
		}
	}
	n := r.rng.IntN(total)
	for _, f := range from {
		if n < f.weight {
			return f.kind
		}
		n -= f.weight
	}
	return from[0].kind
}

// trace notes a fault in the run's log (Dir/faults.log), so a failure
// names what was done before it, and on Progress.
func (r *run) trace(format string, args ...any) {
	line := fmt.Sprintf("%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
	if r.c.trace != nil {
		io.WriteString(r.c.trace, line)
	}
	if r.cfg.Progress != nil {
		io.WriteString(r.cfg.Progress, line)
	}
}

// target is the leader with probability num/den when one is known, else
// a random node.
func (r *run) target(num, den int) int {
	if r.rng.IntN(den) < num {
		if l := r.c.leader(time.Second); l >= 0 {
			return l
		}
	}
	return r.rng.IntN(nodes)
}

// follower is a random node other than l.
func (r *run) follower(l int) int { return (l + 1 + r.rng.IntN(nodes-1)) % nodes }

// inject draws one fault, injects it, holds it and heals it. A fault that
// cannot be aimed (no leader known) is counted in Skipped, and another is
// drawn, a bounded number of times.
func (r *run) inject() error {
	for range 10 {
		kind := r.draw()
		r.trace("round %d: %s", r.rep.Rounds, kind)
		ok, err := r.fault(kind)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		if ok {
			r.rep.Events[kind]++
			return nil
		}
		r.rep.Skipped[kind]++
		r.pause(100, 300)
	}
	return errors.New("nemesis: no fault could be injected ten times running")
}

// fault injects one fault of kind, holds and heals it; false if it could
// not be aimed.
func (r *run) fault(kind string) (bool, error) {
	c := r.c
	mode := Drop
	if r.rng.IntN(10) < 3 {
		mode = Blackhole
	}
	switch kind {
	case FaultKill:
		i := r.target(2, 3)
		r.trace("  SIGKILL %s", c.peers[i].ID)
		if err := c.kill(i); err != nil {
			return false, err
		}
		r.pause(0, 300)
		// Restarted once the others have a leader, so a restart races no
		// election of its own making.
		c.leader(5 * time.Second)
		return true, c.start(i)
	case FaultPause:
		i := r.target(1, 2)
		r.trace("  SIGSTOP %s", c.peers[i].ID)
		if err := c.pause(i); err != nil {
			return false, err
		}
		r.pause(200, 1500)
		return true, c.resume(i)
	case FaultSplit, FaultIsolateLeader:
		l := c.leader(2 * time.Second)
		if l < 0 {
			return false, nil
		}
		i := l
		if kind == FaultSplit {
			i = r.follower(l)
		}
		r.trace("  cut %s from the others (%v)", c.peers[i].ID, mode)
		for j := range nodes {
			if j != i {
				c.cut(i, j, mode)
			}
		}
		r.pause(300, 1500)
		c.heal()
		return true, nil
	case FaultBridge:
		b := r.rng.IntN(nodes)
		r.trace("  cut %s from %s, %s the bridge (%v)", c.peers[(b+1)%nodes].ID, c.peers[(b+2)%nodes].ID, c.peers[b].ID, mode)
		c.cut((b+1)%nodes, (b+2)%nodes, mode)
		r.pause(300, 1500)
		c.heal()
		return true, nil
	case FaultSync:
		i := r.target(2, 3)
		n := 1 + r.rng.IntN(3)
		r.trace("  fail the next %d fdatasyncs of %s", n, c.peers[i].ID)
		if err := c.control(i, fmt.Sprintf("%s %d", clusterkill.ControlFailSync, n)); err != nil {
			return false, err
		}
		r.pause(300, 1000)
		return true, c.control(i, clusterkill.ControlFailSync+" 0")
	case FaultMembership:
		return r.membership()
	}
	return false, fmt.Errorf("nemesis: unknown fault %q", kind)
}

// membership removes a follower at the leader, lets the other two run
// alone a while, restarts the removed node (raft shut it down on its
// removal) and adds it back at whichever node leads then.
func (r *run) membership() (bool, error) {
	c := r.c
	l := c.leader(2 * time.Second)
	if l < 0 {
		return false, nil
	}
	f := r.follower(l)
	id := c.peers[f].ID
	r.trace("  remove %s at %s, restart it, add it back", id, c.peers[l].ID)
	if err := c.control(l, clusterkill.ControlRemove+" "+id); err != nil {
		// Leadership moved under the call: removed or not, the node is
		// restarted and added back all the same (adding a voter is
		// idempotent), so the cluster never stays at two.
		r.trace("  remove refused: %v", err)
	}
	r.pause(200, 800)
	if err := c.kill(f); err != nil {
		return false, err
	}
	if err := c.start(f); err != nil {
		return false, err
	}
	var err error
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); {
		l = c.leader(hangGuard)
		if l < 0 || l == f {
			continue
		}
		if err = c.control(l, clusterkill.ControlAdd+" "+id); err == nil {
			return true, nil
		}
		r.pause(50, 100)
	}
	return false, fmt.Errorf("nemesis: %s not added back within %v: %v", id, hangGuard, err)
}

// finish heals everything, waits for every lease to lapse and be gone on
// every node, writes a marker every watcher must reach, and checks each
// watcher's view against the final state and each acknowledged lease's
// expiry.
func (r *run) finish(stopWatch context.CancelFunc) error {
	st := r.st
	ctx := context.Background()
	st.mu.Lock()
	var leaseKeys []string
	var last int64
	for k := range st.written {
		if strings.HasPrefix(k, "lease/") {
			leaseKeys = append(leaseKeys, k)
		}
	}
	for _, dl := range st.leases {
		last = max(last, dl)
	}
	st.mu.Unlock()
	slices.Sort(leaseKeys)
	time.Sleep(time.Until(time.UnixMilli(last))) // the store's own deadline: nothing to wait on before it
	for _, key := range leaseKeys {
		for i, cl := range r.clients[:nodes] {
			for deadline := time.Now().Add(hangGuard); ; {
				_, err := cl.Get(ctx, ns, key)
				if errors.Is(err, statestore.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					st.failf("lease %s still served by %s %v after its deadline: %v", key, r.c.peers[i].ID, hangGuard, err)
					break
				}
				time.Sleep(10 * time.Millisecond) // the leader's expiry loop runs on its own timer: bounded by deadline
			}
		}
	}
	mark, err := r.all.Put(ctx, statestore.PutRequest{Namespace: ns, Key: "marker", Schema: schema.MediaIntentV1, Document: doc("marker")})
	if err != nil {
		return fmt.Errorf("nemesis: marker write: %w", err)
	}
	for _, w := range r.watches {
		for deadline := time.Now().Add(hangGuard); ; {
			w.mu.Lock()
			rev := w.rev
			w.mu.Unlock()
			if rev >= mark.Revision {
				break
			}
			if time.Now().After(deadline) {
				st.failf("watcher on %s reached revision %d, not the marker's %d, within %v", w.name, rev, mark.Revision, hangGuard)
				break
			}
			time.Sleep(5 * time.Millisecond) // the watcher's goroutine stores its progress: bounded by deadline
		}
	}
	stopWatch()
	for _, w := range r.watches {
		<-w.done
	}
	// Each watcher's view, built from its snapshots and updates, is the
	// cluster's final state: every update delivered, none twice.
	final := map[string]statestore.Entry{}
	for k := range nKeys {
		e, err := r.all.Get(ctx, ns, casKey(k))
		switch {
		case err == nil:
			final[e.Key] = e
		case !errors.Is(err, statestore.ErrNotFound):
			return fmt.Errorf("nemesis: final read of %s: %w", casKey(k), err)
		}
	}
	final["marker"] = mark
	for _, w := range r.watches {
		for key, e := range final {
			got, ok := w.view[key]
			if !ok || got.Revision != e.Revision || string(got.Document) != string(e.Document) {
				st.failf("watcher on %s ends with %s at revision %d (present %v), the cluster at %d", w.name, key, got.Revision, ok, e.Revision)
			}
		}
		for key := range w.view {
			if _, ok := final[key]; !ok {
				st.failf("watcher on %s ends holding %s, which the cluster does not", w.name, key)
			}
		}
	}
	// An acknowledged lease no watcher saw expire must have expired where
	// each watcher re-snapshotted after its PUT.
	st.mu.Lock()
	defer st.mu.Unlock()
	for key, put := range st.ackLease {
		if st.expSeen[key] > 0 {
			continue
		}
		for _, w := range r.watches {
			if w.from <= put {
				st.failLocked("lease %s put at revision %d is gone, but the watcher on %s, following since revision %d, never saw its EXPIRE", key, put, w.name, w.from)
			}
		}
	}
	return nil
}
