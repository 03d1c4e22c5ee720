package watch_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

// logSink records everything and acks every update as it arrives, as a
// prompt client does. Deliver may call back into the registry.
type logSink struct {
	r   *watch.Registry
	s   *watch.Session
	ack bool
	// barrier receives when the Snapshot of watch "barrier" arrives.
	barrier chan struct{}

	mu  sync.Mutex
	log []watch.Message
}

// record logs m, and nothing else: a DirectSink's OfferUpdates.
func (l *logSink) record(m watch.Message) error {
	l.mu.Lock()
	l.log = append(l.log, m)
	l.mu.Unlock()
	return nil
}

func (l *logSink) Deliver(m watch.Message) error {
	l.mu.Lock()
	l.log = append(l.log, m)
	s := l.s
	l.mu.Unlock()
	if u, ok := m.(*watch.Update); ok && l.ack && s != nil {
		_ = l.r.Ack(s, u.WatchID, u.Sequence)
	}
	if sn, ok := m.(*watch.Snapshot); ok && sn.WatchID == "barrier" && l.barrier != nil {
		l.barrier <- struct{}{}
	}
	return nil
}

// miniStore stands in for the store: one commit-order lock around
// snapshot+Add and around commit+Publish, as the real store holds it.
type miniStore struct {
	mu   sync.Mutex
	rev  uint64
	data map[string]*materialize.Entry
	reg  *watch.Registry
}

func (m *miniStore) write(key string, del bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if del && m.data[key] == nil {
		return
	}
	m.rev++
	ev := watch.Event{Revision: m.rev, Namespace: "ns", Key: key}
	if del {
		ev.Kind = watch.Delete
		delete(m.data, key)
	} else {
		ev.Kind = watch.Put
		ev.Entry = &materialize.Entry{Namespace: "ns", Key: key, Revision: m.rev}
		m.data[key] = ev.Entry
	}
	m.reg.Publish([]watch.Event{ev})
}

func (m *miniStore) watch(s *watch.Session, id, prefix string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var entries []*materialize.Entry
	for k, e := range m.data {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			entries = append(entries, e)
		}
	}
	return m.reg.Add(s, 0, id, "ns", prefix, m.rev, entries)
}

// Watches added while writes commit see every write exactly once: in the
// snapshot or as one later update, never both, never neither. Replaying
// each watch's snapshot and updates yields the store's final state.
func TestNoGapUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	reg := watch.NewRegistry(watch.Limits{MaxUnacked: 1 << 16, MaxPerSession: 64, MaxWatches: 4096}, clock.NewFake(t0))
	st := &miniStore{data: map[string]*materialize.Entry{}, reg: reg}
	const sessions, perSession, writes = 8, 40, 3000
	sinks := make([]*logSink, sessions)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < writes; i++ {
			st.write(fmt.Sprintf("k%d/%d", rng.IntN(3), rng.IntN(8)), rng.IntN(4) == 0)
		}
	}()
	for i := range sinks {
		sinks[i] = &logSink{r: reg, ack: true, barrier: make(chan struct{}, 1)}
		var sink watch.Sink = sinks[i]
		if isDirect(t) {
			// The offered updates stay unacknowledged (an ack would call
			// the registry from under its lock): MaxUnacked is ample.
			sink = &directSink{Sink: sinks[i], offer: sinks[i].record, calls: new(atomic.Int64)}
		}
		s := reg.OpenSession("p", sink)
		sinks[i].mu.Lock()
		sinks[i].s = s
		sinks[i].mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perSession; j++ {
				prefix := []string{"", "k0/", "k1/", "k2/3"}[j%4]
				if err := st.watch(s, fmt.Sprintf("w%d", j), prefix); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Closing drops undelivered updates, so first let every session
	// deliver all it has: a barrier watch's Snapshot queues behind it.
	for _, sink := range sinks {
		if err := st.watch(sink.s, "barrier", "none/"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sink.barrier:
		case <-time.After(waitLimit):
			t.Fatal("session did not drain")
		}
	}
	reg.Stop()

	for i, sink := range sinks {
		per := byWatch(sink.log)
		delete(per, "barrier")
		if len(per) != perSession {
			t.Fatalf("session %d: %d watches reported", i, len(per))
		}
		for id, ms := range per {
			sn, ok := ms[0].(*watch.Snapshot)
			if !ok {
				t.Fatalf("%s: first message %s", id, describe(ms[0]))
			}
			state := map[string]uint64{}
			for _, e := range sn.Entries {
				state[e.Key] = e.Revision
			}
			rev := sn.SnapshotRevision
			for n, m := range ms[1 : len(ms)-1] {
				u := m.(*watch.Update)
				if u.Sequence != uint64(n+1) || u.Revision <= rev {
					t.Fatalf("%s: update %d has seq %d rev %d after rev %d", id, n+1, u.Sequence, u.Revision, rev)
				}
				rev = u.Revision
				if u.Kind == watch.Put {
					state[u.Key] = u.Revision
				} else {
					delete(state, u.Key)
				}
			}
			wantClosed(t, ms[len(ms)-1], id, watch.StoreClosed)
			want := map[string]uint64{}
			for k, e := range st.data {
				if len(k) >= len(sn.KeyPrefix) && k[:len(sn.KeyPrefix)] == sn.KeyPrefix {
					want[k] = e.Revision
				}
			}
			if fmt.Sprint(state) != fmt.Sprint(want) {
				t.Fatalf("session %d %s (prefix %q): replayed %v, store has %v", i, id, sn.KeyPrefix, state, want)
			}
		}
	}
}

// protoChecker verifies, per session, the message protocol each watch_id
// must follow whatever the interleaving: a Snapshot opens an incarnation,
// updates count 1, 2, 3, ... in it, and nothing but a new Snapshot follows
// a Closed.
type protoChecker struct {
	t      *testing.T
	mu     sync.Mutex
	st     map[string]*incarnation
	offers int
}

// offer is the checker as a DirectSink's OfferUpdates, refusing every
// fifth update, so that refusals close watches amid the churn too.
func (c *protoChecker) offer(m watch.Message) error {
	c.mu.Lock()
	c.offers++
	refuse := c.offers%5 == 0
	c.mu.Unlock()
	if refuse {
		return errRefused
	}
	return c.Deliver(m)
}

type incarnation struct {
	open bool
	seq  uint64
}

func (c *protoChecker) Deliver(m watch.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := m.(type) {
	case *watch.Snapshot:
		c.st[m.WatchID] = &incarnation{open: true}
	case *watch.Update:
		in := c.st[m.WatchID]
		if in == nil || !in.open || m.Sequence != in.seq+1 {
			c.t.Errorf("protocol: %s after %+v", describe(m), in)
			return nil
		}
		in.seq++
	case *watch.Closed:
		in := c.st[m.WatchID]
		if in == nil || !in.open {
			c.t.Errorf("protocol: %s after %+v", describe(m), in)
			return nil
		}
		in.open = false
	}
	return nil
}

// Everything at once, under the race detector: publishes, adds, removes,
// acks, revocations, session churn, with small bounds so watches overflow.
func TestConcurrentChurn(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	reg := watch.NewRegistry(watch.Limits{MaxUnacked: 4, MaxPerSession: 4, MaxWatches: 20, MaxPerPrincipal: 20, AckDeadline: 30 * time.Second}, clk)
	var commit sync.Mutex
	var rev uint64
	stop, committerDone := make(chan struct{}), make(chan struct{})
	go func() { // the committer
		defer close(committerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			commit.Lock()
			rev++
			reg.Publish([]watch.Event{put(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("k%d", i%5), rev)})
			commit.Unlock()
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			open := func() *watch.Session {
				c := &protoChecker{t: t, st: map[string]*incarnation{}}
				if isDirect(t) {
					return reg.OpenSession(fmt.Sprint("p", g%2), &directSink{Sink: c, offer: c.offer, calls: new(atomic.Int64)})
				}
				return reg.OpenSession(fmt.Sprint("p", g%2), c)
			}
			s := open()
			for i := 0; i < 400; i++ {
				id := fmt.Sprint("w", rng.IntN(5))
				switch rng.IntN(8) {
				case 0, 1:
					commit.Lock()
					_ = reg.Add(s, 0, id, fmt.Sprint("ns", rng.IntN(3)), "", rev, nil)
					commit.Unlock()
				case 2:
					_ = reg.Remove(s, id)
				case 3, 4:
					_ = reg.Ack(s, id, uint64(rng.IntN(8)))
				case 5:
					reg.CloseWhere(watch.AuthorizationLost, func(p, ns string) bool { return p == "p0" && ns == "ns1" })
				case 7:
					clk.Advance(time.Duration(rng.IntN(5)) * time.Second) // ack timeouts too
				case 6:
					if rng.IntN(10) == 0 {
						s.Close()
						s = open()
					}
				}
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(stop)
	<-committerDone
	if n := reg.Len(); n != 0 {
		t.Fatalf("%d watches left after every session closed", n)
	}
	reg.Stop()
}
