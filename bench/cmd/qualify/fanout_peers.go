package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/natspeer"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The watch fan-out over the network, against the peers a user would
// pick: fanoutWatches (1,024) watchers of one key, spread over
// fanoutConns client connections (the watch_fanout's 127 sessions), and
// a writer on a connection of its own compare-and-setting the key
// fanoutRoundCount (30) times, every store fsyncing each write before it
// answers. One sample per write: from the write's send to the moment the
// last of the 1,024 watchers holds its update, the receipt that completed
// the count. The next write waits for both that and the writer's answer.
//
// ws_fanout is the store's side: the watches are WatchState watches over
// WebSocket on loopback TCP, 30 updates staying below the watch's bound
// of unacknowledged updates (32) so nothing is acknowledged, as neither
// peer's watchers acknowledge. etcd_watch_fanout: clientv3 watches over
// gRPC, the watchers of one client multiplexed on its connection.
// nats_kv_watch_fanout: JetStream KV key watchers (an ordered push
// consumer each), over nats.go connections. Each runs alone as its
// absolute row; network_fanout holds the three at once and alternates
// their writes, the rows (*.net) their ratios are read from.
const (
	nameWSFanout = "ws_fanout"
	// fanoutConns is the number of client connections the 1,024
	// watchers are spread over, watcher w on connection w mod fanoutConns.
	fanoutConns = casKeys
	// fanoutGuard bounds one round: far longer than any round takes, so
	// only a lost update trips it.
	fanoutGuard = 30 * time.Second
)

// fanoutSize is a fan-out run's shape: watchers over conns connections,
// rounds writes. The workloads run fullFanout; their test runs a small one.
type fanoutSize struct{ watchers, conns, rounds int }

var fullFanout = fanoutSize{fanoutWatches, fanoutConns, fanoutRoundCount}

// fanoutProbe counts the watchers' receipts and times each round's last.
type fanoutProbe struct {
	size   fanoutSize
	target atomic.Int64 // the receipt count that completes this round
	count  atomic.Int64
	last   chan time.Time // the completing receipt's time
	failed chan error

	mu   sync.Mutex
	seen [][]uint64 // per watcher, the revisions received in order
}

func newFanoutProbe(size fanoutSize) *fanoutProbe {
	return &fanoutProbe{size: size, last: make(chan time.Time, 1), failed: make(chan error, 1), seen: make([][]uint64, size.watchers)}
}

// got records watcher w's receipt of revision rev. A watcher's receipts
// come from one goroutine (its connection's reader), so its list needs no
// lock but the probe's, held briefly.
func (p *fanoutProbe) got(w int, rev uint64) {
	now := time.Now()
	p.mu.Lock()
	p.seen[w] = append(p.seen[w], rev)
	p.mu.Unlock()
	if p.count.Add(1) == p.target.Load() {
		p.last <- now
	}
}

func (p *fanoutProbe) fail(err error) {
	select {
	case p.failed <- err:
	default:
	}
}

// fanoutSide is one store's fan-out: its watchers' probe, its writer's
// put (which returns the committed revision once the writer holds the
// answer), and what it measured.
type fanoutSide struct {
	name, how string
	p         *fanoutProbe
	put       func() (uint64, error)
	revs      []uint64
	fan, ack  *harness.Latencies
	// rounds holds one RoundStat per write, so alternating rows show
	// their spread.
	rounds []harness.RoundStat
}

func newFanoutSide(name, how string, p *fanoutProbe, put func() (uint64, error)) *fanoutSide {
	return &fanoutSide{name: name, how: how, p: p, put: put,
		fan: harness.NewLatencies(p.size.rounds), ack: harness.NewLatencies(p.size.rounds)}
}

// round is the side's r-th write (from 1), timed from its call to the
// last watcher's receipt.
func (s *fanoutSide) round(run harness.Runner, r int) error {
	p := s.p
	p.target.Store(int64(r * p.size.watchers))
	start := time.Now()
	rev, err := s.put()
	if err != nil {
		return fmt.Errorf("%s: round %d: put: %w", s.name, r, err)
	}
	acked := time.Since(start)
	s.revs = append(s.revs, rev)
	var last time.Time
	select {
	case last = <-p.last:
	case err := <-p.failed:
		return fmt.Errorf("%s: round %d: %w", s.name, r, err)
	case <-time.After(fanoutGuard):
		return fmt.Errorf("%s: round %d: %d of %d receipts within %v", s.name, r, p.count.Load(), r*p.size.watchers, fanoutGuard)
	}
	took := last.Sub(start)
	s.fan.Record(took)
	s.ack.Record(acked)
	s.rounds = append(s.rounds, harness.RoundStat{P50us: harness.Micros(took), MaxUs: harness.Micros(took)})
	return run.Check(s.name, -1, r-1, took)
}

// verify checks that every watcher holds exactly the committed revisions,
// in commit order.
func (s *fanoutSide) verify() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	for w, got := range s.p.seen {
		if len(got) != len(s.revs) {
			return fmt.Errorf("%s: watcher %d received %d updates, want %d", s.name, w, len(got), len(s.revs))
		}
		for i := range got {
			if got[i] != s.revs[i] {
				return fmt.Errorf("%s: watcher %d: update %d has revision %d, want %d (the commit order)", s.name, w, i+1, got[i], s.revs[i])
			}
		}
	}
	return nil
}

// result is the side's row under name: p50 and max (and the rest of the
// distribution) of send-to-last-watcher, the writer's answer in the note.
func (s *fanoutSide) result(name string) harness.Result {
	size := s.p.size
	r := harness.Result{Name: name, Writers: 1, Note: fmt.Sprintf(
		"watchers=%d on one key over %d connections, writer on its own, rounds=%d; latency write-send->last watcher holding the update; write answer p50=%.0fus max=%.0fus; %s",
		size.watchers, size.conns, size.rounds, harness.Micros(s.ack.Percentile(50)), harness.Micros(s.ack.Max()), s.how)}
	s.fan.Fill(&r)
	return r
}

// fanoutAlternate runs the sides' writes in rounds, one write of each
// side per round, the order rotated every round, so their ratios are
// their own and not the machine's drift between rows; then verifies each.
func fanoutAlternate(run harness.Runner, sides []*fanoutSide) error {
	rounds := sides[0].p.size.rounds
	for r := 1; r <= rounds; r++ {
		for j := range sides {
			if err := sides[(j+r)%len(sides)].round(run, r); err != nil {
				return err
			}
		}
	}
	for _, s := range sides {
		if err := s.verify(); err != nil {
			return err
		}
	}
	return nil
}

// fanoutOpen makes one side of the fan-out in env's scratch area, with
// what closes it.
type fanoutOpen func(env *Env, size fanoutSize) (*fanoutSide, func() error, error)

// fanoutAlone runs one side on its own: the absolute row.
func fanoutAlone(open fanoutOpen) func(env *Env, size fanoutSize) ([]harness.Result, error) {
	return func(env *Env, size fanoutSize) ([]harness.Result, error) {
		s, closeSide, err := open(env, size)
		if err != nil {
			return nil, err
		}
		if err = errors.Join(fanoutAlternate(env.Run, []*fanoutSide{s}), closeSide()); err != nil {
			return nil, err
		}
		return []harness.Result{s.result(s.name)}, nil
	}
}

var (
	wsFanout        = fanoutAlone(openWSFanout)
	etcdWatchFanout = fanoutAlone(openEtcdFanout)
	natsWatchFanout = fanoutAlone(openNATSFanout)
)

func runWSFanout(env *Env) ([]harness.Result, error)        { return wsFanout(env, fullFanout) }
func runEtcdWatchFanout(env *Env) ([]harness.Result, error) { return etcdWatchFanout(env, fullFanout) }
func runNATSWatchFanout(env *Env) ([]harness.Result, error) { return natsWatchFanout(env, fullFanout) }

// nameNetworkFanout alternates the three fan-outs (rows *.net).
const nameNetworkFanout = "network_fanout"

func runNetworkFanout(env *Env) ([]harness.Result, error) { return networkFanout(env, fullFanout) }

// networkFanout is the three fan-outs at once, their writes alternating:
// ws_fanout.net, etcd_watch_fanout.net and nats_kv_watch_fanout.net, the
// rows the report's fan-out ratios and targets read.
func networkFanout(env *Env, size fanoutSize) ([]harness.Result, error) {
	return alternateFanouts(env, size, []fanoutOpen{openWSFanout, openEtcdFanout, openNATSFanout}, report.Network, "stores")
}

// alternateFanouts opens the sides, runs their writes alternating
// (fanoutAlternate) and returns each side's row under row(its name), its
// note saying what it alternated with (others: "stores", "fan-outs").
func alternateFanouts(env *Env, size fanoutSize, opens []fanoutOpen, row func(string) string, others string) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	var sides []*fanoutSide
	for _, open := range opens {
		s, closeSide, err := open(env, size)
		if err != nil {
			return nil, err
		}
		cl = append(cl, closeSide)
		sides = append(sides, s)
	}
	if err := fanoutAlternate(env.Run, sides); err != nil {
		return nil, err
	}
	for _, s := range sides {
		r := s.result(row(s.name))
		r.Rounds = s.rounds
		r.Note += fmt.Sprintf("; %d rounds of one write alternating with %d other %s", size.rounds, len(sides)-1, others)
		out = append(out, r)
	}
	return out, nil
}

// openEtcdFanout is the fan-out on embedded etcd over gRPC.
func openEtcdFanout(env *Env, size fanoutSize) (*fanoutSide, func() error, error) {
	dir, err := env.Scratch(etcdpeer.NameWatchFanout)
	if err != nil {
		return nil, nil, err
	}
	// One client (gRPC connection) per watcher connection and one more:
	// the writer's key 0 is on client 0, the watchers on clients 1 ...
	// conns.
	db, err := etcdpeer.OpenGRPC(dir, 1, harness.DocBytes, size.conns+1)
	if err != nil {
		return nil, nil, err
	}
	p := newFanoutProbe(size)
	for w := range size.watchers {
		if err := db.Watch(0, 1+w%size.conns, func(rev int64) { p.got(w, uint64(rev)) }); err != nil {
			return nil, nil, errors.Join(err, db.Close())
		}
	}
	put := func() (uint64, error) {
		err := db.CAS(0)
		return uint64(db.Revision(0)), err
	}
	return newFanoutSide(etcdpeer.NameWatchFanout, "client/v3 watches over gRPC, WAL fsynced per commit", p, put), db.Close, nil
}

// openNATSFanout is the fan-out on embedded NATS JetStream KV.
func openNATSFanout(env *Env, size fanoutSize) (*fanoutSide, func() error, error) {
	dir, err := env.Scratch(natspeer.NameWatchFanout)
	if err != nil {
		return nil, nil, err
	}
	db, err := natspeer.Open(dir, 1, harness.DocBytes, size.conns+1)
	if err != nil {
		return nil, nil, err
	}
	p := newFanoutProbe(size)
	for w := range size.watchers {
		if err := db.Watch(0, 1+w%size.conns, func(rev uint64) { p.got(w, rev) }); err != nil {
			return nil, nil, errors.Join(err, db.Close())
		}
	}
	put := func() (uint64, error) {
		err := db.CAS(0)
		return db.Revision(0), err
	}
	return newFanoutSide(natspeer.NameWatchFanout, "JetStream KV key watchers over nats.go, file storage synced per write", p, put), db.Close, nil
}

const wsFanoutNS, wsFanoutKey = "service/fanout", "intents/front-door"

// openWSFanout is the fan-out on the store over WebSocket, end to end: an
// http.Server on 127.0.0.1 serving wstransport.Handler over the
// dispatcher, 127 watching sessions holding 1,024 WatchState watches
// (watch w in session w mod 127) and a writing session.
func openWSFanout(env *Env, size fanoutSize) (side *fanoutSide, closeSide func() error, err error) {
	// One principal holds every watch, as one media server's sessions
	// would; its watch quota is raised to the run's.
	s, err := openScratch(env, nameWSFanout, statestore.Options{Limits: quota.Limits{MaxWatchesPerPrincipal: size.watchers}})
	if err != nil {
		return nil, nil, err
	}
	admin := statestore.Principal{ID: "fanout", Admin: true}
	const token = "fanout-token"
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{
		Authenticator: wstransport.TokenAuthenticator{Token: token, Principal: admin}})
	if err != nil {
		return nil, nil, errors.Join(err, s.Close())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("listen on 127.0.0.1: %w", err), h.Close(), s.Close())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var conns []*wstransport.ClientConn
	var readers sync.WaitGroup
	closeSide = func() error {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
		err := errors.Join(h.Close(), srv.Close())
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return errors.Join(err, s.Close())
	}
	defer func() {
		if err != nil {
			closeSide()
		}
	}()
	url := "ws://" + ln.Addr().String() + "/"
	hdr := http.Header{"Authorization": []string{"Bearer " + token}}
	dial := func() (*wstransport.ClientConn, error) {
		c, err := wstransport.Dial(context.Background(), url, wstransport.DialOptions{Header: hdr})
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", url, err)
		}
		conns = append(conns, c)
		return c, nil
	}
	writer, err := dial()
	if err != nil {
		return nil, nil, err
	}
	doc := testdoc.MediaIntent(harness.DocBytes, 1)
	var reqID uint64
	var rev uint64
	put := func() (uint64, error) {
		reqID++
		m := &pb.PutState{RequestId: reqID, Namespace: wsFanoutNS, Key: wsFanoutKey, Schema: schema.MediaIntentV1, Document: doc}
		if rev != 0 {
			m.ExpectedRevision = &rev
		}
		if err := writer.Send(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: m}}); err != nil {
			return 0, err
		}
		a, err := writer.Recv()
		if err != nil {
			return 0, err
		}
		e := a.GetResult().GetEntry()
		if a.GetResult().GetRequestId() != reqID || e == nil || e.GetRevision() <= rev {
			return 0, fmt.Errorf("put %d after revision %d answered %v", reqID, rev, a)
		}
		rev = e.GetRevision()
		return rev, nil
	}
	// The document exists before the watches, as the peers' does.
	if _, err := put(); err != nil {
		return nil, nil, fmt.Errorf("create: %w", err)
	}
	p := newFanoutProbe(size)
	for i := range size.conns {
		c, err := dial()
		if err != nil {
			return nil, nil, err
		}
		for w := i; w < size.watchers; w += size.conns {
			if err := c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
				RequestId: uint64(w + 1), WatchId: fmt.Sprint(w), Namespace: wsFanoutNS, KeyPrefix: "intents/"}}}); err != nil {
				return nil, nil, err
			}
			m, err := c.Recv()
			if err != nil {
				return nil, nil, err
			}
			if m.GetResult().GetWatch() == nil {
				return nil, nil, fmt.Errorf("session %d: watch %d answered %v", i, w, m)
			}
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			seqs := map[string]uint64{}
			for {
				m, err := c.Recv()
				if err != nil {
					return // closed at the end; a failure shows as a missing receipt
				}
				u := m.GetWatchUpdate()
				if u == nil {
					p.fail(fmt.Errorf("session %d: unexpected %v", i, m))
					return
				}
				var w int
				if _, err := fmt.Sscan(u.GetWatchId(), &w); err != nil || w < 0 || w >= size.watchers || w%size.conns != i {
					p.fail(fmt.Errorf("session %d: update for watch %q", i, u.GetWatchId()))
					return
				}
				if seq := u.GetWatchSequence(); seq != seqs[u.GetWatchId()]+1 {
					p.fail(fmt.Errorf("session %d: watch %d: watch_sequence %d after %d", i, w, seq, seqs[u.GetWatchId()]))
					return
				}
				seqs[u.GetWatchId()]++
				p.got(w, u.GetRevision())
			}
		}()
	}
	return newFanoutSide(nameWSFanout, "WatchState watches over WebSocket (wstransport, dispatcher), journal fdatasynced per commit, nothing acknowledged (30 updates < the bound of 32)", p, put), closeSide, nil
}
