package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/natspeer"
	"github.com/keeppeek/statestore/bench/raftpeer"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/schema"
)

// The cluster (issue 28): the store's three node processes beside three-
// member clusters of etcd and NATS JetStream and the raft-wal floor, in
// alternating rounds in one run, and the cluster's own figures
// (follower watch delivery, failover, leader transfer). `--only cluster`
// runs the group.
const (
	nameClusterSerial     = "cluster_serial"
	nameClusterConcurrent = "cluster_concurrent"
	groupCluster          = "cluster"
)

// The row names, report's (they are what the targets read).
const (
	nameClusterCAS           = report.ClusterCAS
	nameClusterCASConcurrent = report.ClusterCASConcurrent
	nameFollowerWatch        = report.FollowerWatchDelivery
	nameFailover             = report.Failover
	nameLeaderTransfer       = report.LeaderTransfer
)

// failoverKills and leaderTransfers are the events of the full-size rows.
const (
	failoverKills   = 10
	leaderTransfers = 20
)

// clusterWatchWrites bounds follower_watch_delivery's writes: one sample
// each, and each waits for the follower's update.
const clusterWatchWrites = 1000

// retryPause is how long a probe writer waits after a refused write
// before it tries again.
const retryPause = 2 * time.Millisecond

// clusterCAS is the client side of cluster_cas: each owner has its own
// client.Client, owner k's connected first to node k mod 3 (and moving
// on to the others in turn), compare-and-setting its document.
type clusterCAS struct {
	nodes   *clusterNodes
	owners  []*casOwner
	clients []*client.Client

	// via splits the operations' latencies by whether the node the
	// owner's client was connected to led when the answer came: where
	// the time goes, since a follower forwards the write and waits to
	// apply it itself before it answers. Index 0 is the leader's.
	mu  sync.Mutex
	via [2]*harness.Latencies
}

func newClusterCAS(nodes *clusterNodes) (*clusterCAS, error) {
	c := &clusterCAS{nodes: nodes, owners: newOwners(casKeys), via: [2]*harness.Latencies{harness.NewLatencies(0), harness.NewLatencies(0)}}
	for k, o := range c.owners {
		cl, err := client.Dial(context.Background(), client.Config{Endpoints: nodes.endpoints(k % clusterSize), Token: tokenOf(o)})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: dial %v as %s: %w", nameClusterCAS, nodes.endpoints(k%clusterSize), o.Principal.ID, err), c.close())
		}
		c.clients = append(c.clients, cl)
	}
	return c, nil
}

// put is owner k's next compare-and-set.
func (c *clusterCAS) put(k int) error {
	o := c.owners[k]
	start := time.Now()
	e, err := c.clients[k].Put(context.Background(), o.Request())
	if err != nil {
		return err
	}
	took := time.Since(start)
	if e.Revision <= o.Rev {
		return fmt.Errorf("owner %s: revision %d answered after %d", o.Principal.ID, e.Revision, o.Rev)
	}
	o.Rev = e.Revision
	side := 1
	if c.nodes.leads(c.clients[k].Endpoint()) {
		side = 0
	}
	c.mu.Lock()
	c.via[side].Record(took)
	c.mu.Unlock()
	return nil
}

// split moves the latencies recorded since the last split into r's
// figures (the p50 through the leader's node and through a follower's,
// and how many of each).
func (c *clusterCAS) split(r *harness.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Figures == nil {
		r.Figures = map[string]float64{}
	}
	for i, fig := range [][2]string{{report.FigViaLeaderOps, report.FigViaLeaderP50Us}, {report.FigViaFollowerOps, report.FigViaFollowerP50Us}} {
		l := c.via[i]
		r.Figures[fig[0]] = float64(l.Len())
		r.Figures[fig[1]] = harness.Micros(l.Percentile(50))
		l.Reset()
	}
}

// Close closes every client.
func (c *clusterCAS) Close() error { return c.close() }

func (c *clusterCAS) close() error {
	var errs []error
	for _, cl := range c.clients {
		errs = append(errs, cl.Close())
	}
	c.clients = nil
	return errors.Join(errs...)
}

// clusterSides opens the four sides of the cluster comparison, each with
// one connection per owner (the floor writes at its leader), and adds
// their closers to cl.
type clusterSides struct {
	nodes *clusterNodes
	cas   *clusterCAS
	etcd  casPeer
	nats  casPeer
	raft  casPeer
	// raftlog is the floor over the store's log (raftlog_cluster_floor),
	// opened for cluster_serial only: nil otherwise.
	raftlog casPeer
}

// openClusterSides opens the sides; withRaftlog adds the floor over the
// store's own log.
func openClusterSides(env *Env, cl *closers, withRaftlog bool) (*clusterSides, error) {
	var s clusterSides
	nodes, err := startCluster(env, nameClusterCAS)
	if err != nil {
		return nil, err
	}
	*cl = append(*cl, nodes.close)
	s.nodes = nodes
	if s.cas, err = newClusterCAS(nodes); err != nil {
		return nil, err
	}
	*cl = append(*cl, s.cas.close)
	if s.etcd, err = openIn(env, cl, etcdpeer.NameClusterCAS, func(dir string) (casPeer, error) {
		return etcdpeer.OpenCluster(dir, clusterSize, casKeys, harness.DocBytes, casKeys)
	}); err != nil {
		return nil, err
	}
	if s.nats, err = openIn(env, cl, natspeer.NameR3CAS, func(dir string) (casPeer, error) {
		return natspeer.OpenCluster(dir, clusterSize, casKeys, harness.DocBytes, casKeys)
	}); err != nil {
		return nil, err
	}
	if s.raft, err = openIn(env, cl, raftpeer.NameFloor, func(dir string) (casPeer, error) {
		return raftpeer.Open(dir, clusterSize, env.Payload)
	}); err != nil {
		return nil, err
	}
	if withRaftlog {
		if s.raftlog, err = openIn(env, cl, raftpeer.NameRaftlogFloor, func(dir string) (casPeer, error) {
			return raftpeer.OpenLog(dir, clusterSize, env.Payload, raftpeer.Raftlog)
		}); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// runClusterSerial alternates, in rounds of one compare-and-set per
// owner, cluster_cas, etcd_cluster_cas, nats_kv_r3_cas,
// raftwal_cluster_floor and raftlog_cluster_floor (the same floor on the
// store's log: what the log costs apart from the node's own path), env.Ops
// operations each.
func runClusterSerial(env *Env) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	s, err := openClusterSides(env, &cl, true)
	if err != nil {
		return nil, err
	}
	sides := []harness.SerialSide{
		{Name: nameClusterCAS, Op: func(i int) error { return s.cas.put(i % casKeys) }},
		{Name: etcdpeer.NameClusterCAS, Op: func(i int) error { return s.etcd.CAS(i % casKeys) }},
		{Name: natspeer.NameR3CAS, Op: func(i int) error { return s.nats.CAS(i % casKeys) }},
		{Name: raftpeer.NameFloor, Op: func(i int) error { return s.raft.CAS(i % casKeys) }},
		{Name: raftpeer.NameRaftlogFloor, Op: func(i int) error { return s.raftlog.CAS(i % casKeys) }},
	}
	out, err = env.Run.AlternateSerial(sides, casRounds(env), casKeys)
	if err == nil {
		s.cas.split(&out[0])
	}
	return out, err
}

// runClusterConcurrent alternates, at each writer count, bursts of the
// four sides' partitioned compare-and-set (the floor's appends), on the
// same clusters for every writer count.
func runClusterConcurrent(env *Env) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	for _, w := range env.Writers {
		if w > casKeys {
			return nil, fmt.Errorf("%d writers exceed %d owners", w, casKeys)
		}
	}
	s, err := openClusterSides(env, &cl, false)
	if err != nil {
		return nil, err
	}
	for _, w := range env.Writers {
		writers := w
		key := func(wr, i int) int { return ownerOf(wr, i, writers) }
		sides := []harness.ConcurrentSide{
			{Name: nameClusterCASConcurrent, Op: func(wr, i int) error { return s.cas.put(key(wr, i)) }},
			{Name: etcdpeer.NameClusterCASConcurrent, Op: func(wr, i int) error { return s.etcd.CAS(key(wr, i)) }},
			{Name: natspeer.NameR3CASConcurrent, Op: func(wr, i int) error { return s.nats.CAS(key(wr, i)) }},
			{Name: raftpeer.NameFloorConcurrent, Op: func(wr, i int) error { return s.raft.CAS(key(wr, i)) }},
		}
		rs, err := env.Run.AlternateConcurrent(sides, writers, targetBursts, burstOf(env))
		if err == nil {
			s.cas.split(&rs[0])
		}
		out = append(out, rs...)
		if err != nil {
			return out, fmt.Errorf("%d writers: %w", writers, err)
		}
		for _, r := range rs {
			env.Logf("%s writers=%d: %.0f ops/s", r.Name, r.Writers, r.OpsPerS)
		}
	}
	return out, nil
}

// runFollowerWatch is follower_watch_delivery: on a fresh cluster, a
// writer connected to the leader compare-and-sets owner 0's document
// while a watcher connected only to a follower follows its namespace;
// each sample is from the writer holding the leader's answer to the
// watcher holding the update of that revision.
func runFollowerWatch(env *Env) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	nodes, err := startCluster(env, nameFollowerWatch)
	if err != nil {
		return nil, err
	}
	cl = append(cl, nodes.close)
	l, err := nodes.leader()
	if err != nil {
		return nil, err
	}
	f := (l + 1) % clusterSize
	o := newOwners(1)[0]
	writer, err := client.Dial(context.Background(), client.Config{Endpoints: nodes.endpoints(l)[:1], Token: tokenOf(o)})
	if err != nil {
		return nil, err
	}
	cl = append(cl, writer.Close)
	reader, err := client.Dial(context.Background(), client.Config{Endpoints: nodes.endpoints(f)[:1], Token: tokenOf(o)})
	if err != nil {
		return nil, err
	}
	cl = append(cl, reader.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cl = append(cl, func() error { cancel(); return nil })
	w, err := reader.Watch(ctx, o.Namespace, "")
	if err != nil {
		return nil, fmt.Errorf("%s: watch at the follower: %w", nameFollowerWatch, err)
	}
	if ev, err := w.Next(ctx); err != nil || ev.Kind != client.EventSnapshot {
		return nil, fmt.Errorf("%s: first event %v (%v), want the snapshot", nameFollowerWatch, ev.Kind, err)
	}
	type receipt struct {
		rev uint64
		at  time.Time
		err error
	}
	got := make(chan receipt, 64)
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			ev, err := w.Next(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				got <- receipt{err: err}
				return
			case ev.Kind != client.EventUpdate:
				got <- receipt{err: fmt.Errorf("%v at the follower (%s): every update must arrive in order", ev.Kind, ev.Cause)}
				return
			}
			got <- receipt{rev: ev.Revision, at: time.Now()}
		}
	})
	cl = append(cl, func() error { cancel(); w.Close(); readers.Wait(); return nil })
	n := min(env.Ops, clusterWatchWrites)
	lat := harness.NewLatencies(n)
	early := 0
	start := time.Now()
	for i := range n {
		e, err := writer.Put(ctx, o.Request())
		if err != nil {
			return nil, fmt.Errorf("%s: write %d: %w", nameFollowerWatch, i, err)
		}
		acked := time.Now()
		o.Rev = e.Revision
		var r receipt
		for r.rev < e.Revision {
			select {
			case r = <-got:
			case <-time.After(clusterGuard):
				return nil, fmt.Errorf("%s: write %d (revision %d): no update at the follower within %v", nameFollowerWatch, i, e.Revision, clusterGuard)
			}
			if r.err != nil {
				return nil, fmt.Errorf("%s: write %d: %w", nameFollowerWatch, i, r.err)
			}
		}
		if r.rev != e.Revision {
			return nil, fmt.Errorf("%s: write %d: the follower delivered revision %d, not the answered %d", nameFollowerWatch, i, r.rev, e.Revision)
		}
		took := r.at.Sub(acked)
		if took < 0 {
			took, early = 0, early+1
		}
		lat.Record(took)
		if err := env.Run.Check(nameFollowerWatch, -1, i, took); err != nil {
			return nil, err
		}
	}
	res := harness.Result{Name: nameFollowerWatch, Writers: 1, OpsPerS: float64(n) / time.Since(start).Seconds(),
		Figures: map[string]float64{report.FigEvents: float64(n), report.FigUpdatesBeforeAck: float64(early)},
		Note: fmt.Sprintf("n=%d compare-and-sets of owner 0's document through client/ at the leader, watched through client/ at a follower; %d updates reached the watcher before the answer reached the writer (counted as 0)",
			n, early)}
	lat.Fill(&res)
	return []harness.Result{res}, nil
}

// probe is a set of writers, one client per node (client j connected
// first to node j), each putting its owner's document blind and retrying
// any refusal after retryPause, and the one measurement armed at a time:
// the time from from to the first acknowledgement of a write started
// after after.
type probe struct {
	owners  []*casOwner
	clients []*client.Client
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	armed bool
	from  time.Time
	after time.Time
	first chan time.Duration

	counting    atomic.Bool
	unavailable atomic.Int64
	other       atomic.Int64
	// causes holds the first few refusals counted, for the row's note.
	causes []string
}

// maxCauses bounds probe.causes.
const maxCauses = 3

func startProbe(nodes *clusterNodes, name string) (*probe, error) {
	p := &probe{owners: newOwners(clusterSize), first: make(chan time.Duration, 1)}
	for j, o := range p.owners {
		cl, err := client.Dial(context.Background(), client.Config{Endpoints: nodes.endpoints(j), Token: tokenOf(o)})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: dial %v: %w", name, nodes.endpoints(j), err), p.close())
		}
		p.clients = append(p.clients, cl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	for j := range p.owners {
		p.wg.Go(func() { p.write(ctx, j) })
	}
	return p, nil
}

// write is writer j's loop until ctx ends.
func (p *probe) write(ctx context.Context, j int) {
	o := p.owners[j]
	req := statestore.PutRequest{Namespace: o.Namespace, Key: casKey, Schema: schema.MediaIntentV1, Document: o.Doc}
	for ctx.Err() == nil {
		started := time.Now()
		cctx, cancel := context.WithTimeout(ctx, clusterGuard)
		_, err := p.clients[j].Put(cctx, req)
		cancel()
		if err == nil {
			p.acked(started)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if p.counting.Load() {
			if statestore.CodeOf(err) == statestore.Unavailable {
				p.unavailable.Add(1)
			} else {
				p.other.Add(1)
			}
			p.mu.Lock()
			if len(p.causes) < maxCauses {
				p.causes = append(p.causes, fmt.Sprintf("writer %d: %v", j, err))
			}
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
}

func (p *probe) acked(started time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed && started.After(p.after) {
		p.armed = false
		p.first <- time.Since(p.from)
	}
}

// arm starts a measurement from from, of the first write started after
// after.
func (p *probe) arm(from, after time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.from, p.after = true, from, after
}

// wait returns the armed measurement.
func (p *probe) wait(name string, event int) (time.Duration, error) {
	select {
	case d := <-p.first:
		return d, nil
	case <-time.After(clusterGuard):
		return 0, fmt.Errorf("%s %d: no write acknowledged within %v", name, event, clusterGuard)
	}
}

func (p *probe) close() error {
	if p.stop != nil {
		p.stop()
	}
	p.wg.Wait()
	var errs []error
	for _, cl := range p.clients {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// runFailover is failover at its full size.
func runFailover(env *Env) ([]harness.Result, error) { return failover(env, failoverKills) }

// failover kills the leader's process with SIGKILL kills times, on a
// fresh cluster with the probe's writers running: each sample is from
// the kill to the first acknowledged write started after it. The killed
// node is restarted once a write was acknowledged (so the others elected
// a leader) and caught up before the next kill.
func failover(env *Env, kills int) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	nodes, err := startCluster(env, nameFailover)
	if err != nil {
		return nil, err
	}
	cl = append(cl, nodes.close)
	p, err := startProbe(nodes, nameFailover)
	if err != nil {
		return nil, err
	}
	cl = append(cl, p.close)
	lat := harness.NewLatencies(kills)
	for k := range kills {
		l, err := nodes.leader()
		if err != nil {
			return nil, fmt.Errorf("kill %d: %w", k, err)
		}
		at := time.Now()
		p.arm(at, at)
		if err := nodes.kill(l); err != nil {
			return nil, err
		}
		d, err := p.wait(nameFailover, k)
		if err != nil {
			return nil, err
		}
		lat.Record(d)
		if err := env.Run.Check(nameFailover, -1, k, d); err != nil {
			return nil, err
		}
		if err := nodes.start(l); err != nil {
			return nil, fmt.Errorf("kill %d: restart: %w", k, err)
		}
		if err := nodes.awaitReady(l); err != nil {
			return nil, fmt.Errorf("kill %d: restart: %w", k, err)
		}
	}
	res := harness.Result{Name: nameFailover, Writers: clusterSize, Figures: map[string]float64{report.FigEvents: float64(kills)},
		Note: fmt.Sprintf("kills=%d of the leader's process (SIGKILL), %d writers (one client per node, blind puts, retried after %v); the killed node restarted and caught up before the next kill; replica's default timeouts (300 ms heartbeat and election)", kills, clusterSize, retryPause)}
	lat.Fill(&res)
	return []harness.Result{res}, nil
}

// runLeaderTransfer is leader_transfer at its full size.
func runLeaderTransfer(env *Env) ([]harness.Result, error) {
	return leaderTransfer(env, leaderTransfers)
}

// leaderTransfer asks the leader to hand leadership on transfers times,
// on a fresh cluster with the probe's writers running: each sample is
// from the TransferLeadership call to the first acknowledged write
// started after it returned, and every UNAVAILABLE answer the writers
// receive meanwhile is counted.
func leaderTransfer(env *Env, transfers int) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	nodes, err := startCluster(env, nameLeaderTransfer)
	if err != nil {
		return nil, err
	}
	cl = append(cl, nodes.close)
	p, err := startProbe(nodes, nameLeaderTransfer)
	if err != nil {
		return nil, err
	}
	cl = append(cl, p.close)
	lat := harness.NewLatencies(transfers)
	for k := range transfers {
		l, err := nodes.leader()
		if err != nil {
			return nil, fmt.Errorf("transfer %d: %w", k, err)
		}
		p.counting.Store(true)
		from := time.Now()
		if err := nodes.transfer(l); err != nil {
			return nil, fmt.Errorf("transfer %d: %w", k, err)
		}
		p.arm(from, time.Now())
		d, err := p.wait(nameLeaderTransfer, k)
		p.counting.Store(false)
		if err != nil {
			return nil, err
		}
		lat.Record(d)
		if err := env.Run.Check(nameLeaderTransfer, -1, k, d); err != nil {
			return nil, err
		}
		// The next transfer starts from a leader every node knows.
		if err := awaitNewLeader(nodes, l); err != nil {
			return nil, fmt.Errorf("transfer %d: %w", k, err)
		}
	}
	un, other := p.unavailable.Load(), p.other.Load()
	p.mu.Lock()
	causes := strings.Join(p.causes, "; ")
	p.mu.Unlock()
	res := harness.Result{Name: nameLeaderTransfer, Writers: clusterSize,
		Figures: map[string]float64{report.FigEvents: float64(transfers), report.FigUnavailableAnswers: float64(un), report.FigOtherErrors: float64(other)},
		Note:    fmt.Sprintf("transfers=%d (TransferLeadership(\"\") at the leader), %d writers (one client per node, blind puts, retried after %v): %d UNAVAILABLE and %d other refusals between each call and its first acknowledged write", transfers, clusterSize, retryPause, un, other)}
	if causes != "" {
		res.Note += "; the first: " + causes
	}
	lat.Fill(&res)
	return []harness.Result{res}, nil
}

// awaitNewLeader waits until a node other than old leads.
func awaitNewLeader(nodes *clusterNodes, old int) error {
	deadline := time.Now().Add(clusterGuard)
	for time.Now().Before(deadline) {
		if l, err := nodes.leader(); err == nil && l != old {
			return nil
		}
		time.Sleep(leaderPoll) // polling the children's reports: bounded by deadline
	}
	return fmt.Errorf("no leader but node %d within %v", old, clusterGuard)
}
