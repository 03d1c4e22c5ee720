// Package wsfanout is the WebSocket load workload: many concurrent
// sessions over real WebSocket connections on 127.0.0.1, each watching the
// same namespace and each writing its own key, checked so that every
// update reaches every matching watch exactly once and in commit order. The
// Go test of this package runs it small; qualify runs it as ws_load.
//
// The loop is bounded: Rounds rounds of Writers concurrent puts, the
// writers taking turns so every session writes PutsPerSession times. A
// round ends only when every watch has acknowledged every update of the
// round, which keeps each watch under the store's unacknowledged-update
// bound (32 by default; Writers must stay below it) without any sleep.
// Each watch acknowledges once per round, the round's last sequence, as a
// client that applies a burst and then acknowledges would.
//
// What Run checks, per watch: watch_sequence is exactly 1, 2, 3, ... with
// no gap and no repeat; the revisions delivered are exactly the revisions
// the puts committed, in increasing (commit) order; no watch is closed.
// Any violation is an error naming the session and the sequence.
package wsfanout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// Config sizes a run. Zero fields take the defaults.
type Config struct {
	Sessions       int    // concurrent WebSocket sessions (default 127)
	PutsPerSession int    // puts each session makes (default 30)
	Writers        int    // concurrent puts per round (default 16)
	Namespace      string // watched by every session (default service/ws-fanout)
	Schema         string // of the documents
	Document       func(session, put int) []byte
}

// Result is what a run measured.
type Result struct {
	Puts    int
	Updates int // delivered and verified: Puts * Sessions
	Elapsed time.Duration
	// Delivery holds one sample per (put, watch): from the put's send to
	// the update's decode by that watch's session.
	Delivery []time.Duration
	// Put holds one sample per put: from its send to its answer's decode.
	Put []time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Sessions == 0 {
		c.Sessions = 127
	}
	if c.PutsPerSession == 0 {
		c.PutsPerSession = 30
	}
	if c.Writers == 0 {
		c.Writers = 16
	}
	if c.Namespace == "" {
		c.Namespace = "service/ws-fanout"
	}
	switch {
	case c.Sessions < 1 || c.PutsPerSession < 1:
		return c, fmt.Errorf("wsfanout: Sessions %d and PutsPerSession %d must be positive", c.Sessions, c.PutsPerSession)
	case c.Writers < 1 || c.Writers > c.Sessions:
		return c, fmt.Errorf("wsfanout: Writers %d must be in [1, Sessions %d]", c.Writers, c.Sessions)
	case c.Document == nil || c.Schema == "":
		return c, errors.New("wsfanout: Schema and Document are required")
	}
	return c, nil
}

const token = "wsfanout"

var principal = statestore.Principal{ID: "wsfanout", Admin: true}

// hangGuard bounds each round: far longer than any round takes, so only a
// lost update or acknowledgement trips it.
const hangGuard = 60 * time.Second

// Run serves s over WebSocket on 127.0.0.1 and runs the workload.
func Run(ctx context.Context, s *statestore.Store, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if lim := s.Limits().MaxUnackedUpdates; cfg.Writers >= lim {
		return nil, fmt.Errorf("wsfanout: Writers %d must stay below the store's unacknowledged-update bound %d", cfg.Writers, lim)
	}
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{
		Authenticator: wstransport.TokenAuthenticator{Token: token, Principal: principal}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		h.Close()
		srv.Close()
	}()
	r := &runner{cfg: cfg, ctx: ctx, sendAt: make([]atomic.Int64, cfg.Sessions), caught: make(chan int, cfg.Sessions), failed: make(chan error, cfg.Sessions)}
	url := "ws://" + ln.Addr().String() + "/"
	for i := range cfg.Sessions {
		ss, err := r.open(i, url)
		if err != nil {
			r.close()
			return nil, err
		}
		r.sessions = append(r.sessions, ss)
	}
	defer r.close()
	return r.run()
}

type runner struct {
	cfg      Config
	ctx      context.Context
	sessions []*session
	sendAt   []atomic.Int64 // unix nanos of each writer's put this round
	target   atomic.Uint64  // the sequence every watch must reach this round
	caught   chan int       // a session whose watch acknowledged target
	failed   chan error
}

// session is one WebSocket session: its watch's verification state is
// owned by its reader goroutine.
type session struct {
	i       int
	c       *wstransport.ClientConn
	nextID  atomic.Uint64
	answers chan *pb.ServerMessage // answers to this session's puts
	done    chan struct{}          // the reader ended

	// Owned by the reader.
	seq      uint64
	revs     []uint64
	delivery []time.Duration
}

func (r *runner) open(i int, url string) (*session, error) {
	c, err := wstransport.Dial(r.ctx, url+"?access_token="+token, wstransport.DialOptions{})
	if err != nil {
		return nil, err
	}
	ss := &session{i: i, c: c, answers: make(chan *pb.ServerMessage, 1), done: make(chan struct{})}
	id := ss.nextID.Add(1)
	if err := c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
		RequestId: id, WatchId: "fanout", Namespace: r.cfg.Namespace}}}); err != nil {
		c.Abort()
		return nil, err
	}
	m, err := c.Recv()
	if err != nil {
		c.Abort()
		return nil, err
	}
	if m.GetResult().GetWatch() == nil {
		c.Abort()
		return nil, fmt.Errorf("wsfanout: session %d: WatchState answered %v", i, m)
	}
	go r.read(ss)
	return ss, nil
}

func (r *runner) close() {
	for _, ss := range r.sessions {
		ss.c.Close()
		<-ss.done
	}
}

func (r *runner) fail(err error) {
	select {
	case r.failed <- err:
	default:
	}
}

// read verifies and acknowledges this session's watch, and routes the
// answers to its puts.
func (r *runner) read(ss *session) {
	defer close(ss.done)
	for {
		m, err := ss.c.Recv()
		if err != nil {
			return // closed by close(), or the failure shows as a missing update
		}
		switch {
		case m.GetWatchUpdate() != nil:
			u := m.GetWatchUpdate()
			now := time.Now()
			if u.GetWatchSequence() != ss.seq+1 {
				r.fail(fmt.Errorf("wsfanout: session %d: watch_sequence %d after %d", ss.i, u.GetWatchSequence(), ss.seq))
				return
			}
			if n := len(ss.revs); n > 0 && u.GetRevision() <= ss.revs[n-1] {
				r.fail(fmt.Errorf("wsfanout: session %d: sequence %d has revision %d after %d: not in commit order", ss.i, u.GetWatchSequence(), u.GetRevision(), ss.revs[n-1]))
				return
			}
			ss.seq = u.GetWatchSequence()
			ss.revs = append(ss.revs, u.GetRevision())
			var writer int
			if _, err := fmt.Sscanf(u.GetEntry().GetKey(), "s%d", &writer); err != nil || writer < 0 || writer >= len(r.sendAt) {
				r.fail(fmt.Errorf("wsfanout: session %d: update %d for unknown key %q", ss.i, ss.seq, u.GetEntry().GetKey()))
				return
			}
			ss.delivery = append(ss.delivery, now.Sub(time.Unix(0, r.sendAt[writer].Load())))
			// One acknowledgement per round, of its last update: the
			// round's updates (Writers of them) stay below the bound, and
			// the ack names the highest contiguously applied sequence.
			if ss.seq != r.target.Load() {
				continue
			}
			if err := ss.c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{
				RequestId: ss.nextID.Add(1), WatchId: "fanout", AppliedSequence: ss.seq}}}); err != nil {
				r.fail(fmt.Errorf("wsfanout: session %d: ack: %w", ss.i, err))
				return
			}
		case m.GetAckResult() != nil:
			if m.GetAckResult().GetAppliedSequence() == r.target.Load() {
				r.caught <- ss.i
			}
		case m.GetWatchClosed() != nil:
			r.fail(fmt.Errorf("wsfanout: session %d: watch closed: %v", ss.i, m.GetWatchClosed()))
			return
		default:
			ss.answers <- m
		}
	}
}

// run is the bounded loop of rounds.
func (r *runner) run() (*Result, error) {
	cfg := r.cfg
	total := cfg.Sessions * cfg.PutsPerSession
	res := &Result{Puts: total}
	var putRevs []uint64
	var mu sync.Mutex
	began := time.Now()
	next := 0 // the next put, in turn order: writer next%Sessions
	for next < total {
		n := min(cfg.Writers, total-next)
		r.target.Add(uint64(n))
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for k := range n {
			p := next + k
			ss := r.sessions[p%cfg.Sessions]
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := ss.nextID.Add(1)
				put := &pb.PutState{RequestId: id, Namespace: cfg.Namespace, Key: fmt.Sprintf("s%d", ss.i),
					Schema: cfg.Schema, Document: cfg.Document(ss.i, p/cfg.Sessions)}
				t0 := time.Now()
				r.sendAt[ss.i].Store(t0.UnixNano())
				if err := ss.c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: put}}); err != nil {
					errs <- err
					return
				}
				var m *pb.ServerMessage
				select {
				case m = <-ss.answers:
				case <-time.After(hangGuard):
					errs <- fmt.Errorf("wsfanout: session %d: no answer to put %d", ss.i, id)
					return
				}
				d := time.Since(t0)
				e := m.GetResult().GetEntry()
				if m.GetResult().GetRequestId() != id || e == nil {
					errs <- fmt.Errorf("wsfanout: session %d: put %d answered %v", ss.i, id, m)
					return
				}
				mu.Lock()
				putRevs = append(putRevs, e.GetRevision())
				res.Put = append(res.Put, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return nil, err
		}
		next += n
		// Every watch acknowledges the round before the next begins.
		for range cfg.Sessions {
			select {
			case <-r.caught:
			case err := <-r.failed:
				return nil, err
			case <-time.After(hangGuard):
				return nil, fmt.Errorf("wsfanout: a watch did not acknowledge sequence %d", r.target.Load())
			case <-r.ctx.Done():
				return nil, r.ctx.Err()
			}
		}
	}
	res.Elapsed = time.Since(began)
	slices.Sort(putRevs)
	for _, ss := range r.sessions {
		ss.c.Close()
		<-ss.done
		if !slices.Equal(ss.revs, putRevs) {
			return nil, fmt.Errorf("wsfanout: session %d received %d updates, not exactly the %d committed puts in order", ss.i, len(ss.revs), len(putRevs))
		}
		res.Updates += len(ss.revs)
		res.Delivery = append(res.Delivery, ss.delivery...)
	}
	r.sessions = nil
	return res, nil
}
