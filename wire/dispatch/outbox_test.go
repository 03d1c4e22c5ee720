package dispatch

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// sendLog is an outbox's send that records, in order, the request_id of
// every message sent, and can hold a send until released.
type sendLog struct {
	mu      sync.Mutex
	events  []string
	hold    map[uint64]chan struct{} // a send of this id waits for the channel to close
	entered chan uint64              // told each id as its send begins
}

func newSendLog() *sendLog {
	return &sendLog{hold: map[uint64]chan struct{}{}, entered: make(chan uint64, 64)}
}

func (l *sendLog) note(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *sendLog) send(m *pb.ServerMessage) error {
	id := m.GetResult().GetRequestId()
	l.mu.Lock()
	h := l.hold[id]
	l.mu.Unlock()
	l.entered <- id
	if h != nil {
		<-h
	}
	l.note(fmt.Sprint("sent ", id))
	return nil
}

func (l *sendLog) holdSend(id uint64) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := make(chan struct{})
	l.hold[id] = c
	return c
}

func (l *sendLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitEntered waits for the send of id to begin.
func (l *sendLog) waitEntered(t *testing.T, id uint64) {
	t.Helper()
	for {
		select {
		case got := <-l.entered:
			if got == id {
				return
			}
		case <-time.After(guard):
			t.Fatalf("the send of %d did not begin within %v; sent %v", id, guard, l.get())
		}
	}
}

// TestDirectReplyKeepsTheOrder pins the outbox's fast path, an answer sent
// by its own goroutine when nothing is queued or being sent: it is sent
// before reply returns, on the calling goroutine, with no writer running;
// it never overtakes a watch update (or any message) queued before it, nor
// one being sent; a message queued while it is being sent waits for it
// and then goes through the writer; and every byte goes back to the
// budget.
func TestDirectReplyKeepsTheOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// before runs before the reply of request 100, with no writer
		// running unless it starts one (start).
		before func(t *testing.T, o *outbox, l *sendLog, start func())
		// during runs while the answer's send is held, if it is sent
		// directly (holdDirect).
		holdDirect bool
		during     func(t *testing.T, o *outbox, l *sendLog)
		// direct: the answer is sent by reply's own goroutine.
		direct bool
		want   []string
	}{
		{
			name:   "idle: sent by the caller",
			before: func(*testing.T, *outbox, *sendLog, func()) {},
			direct: true,
			want:   []string{"sent 100"},
		},
		{
			name: "behind a queued update",
			before: func(t *testing.T, o *outbox, _ *sendLog, _ func()) {
				if err := o.offer(answer(1)); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"sent 1", "sent 100"},
		},
		{
			name: "behind a commit's updates",
			before: func(t *testing.T, o *outbox, _ *sendLog, _ func()) {
				for id := uint64(1); id <= 3; id++ {
					if err := o.offer(answer(id)); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{"sent 1", "sent 2", "sent 3", "sent 100"},
		},
		{
			name: "behind a snapshot",
			before: func(t *testing.T, o *outbox, _ *sendLog, _ func()) {
				if err := o.force(answer(1), nil); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"sent 1", "sent 100"},
		},
		{
			name: "behind a message being sent",
			before: func(t *testing.T, o *outbox, l *sendLog, start func()) {
				l.holdSend(1)
				start()
				if err := o.offer(answer(1)); err != nil {
					t.Fatal(err)
				}
				l.waitEntered(t, 1) // the writer holds the token
			},
			want: []string{"sent 1", "sent 100"},
		},
		{
			name:       "an update offered during the direct send follows it",
			before:     func(*testing.T, *outbox, *sendLog, func()) {},
			holdDirect: true,
			during: func(t *testing.T, o *outbox, l *sendLog) {
				l.waitEntered(t, 100)
				if err := o.offer(answer(2)); err != nil {
					t.Fatal(err)
				}
				if err := o.offer(answer(3)); err != nil {
					t.Fatal(err)
				}
			},
			direct: true,
			want:   []string{"sent 100", "sent 2", "sent 3"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newByteBudget(1 << 20)
			b.join()
			l := newSendLog()
			o := newOutbox(8, 4, b, l.send, func() { t.Error("a send failed") })
			writerDone := make(chan error, 1)
			started := false
			start := func() {
				if !started {
					started = true
					go func() { writerDone <- o.run() }()
				}
			}
			c.before(t, o, l, start)
			var release chan struct{}
			if c.holdDirect {
				release = l.holdSend(100)
			}
			replied := make(chan error, 1)
			go func() {
				replied <- o.reply(answer(100), func() { l.note("accepted 100") }, 0, releasable{})
			}()
			if c.during != nil {
				c.during(t, o, l)
			}
			if release != nil {
				close(release)
			}
			// reply does not wait here: an idle outbox sends the answer
			// on this goroutine, a busy one queues it.
			select {
			case err := <-replied:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(guard):
				t.Fatalf("reply did not return within %v; sent %v", guard, l.get())
			}
			if sent := slices.Contains(l.get(), "sent 100"); sent != c.direct {
				t.Fatalf("events %v at reply's return: sent directly %v, want %v", l.get(), sent, c.direct)
			}
			// Release whatever holds the writer, start it, and let it drain.
			l.mu.Lock()
			for id, h := range l.hold {
				if id != 100 {
					close(h)
				}
			}
			l.mu.Unlock()
			start()
			o.close(false)
			select {
			case err := <-writerDone:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(guard):
				t.Fatalf("the writer did not drain within %v; sent %v", guard, l.get())
			}
			var sent []string
			for _, e := range l.get() {
				if e != "accepted 100" {
					sent = append(sent, e)
				}
			}
			if !slices.Equal(sent, c.want) {
				t.Fatalf("sent %v, want %v", sent, c.want)
			}
			b.leave(o)
			if used, _ := b.usage(); used != 0 {
				t.Fatalf("the budget still counts %d bytes", used)
			}
		})
	}
}

// TestReplyWaitsForRoom: an answer finding the queue at its limit waits
// (it is neither accepted nor sent directly past what is queued) until the
// writer makes room, then follows what was queued; a closed outbox refuses
// it. synctest.Wait makes "it waits" exact: every goroutine of the bubble
// is blocked, the reply's in the outbox's room.Wait.
func TestReplyWaitsForRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit = 3
		b := newByteBudget(1 << 20)
		b.join()
		l := newSendLog()
		o := newOutbox(limit, 2, b, l.send, func() { t.Error("a send failed") })
		for id := uint64(1); id <= limit; id++ {
			if err := o.offer(answer(id)); err != nil {
				t.Fatal(err)
			}
		}
		replied := make(chan error, 1)
		go func() { replied <- o.reply(answer(100), func() { l.note("accepted 100") }, 0, releasable{}) }()
		synctest.Wait()
		select {
		case err := <-replied:
			t.Fatalf("reply on a full outbox returned (%v) with nobody making room; events %v", err, l.get())
		default:
		}
		if got := l.get(); len(got) != 0 {
			t.Fatalf("events %v before the writer ran, want none", got)
		}
		writerDone := make(chan error, 1)
		go func() { writerDone <- o.run() }()
		if err := <-replied; err != nil {
			t.Fatal(err)
		}
		o.close(false)
		if err := <-writerDone; err != nil {
			t.Fatal(err)
		}
		got := slices.DeleteFunc(l.get(), func(e string) bool { return e == "accepted 100" })
		if want := []string{"sent 1", "sent 2", "sent 3", "sent 100"}; !slices.Equal(got, want) {
			t.Fatalf("sent %v, want %v", got, want)
		}
		if err := o.reply(answer(101), nil, 0, releasable{}); err == nil {
			t.Fatal("a reply on a closed outbox was accepted")
		}
		b.leave(o)
		if used, _ := b.usage(); used != 0 {
			t.Fatalf("the budget still counts %d bytes", used)
		}
	})
}
