package torture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// Config is one torture run.
type Config struct {
	Dir    string // the storage directory the child's store lives in
	Cycles int    // kills to perform
	Seed   uint64 // drives the kill moments and the children's workloads
	// MinRun and MaxRun bound how long a child runs after READY before the
	// kill; the moment is uniform in between. Zero means 20 ms and 250 ms.
	MinRun, MaxRun time.Duration
	// Child returns the command that runs RunChild for a cycle; the
	// caller passes dir and seed through it (kpjournal re-executes itself
	// with a hidden role).
	Child func(dir string, seed uint64) *exec.Cmd
	// CheckTimeout bounds the linearizability check of each key's window
	// (one cycle's operations, usually); zero means one minute.
	CheckTimeout time.Duration
	// Progress, if set, receives one line per cycle.
	Progress io.Writer
}

// Report is what a run found. Violations lists every broken invariant; a
// clean run has none and Linearizable.Result "ok".
type Report struct {
	Dir                 string          `json:"dir"`
	Seed                uint64          `json:"seed"`
	Cycles              int             `json:"cycles"`
	Kills               int             `json:"kills"`
	AcknowledgedWrites  int             `json:"acknowledged_writes"` // puts and deletes the store answered with success
	AcknowledgedLeases  int             `json:"acknowledged_leases"` // lease claims and renewals
	Conflicts           int             `json:"conflicts"`
	Reads               int             `json:"reads"`
	CutShort            int             `json:"cut_short"` // operations a kill interrupted (outcome unknown)
	Checkpoints         int             `json:"checkpoints"`
	BackupsVerified     int             `json:"backups_verified"`
	WatchUpdatesChecked int             `json:"watch_updates_checked"`
	TailCuts            int             `json:"tail_cuts"` // opens that cut a torn (unacknowledged) tail
	Linearizable        Linearizability `json:"linearizability"`
	Violations          []string        `json:"violations"`
	Seconds             float64         `json:"seconds"`
}

// ackedOp is the newest acknowledged mutation of one key.
type ackedOp struct {
	del       bool
	rev       uint64
	expiresMs int64 // a lease's deadline
}

// run holds a run's state across cycles.
type run struct {
	cfg     Config
	rep     *Report
	rng     *rand.Rand
	clock   int64                         // timestamps for the history: one tick per event seen
	check   *checker                      // the hot keys' history, one window per key
	last    map[string]map[string]ackedOp // namespace -> key -> newest acknowledged
	known   map[string]uint64             // namespace -> highest revision known committed
	served  map[string]uint64             // namespace -> revision the last reopen served
	limits  checkpoint.Limits
	stopped bool // the store would not reopen: no later cycle can run
}

// Run performs cfg.Cycles kill-and-verify cycles and checks the whole
// history, window by window. cfg.Dir must hold no store or one no other
// process writes. An error means the harness could not run (the store
// would not open before the first cycle, the child would not start); the
// store's faults are Violations.
func Run(cfg Config) (*Report, error) {
	if cfg.MinRun <= 0 {
		cfg.MinRun = 20 * time.Millisecond
	}
	if cfg.MaxRun < cfg.MinRun {
		cfg.MaxRun = max(cfg.MinRun, 250*time.Millisecond)
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = time.Minute
	}
	chk, err := recovery.NewChecker(quota.Limits{}, schema.NewRegistry())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &run{cfg: cfg, rep: &Report{Dir: cfg.Dir, Seed: cfg.Seed, Violations: []string{}},
		rng:  rand.New(rand.NewPCG(cfg.Seed, 0x7047)),
		last: map[string]map[string]ackedOp{casNS: {}, leaseNS: {}}, known: map[string]uint64{}, served: map[string]uint64{},
		limits: chk.CheckpointLimits(), check: newChecker(cfg.CheckTimeout)}
	if err := r.start(); err != nil {
		return r.rep, err
	}
	for i := 0; i < cfg.Cycles; i++ {
		if err := r.cycle(i); err != nil {
			return r.rep, err
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "cycle %d/%d: %d acknowledged writes, %d violations\n", i+1, cfg.Cycles, r.rep.AcknowledgedWrites, len(r.rep.Violations))
		}
		if r.stopped {
			break
		}
	}
	// Only a run that stopped early, or whose last reads failed, leaves
	// operations no observation closed.
	r.rep.Violations = append(r.rep.Violations, r.check.Close(r.rep.Cycles-1)...)
	r.rep.Linearizable = r.check.Result()
	r.rep.Seconds = time.Since(start).Seconds()
	return r.rep, nil
}

func (r *run) violate(format string, args ...any) {
	r.rep.Violations = append(r.rep.Violations, fmt.Sprintf(format, args...))
}

func (r *run) tick() int64 { r.clock++; return r.clock }

// start observes the hot keys before the first child runs, so the first
// windows start from what the store holds rather than from an assumption
// that it is new.
func (r *run) start() error {
	s, err := statestore.Open(StoreOptions(r.cfg.Dir))
	if err != nil {
		return fmt.Errorf("open %s before the first cycle: %w", r.cfg.Dir, err)
	}
	defer s.Close()
	if !r.observe(s, -1) {
		return fmt.Errorf("read the keys of %s before the first cycle: %v", r.cfg.Dir, r.rep.Violations)
	}
	return nil
}

// observe reads every hot key from s, opened by the parent while no child
// runs, and closes each key's window with the read: a definite
// observation. A read that fails closes nothing; the key's window then
// runs on into the next cycle. It reports whether every read succeeded.
func (r *run) observe(s *statestore.Store, cycle int) bool {
	all := true
	for k := range casKeys {
		c := call{Kind: opGet, Key: casKey(k)}
		callTs := r.tick()
		e, err := s.Get(context.Background(), admin, casNS, c.Key)
		res := result{Code: codeOK, Rev: e.Revision}
		switch {
		case errors.Is(err, statestore.ErrNotFound):
			res = result{Code: codeNotFound}
		case err != nil:
			r.violate("cycle %d: get %s with no child running: %v", cycle, c.Key, err)
			all = false
			continue
		default:
			if res.Value, err = valueOf(e.Document); err != nil {
				r.violate("cycle %d: %v", cycle, err)
				all = false
				continue
			}
		}
		if v := r.check.Observe(cycle, porcupine.Operation{ClientId: 0, Input: c, Call: callTs, Output: res, Return: r.tick()}); v != "" {
			r.violate("%s", v)
		}
	}
	return all
}

// record puts an operation of cycle into the history.
func (r *run) record(cycle int, o porcupine.Operation) {
	if err := r.check.Add(o); err != nil {
		r.violate("cycle %d: %v", cycle, err)
	}
}

// cycle runs one child until the kill and verifies the store after it.
func (r *run) cycle(n int) error {
	seed := r.cfg.Seed*1_000_003 + uint64(n)
	cmd := r.cfg.Child(r.cfg.Dir, seed)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	lines := make(chan string, 1<<12)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != lineReady {
			cmd.Process.Kill()
			cmd.Wait()
			r.violate("cycle %d: the child did not start: %q %s", n, l, strings.TrimSpace(stderr.String()))
			return r.reopenFailed(n)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("cycle %d: the child printed nothing for a minute: %s", n, stderr.String())
	}
	ev := newEvents(r, n)
	kill := time.After(r.cfg.MinRun + time.Duration(r.rng.Int64N(int64(r.cfg.MaxRun-r.cfg.MinRun)+1)))
	killed := false
	for !killed {
		select {
		case l, ok := <-lines:
			if !ok {
				killed = true // exited by itself: caught below
				break
			}
			ev.line(l)
		case <-kill:
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	for l := range lines {
		ev.line(l)
	}
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		r.violate("cycle %d: the child exited on its own (%v): %s", n, werr, strings.TrimSpace(stderr.String()))
	}
	r.rep.Kills++
	r.rep.Cycles++
	ev.finish(r.tick())
	return r.verify(n, ev)
}

// reopenFailed records that nothing more can run.
func (r *run) reopenFailed(n int) error {
	r.violate("cycle %d: the store cannot be used any more, stopping", n)
	r.stopped = true
	return nil
}

// verify reopens the store and checks what survived the kill.
func (r *run) verify(n int, ev *events) error {
	s, err := statestore.Open(StoreOptions(r.cfg.Dir))
	if err != nil {
		r.violate("cycle %d: Open after the kill: %v", n, err)
		return r.reopenFailed(n)
	}
	defer s.Close()
	// Each record advances one namespace revision by one, so the journal
	// holds at least the sum of the revisions known committed before the
	// last record known acknowledged.
	var floor uint64
	for _, ns := range []string{casNS, leaseNS} {
		floor += max(r.known[ns], r.served[ns])
	}
	if cut := s.OpenReport().TailCut; cut != nil {
		r.rep.TailCuts++
		if cut.Index <= floor {
			r.violate("cycle %d: Open cut the journal at index %d, but at least %d records were acknowledged: %v", n, cut.Index, floor, cut)
		}
	}
	ctx := context.Background()
	for _, ns := range []string{casNS, leaseNS} {
		rev := s.Namespace(ns).Revision
		if rev < r.known[ns] || rev < r.served[ns] {
			r.violate("cycle %d: %s is at revision %d after reopen, but %d was acknowledged and %d served before: revisions went back",
				n, ns, rev, r.known[ns], r.served[ns])
		}
		for key, op := range r.last[ns] {
			e, err := s.Get(ctx, admin, ns, key)
			now := time.Now().UnixMilli()
			// A lease may lapse while this loop runs: the Get then commits
			// its EXPIRE, so the namespace revision is read after it.
			rev := s.Namespace(ns).Revision
			switch {
			case err == nil && e.Revision < op.rev:
				r.violate("cycle %d: %s/%s at revision %d, but revision %d was acknowledged", n, ns, key, e.Revision, op.rev)
			case err == nil && op.del && e.Revision == op.rev:
				r.violate("cycle %d: %s/%s deleted at revision %d, yet present at it", n, ns, key, op.rev)
			case errors.Is(err, statestore.ErrNotFound) && !op.del && rev <= op.rev:
				r.violate("cycle %d: acknowledged write of %s/%s at revision %d is gone and nothing later happened in the namespace", n, ns, key, op.rev)
			case errors.Is(err, statestore.ErrNotFound) && !op.del && op.expiresMs > now:
				r.violate("cycle %d: lease %s/%s acknowledged at revision %d until %d is gone at %d", n, ns, key, op.rev, op.expiresMs, now)
			case err != nil && !errors.Is(err, statestore.ErrNotFound):
				r.violate("cycle %d: get %s/%s: %v", n, ns, key, err)
			}
		}
		r.served[ns] = s.Namespace(ns).Revision
	}
	// A read of every hot key closes the cycle's windows: what the restart
	// brought back is checked against everything since the last reopen.
	r.observe(s, n)
	if ev.backup != "" {
		if _, _, err := checkpoint.ReadFile(ev.backup, r.limits); err != nil {
			r.violate("cycle %d: backup %s reported complete does not load: %v", n, ev.backup, err)
		} else {
			r.rep.BackupsVerified++
		}
	}
	return nil
}
