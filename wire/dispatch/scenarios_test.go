package dispatch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/wire/dispatch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// The specification's acceptance scenarios 1-3, driven through the
// dispatcher over the framing on net.Pipe, many sessions at once.

// Scenario 1: two (here eight) writers cannot overwrite the same
// orchestration key when compare-and-set revisions differ: in each round
// every session writes from the same revision, exactly one wins and every
// other gets CONFLICT with the winner's revision.
func TestScenario1CompareAndSetOverTheWire(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	srv := dispatch.New(s, dispatch.Options{})
	const writers, rounds, ns, key = 8, 5, "service/transcoder-a", "intents/front-door-video"
	clients := make([]*client, writers)
	for i := range clients {
		clients[i] = dial(t, srv, admin)
	}
	base := wantEntry(t, clients[0].call(putReq(1, ns, key, doc("base"), rev(0), 0)), 1).GetRevision()
	for round := 0; round < rounds; round++ {
		answers := make([]*pb.ServerMessage, writers)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.send(putReq(uint64(100+round), ns, key, doc("writer"), rev(base), 0))
				answers[i] = c.next()
			}()
		}
		wg.Wait()
		var won uint64
		for _, m := range answers {
			if e := m.GetResult().GetEntry(); e != nil {
				if won != 0 {
					t.Fatalf("round %d: two writers won from revision %d", round, base)
				}
				won = e.GetRevision()
			}
		}
		if won != base+1 {
			t.Fatalf("round %d: winner revision %d, want %d", round, won, base+1)
		}
		for _, m := range answers {
			if m.GetResult().GetEntry() == nil {
				if e := wantError(t, m, uint64(100+round), codeConflict, "expected_revision"); e.GetCurrentRevision() != won {
					t.Fatalf("conflict carries revision %d, want the winner's %d", e.GetCurrentRevision(), won)
				}
			}
		}
		base = won
	}
}

// Scenario 2: a lease expiry reaches every active watcher as one ordered
// EXPIRE update.
func TestScenario2LeaseExpiryReachesEveryWatcher(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	s := openStore(t, clk)
	srv := dispatch.New(s, dispatch.Options{})
	const sessions, watchesEach, ns = 12, 3, "service/transcoder-a"
	watchers := make([]*client, sessions)
	for i := range watchers {
		watchers[i] = dial(t, srv, admin)
		for w := 0; w < watchesEach; w++ {
			wantSnapshot(t, watchers[i].call(watchReq(uint64(w+1), wid(w), ns, "leases/")), uint64(w+1), wid(w))
		}
	}
	owner := dial(t, srv, admin)
	lease := wantEntry(t, owner.call(putReq(1, ns, "leases/front-door", doc("lease"), rev(0), 1000)), 1)
	forEachWatch(t, watchers, watchesEach, func(c *client, w int) {
		if u := wantUpdate(t, c.next(), wid(w), 1, kindPut); u.GetRevision() != lease.GetRevision() {
			t.Errorf("PUT update at revision %d, want %d", u.GetRevision(), lease.GetRevision())
		}
	})
	clk.Advance(time.Second)
	// Inclusive expiry: at the deadline the key already reads NOT_FOUND,
	// which the store answers only after the EXPIRE is committed.
	wantError(t, owner.call(getReq(2, ns, "leases/front-door")), 2, codeNotFound, "key")
	forEachWatch(t, watchers, watchesEach, func(c *client, w int) {
		u := wantUpdate(t, c.next(), wid(w), 2, kindExpire)
		if u.GetRevision() != lease.GetRevision()+1 || u.GetKey() != "leases/front-door" || u.GetEntry() != nil {
			t.Errorf("EXPIRE update %v, want key leases/front-door at revision %d", u, lease.GetRevision()+1)
		}
	})
	// Exactly one EXPIRE: the next update every watch sees is the next
	// commit, as sequence 3.
	wantEntry(t, owner.call(putReq(3, ns, "leases/front-door", doc("again"), rev(0), 0)), 3)
	forEachWatch(t, watchers, watchesEach, func(c *client, w int) { wantUpdate(t, c.next(), wid(w), 3, kindPut) })
}

func wid(w int) string { return "w" + string(rune('a'+w)) }

// forEachWatch calls f once per watch of each client, in the order the
// client's messages arrive: updates of one session may interleave across
// its watches, so f is handed each client's next message by watch id.
func forEachWatch(t *testing.T, clients []*client, watchesEach int, f func(c *client, w int)) {
	t.Helper()
	for _, c := range clients {
		pending := map[string]*pb.ServerMessage{}
		for len(pending) < watchesEach {
			m := c.next()
			pending[m.GetWatchUpdate().GetWatchId()] = m
		}
		for w := 0; w < watchesEach; w++ {
			m, ok := pending[wid(w)]
			if !ok {
				t.Fatalf("no message for watch %s", wid(w))
			}
			f(&client{t: t, msgs: replay(m)}, w)
		}
	}
}

func replay(m *pb.ServerMessage) chan *pb.ServerMessage {
	ch := make(chan *pb.ServerMessage, 1)
	ch <- m
	return ch
}

// Scenario 3: a watch started during a write receives the entry either in
// its snapshot or as exactly one later update, never neither, never both at
// the same revision. Watches start on many sessions while one session
// writes the key over and over.
func TestScenario3WatchDuringWrites(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	srv := dispatch.New(s, dispatch.Options{})
	const watchers, writes, ns, key = 24, 25, "service/transcoder-a", "intents/front-door-video"
	writer := dial(t, srv, admin)
	clients := make([]*client, watchers)
	for i := range clients {
		clients[i] = dial(t, srv, admin)
	}
	revs := make(chan uint64, writes)
	go func() {
		defer close(revs)
		for i := 0; i < writes; i++ {
			m := writer.call(putReq(uint64(i+1), ns, key, doc("w"), nil, 0))
			revs <- m.GetResult().GetEntry().GetRevision()
		}
	}()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.send(watchReq(1, "w", ns, "intents/"))
		}()
	}
	wg.Wait()
	var written []uint64
	for r := range revs {
		written = append(written, r)
	}
	if len(written) != writes || written[writes-1] != writes {
		t.Fatalf("writer committed revisions %v", written)
	}
	for i, c := range clients {
		snap := wantSnapshot(t, c.next(), 1, "w")
		rs := snap.GetSnapshotRevision()
		if rs > 0 {
			if len(snap.GetEntries()) != 1 || snap.GetEntries()[0].GetRevision() != rs {
				t.Fatalf("watcher %d: snapshot at %d holds %v", i, rs, snap.GetEntries())
			}
		} else if len(snap.GetEntries()) != 0 {
			t.Fatalf("watcher %d: empty namespace snapshot holds entries", i)
		}
		// Every later revision exactly once, in order, as updates 1, 2, ...
		for seq, r := uint64(1), rs+1; r <= writes; seq, r = seq+1, r+1 {
			u := wantUpdate(t, c.next(), "w", seq, kindPut)
			if u.GetRevision() != r {
				t.Fatalf("watcher %d: update %d at revision %d, want %d (snapshot at %d)", i, seq, u.GetRevision(), r, rs)
			}
		}
	}
	// Nothing more was sent: a probe request is answered next.
	for i, c := range clients {
		if m := c.call(getReq(2, ns, key)); m.GetResult().GetRequestId() != 2 {
			t.Fatalf("watcher %d: extra message %v", i, m)
		}
	}
}
