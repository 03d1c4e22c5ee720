package dispatch

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// countWriter is a session's connection that discards what is written
// and signals when the awaited number of writes (frames) is reached.
type countWriter struct {
	n, target *atomic.Int64
	done      chan struct{}
}

func (c countWriter) Write(p []byte) (int, error) {
	// One write may hold several frames (a batch): count each.
	for rest := p; len(rest) > 0; {
		size, n := protowire.ConsumeVarint(rest)
		if n < 0 || int(size) > len(rest)-n {
			return 0, fmt.Errorf("countWriter: a write of %d bytes is not whole frames", len(p))
		}
		rest = rest[n+int(size):]
		c.count()
	}
	if len(p) == 0 {
		c.count()
	}
	return len(p), nil
}

func (c countWriter) count() {
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
}

// registrySink is the registry-only baseline's sink: it counts updates.
type registrySink countWriter

func (c registrySink) Deliver(m watch.Message) error {
	if _, ok := m.(*watch.Update); ok {
		countWriter(c).count()
	}
	return nil
}

// BenchmarkWireFanout is the specification's full-capacity fan-out (1,024
// watches over 127 sessions, one 2,193-byte PUT per round matching every
// watch) three ways in one process: "registry", the watch registry alone
// with a counting sink (watch.BenchmarkFanout's baseline); "message", each
// session's sink, outbound queue and framing as before this change, every
// update built as a ServerMessage and marshalled for its watch; and
// "encoded", the same with the update's shared part encoded once per
// event and spliced after each watch's watch_id and watch_sequence; and
// "batched", encoded with the session's writer sending what queued up
// while it was busy with one write (BatchSender); "pipe", batched over
// net.Pipe, each session's frames read whole by a client goroutine (the
// qualify wire_fanout's transport). A
// round ends when all 1,024 updates were written to their connections
// (which discard them). It reports allocations and bytes per delivered
// update (from the memory statistics over the whole run) and the p50 round.
func BenchmarkWireFanout(b *testing.B) {
	for _, mode := range []string{"registry", "message", "encoded", "batched", "pipe", "tcp"} {
		b.Run(mode, func(b *testing.B) { benchWireFanout(b, mode) })
	}
}

func benchWireFanout(b *testing.B, mode string) {
	const watches, sessions = 1024, 127
	const ns = "service/fanout"
	reg := watch.NewRegistry(watch.Limits{MaxWatches: watches, MaxPerSession: 16, MaxPerPrincipal: watches}, clock.NewFake(time.Unix(1_750_000_000, 0)))
	defer reg.Stop()
	budget := newByteBudget(DefaultMaxQueuedBytes)
	var n, target atomic.Int64
	done := make(chan struct{}, 1)
	cw := countWriter{n: &n, target: &target, done: done}
	type w struct {
		s  *watch.Session
		id string
	}
	var ws []w
	ss := make([]*watch.Session, sessions)
	var outs []*outbox
	for i := range ss {
		if mode == "registry" {
			ss[i] = reg.OpenSession("p", registrySink(cw))
			continue
		}
		var w io.Writer = cw
		if mode == "pipe" || mode == "tcp" {
			srvSide, cliSide := net.Pipe()
			if mode == "tcp" {
				srvSide, cliSide = tcpPair(b)
			}
			defer srvSide.Close()
			go func() {
				rd := framing.NewReader(bufio.NewReaderSize(cliSide, 64<<10), 0)
				for {
					if _, err := rd.ReadFrame(); err != nil {
						return
					}
					cw.count()
				}
			}()
			w = srvSide
		}
		conn := framing.NewConn[*pb.ClientMessage, *pb.ServerMessage](struct {
			io.Reader
			io.Writer
		}{nil, w}, 0, nil)
		sess := &session{inflight: map[uint64]struct{}{}}
		sess.idle.L = &sess.mu
		sess.out = newOutbox(defaultMaxQueued, 64, budget, conn.Send, func() {})
		if mode != "message" {
			sess.out.sendEncoded = conn.SendEncoded
		}
		if mode == "batched" || mode == "pipe" || mode == "tcp" {
			sess.out.sendBatch = conn.SendBatch
		}
		budget.join()
		outs = append(outs, sess.out)
		go sess.out.run()
		ss[i] = reg.OpenSession("p", sink{sess})
	}
	defer func() {
		for _, o := range outs {
			o.close(true)
		}
	}()
	// The snapshots are written too; wait for them before counting.
	target.Store(map[bool]int64{true: 0, false: watches}[mode == "registry"])
	for i := range watches {
		id := fmt.Sprint("w", i)
		if err := reg.Add(ss[i%sessions], uint64(i+1), id, ns, "intents/", 0, nil); err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w{ss[i%sessions], id})
	}
	if mode != "registry" {
		<-done
	}
	n.Store(0)
	target.Store(0)
	entry := &materialize.Entry{Namespace: ns, Key: "intents/cam", Schema: "keeppeek.media-intent.v1", Owner: "coordinator",
		CreatedMs: 1_750_000_000_000, UpdatedMs: 1_750_000_000_000, Document: make([]byte, 2193)}
	rounds := make([]time.Duration, 0, b.N)
	// How long Publish holds the registry (and, in a store, the commit
	// order): with a DirectSink it queues every update into the outboxes.
	publishes := make([]time.Duration, 0, b.N)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		target.Add(watches)
		e := *entry
		e.Revision = uint64(i + 1)
		start := time.Now()
		reg.Publish([]watch.Event{{Revision: uint64(i + 1), Kind: watch.Put, Namespace: ns, Key: e.Key, Entry: &e}})
		publishes = append(publishes, time.Since(start))
		<-done
		rounds = append(rounds, time.Since(start))
		if (i+1)%16 == 0 {
			b.StopTimer()
			for _, x := range ws {
				if err := reg.Ack(x.s, x.id, uint64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	if reg.Len() != watches {
		b.Fatalf("%d watches open, want %d: a buffer overflowed", reg.Len(), watches)
	}
	updates := float64(b.N * watches)
	// The acks outside the timing allocate nothing; the entry copy per
	// round is the store's, not the fan-out's, and is counted too (2,193
	// bytes over 1,024 updates: about 2 B each).
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/updates, "allocs/update")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/updates, "B/update")
	slices.Sort(rounds)
	b.ReportMetric(float64(rounds[(len(rounds)-1)/2].Nanoseconds()), "round-p50-ns")
	slices.Sort(publishes)
	b.ReportMetric(float64(publishes[(len(publishes)-1)/2].Nanoseconds()), "publish-p50-ns")
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	return s, c
}
