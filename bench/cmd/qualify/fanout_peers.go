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
// consumer each), over nats.go connections.
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

// fanoutRun is the measured loop common to the three: rounds writes by
// put (which returns the committed revision once the writer holds its
// answer), each timed from its call to the last watcher's receipt. Then
// every watcher must hold exactly the committed revisions, in order.
func fanoutRun(run harness.Runner, name string, p *fanoutProbe, put func() (uint64, error)) (fan, ack *harness.Latencies, err error) {
	fan, ack = harness.NewLatencies(p.size.rounds), harness.NewLatencies(p.size.rounds)
	var revs []uint64
	for r := 1; r <= p.size.rounds; r++ {
		p.target.Store(int64(r * p.size.watchers))
		start := time.Now()
		rev, err := put()
		if err != nil {
			return nil, nil, fmt.Errorf("round %d: put: %w", r, err)
		}
		acked := time.Since(start)
		revs = append(revs, rev)
		var last time.Time
		select {
		case last = <-p.last:
		case err := <-p.failed:
			return nil, nil, fmt.Errorf("round %d: %w", r, err)
		case <-time.After(fanoutGuard):
			return nil, nil, fmt.Errorf("round %d: %d of %d receipts within %v", r, p.count.Load(), r*p.size.watchers, fanoutGuard)
		}
		took := last.Sub(start)
		fan.Record(took)
		ack.Record(acked)
		if err := run.Check(name, -1, r-1, took); err != nil {
			return nil, nil, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for w, got := range p.seen {
		if len(got) != len(revs) {
			return nil, nil, fmt.Errorf("watcher %d received %d updates, want %d", w, len(got), len(revs))
		}
		for i := range got {
			if got[i] != revs[i] {
				return nil, nil, fmt.Errorf("watcher %d: update %d has revision %d, want %d (the commit order)", w, i+1, got[i], revs[i])
			}
		}
	}
	return fan, ack, nil
}

// fanoutResult is a fan-out row: p50 and max (and the rest of the
// distribution) of send-to-last-watcher, the writer's answer in the note.
func fanoutResult(name string, size fanoutSize, fan, ack *harness.Latencies, how string) harness.Result {
	r := harness.Result{Name: name, Writers: 1, Note: fmt.Sprintf(
		"watchers=%d on one key over %d connections, writer on its own, rounds=%d; latency write-send->last watcher holding the update; write answer p50=%.0fus max=%.0fus; %s",
		size.watchers, size.conns, size.rounds, harness.Micros(ack.Percentile(50)), harness.Micros(ack.Max()), how)}
	fan.Fill(&r)
	return r
}

// runEtcdWatchFanout is the fan-out on embedded etcd over gRPC.
func runEtcdWatchFanout(env *Env) ([]harness.Result, error) { return etcdWatchFanout(env, fullFanout) }

func etcdWatchFanout(env *Env, size fanoutSize) ([]harness.Result, error) {
	dir, err := env.Scratch(etcdpeer.NameWatchFanout)
	if err != nil {
		return nil, err
	}
	// One client (gRPC connection) per watcher connection and one more,
	// client 0 ... 127, the writer's key 0 on client 0: the watchers use
	// clients 1 ... 127.
	db, err := etcdpeer.OpenGRPC(dir, 1, harness.DocBytes, size.conns+1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	p := newFanoutProbe(size)
	for w := range size.watchers {
		if err := db.Watch(0, 1+w%size.conns, func(rev int64) { p.got(w, uint64(rev)) }); err != nil {
			return nil, err
		}
	}
	fan, ack, err := fanoutRun(env.Run, etcdpeer.NameWatchFanout, p, func() (uint64, error) {
		err := db.CAS(0)
		return uint64(db.Revision(0)), err
	})
	if err = errors.Join(err, db.Close()); err != nil {
		return nil, err
	}
	return []harness.Result{fanoutResult(etcdpeer.NameWatchFanout, size, fan, ack, "client/v3 watches over gRPC, WAL fsynced per commit")}, nil
}

// runNATSWatchFanout is the fan-out on embedded NATS JetStream KV.
func runNATSWatchFanout(env *Env) ([]harness.Result, error) { return natsWatchFanout(env, fullFanout) }

func natsWatchFanout(env *Env, size fanoutSize) ([]harness.Result, error) {
	dir, err := env.Scratch(natspeer.NameWatchFanout)
	if err != nil {
		return nil, err
	}
	db, err := natspeer.Open(dir, 1, harness.DocBytes, size.conns+1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	p := newFanoutProbe(size)
	for w := range size.watchers {
		if err := db.Watch(0, 1+w%size.conns, func(rev uint64) { p.got(w, rev) }); err != nil {
			return nil, err
		}
	}
	fan, ack, err := fanoutRun(env.Run, natspeer.NameWatchFanout, p, func() (uint64, error) {
		err := db.CAS(0)
		return db.Revision(0), err
	})
	if err = errors.Join(err, db.Close()); err != nil {
		return nil, err
	}
	return []harness.Result{fanoutResult(natspeer.NameWatchFanout, size, fan, ack, "JetStream KV key watchers over nats.go, file storage synced per write")}, nil
}

const wsFanoutNS, wsFanoutKey = "service/fanout", "intents/front-door"

// runWSFanout is the fan-out on the store over WebSocket, end to end: an
// http.Server on 127.0.0.1 serving wstransport.Handler over the
// dispatcher, 127 watching sessions holding 1,024 WatchState watches
// (watch w in session w mod 127) and a writing session.
func runWSFanout(env *Env) ([]harness.Result, error) { return wsFanout(env, fullFanout) }

func wsFanout(env *Env, size fanoutSize) (out []harness.Result, err error) {
	// One principal holds every watch, as one media server's sessions
	// would; its watch quota is raised to the run's 1,024.
	s, err := openScratch(env, nameWSFanout, statestore.Options{Limits: quota.Limits{MaxWatchesPerPrincipal: size.watchers}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	admin := statestore.Principal{ID: "fanout", Admin: true}
	const token = "fanout-token"
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{
		Authenticator: wstransport.TokenAuthenticator{Token: token, Principal: admin}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var conns []*wstransport.ClientConn
	var readers sync.WaitGroup
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
		err = errors.Join(err, h.Close(), srv.Close())
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
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
		return nil, err
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
		return nil, fmt.Errorf("create: %w", err)
	}
	p := newFanoutProbe(size)
	for i := range size.conns {
		c, err := dial()
		if err != nil {
			return nil, err
		}
		for w := i; w < size.watchers; w += size.conns {
			if err := c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
				RequestId: uint64(w + 1), WatchId: fmt.Sprint(w), Namespace: wsFanoutNS, KeyPrefix: "intents/"}}}); err != nil {
				return nil, err
			}
			m, err := c.Recv()
			if err != nil {
				return nil, err
			}
			if m.GetResult().GetWatch() == nil {
				return nil, fmt.Errorf("session %d: watch %d answered %v", i, w, m)
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
	fan, ack, err := fanoutRun(env.Run, nameWSFanout, p, put)
	if err != nil {
		return nil, err
	}
	return []harness.Result{fanoutResult(nameWSFanout, size, fan, ack, "WatchState watches over WebSocket (wstransport, dispatcher), journal fdatasynced per commit, nothing acknowledged (30 updates < the bound of 32)")}, nil
}
