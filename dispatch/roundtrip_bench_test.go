package dispatch_test

import (
	"context"
	"net"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/dispatch"
	"github.com/keeppeek/statestore/framing"
	"github.com/keeppeek/statestore/internal/testdoc"
	pb "github.com/keeppeek/statestore/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/schema"
)

// BenchmarkPutRoundTrip times a serial PutState of a 2,193-byte document
// through a session (dispatcher and framing over net.Pipe) against the
// same Put called directly, in alternating rounds of 64 on two stores,
// and reports both medians and their difference: what the wire adds per
// request. The nosync case leaves the disk's noise out; the fsync case
// shows how the hand-offs interact with a blocking fdatasync; the
// sessions127 case spreads the wire's requests over 127 sessions in turn,
// as qualify's wire_cas does, so each request finds its session's buffers
// and goroutines cold. Each operation is a trace region ("direct",
// "wire"), so that `go test -bench PutRoundTrip -trace FILE` shows where
// the difference goes. ns/op mixes both kinds: the timer is never stopped,
// because StopTimer and StartTimer each read the memory statistics, which
// stops the world and wakes every thread once per operation.
func BenchmarkPutRoundTrip(b *testing.B) {
	b.Run("nosync", func(b *testing.B) { benchPutRoundTrip(b, true, 1) })
	b.Run("fsync", func(b *testing.B) { benchPutRoundTrip(b, false, 1) })
	b.Run("nosync-sessions127", func(b *testing.B) { benchPutRoundTrip(b, true, 127) })
}

func benchPutRoundTrip(b *testing.B, noSync bool, sessions int) {
	open := func() *statestore.Store {
		s, err := statestore.Open(statestore.Options{Dir: b.TempDir(), NoSync: noSync})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	direct, wired := open(), open()
	srv := dispatch.New(wired, dispatch.Options{})
	conns := make([]*framing.Conn[*pb.ServerMessage, *pb.ClientMessage], sessions)
	for i := range conns {
		srvSide, cliSide := net.Pipe()
		go srv.Serve(context.Background(), alice, dispatch.NewStreamConn(srvSide, 0))
		b.Cleanup(func() { cliSide.Close() })
		conns[i] = framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](cliSide, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	}
	d := testdoc.MediaIntent(2193, 1)
	ctx := context.Background()
	var id uint64
	const round = 64
	var directLat, wireLat []time.Duration
	for i := 0; b.Loop(); i++ {
		if i/round%2 == 0 {
			t0 := time.Now()
			r := trace.StartRegion(ctx, "direct")
			if _, err := direct.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: schema.MediaIntentV1, Document: d}); err != nil {
				b.Fatal(err)
			}
			r.End()
			directLat = append(directLat, time.Since(t0))
			continue
		}
		id++
		conn := conns[id%uint64(sessions)]
		t0 := time.Now()
		r := trace.StartRegion(ctx, "wire")
		if err := conn.Send(putReq(id, "user/alice", "k", d, nil, 0)); err != nil {
			b.Fatal(err)
		}
		m, err := conn.Recv()
		if err != nil || m.GetResult().GetRequestId() != id || m.GetResult().GetEntry() == nil {
			b.Fatal(m, err)
		}
		r.End()
		wireLat = append(wireLat, time.Since(t0))
	}
	median := func(l []time.Duration) float64 {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return float64(l[len(l)/2].Nanoseconds()) / 1e3
	}
	dm, wm := median(directLat), median(wireLat)
	b.ReportMetric(dm, "direct-p50-µs")
	b.ReportMetric(wm, "wire-p50-µs")
	b.ReportMetric(wm-dm, "added-p50-µs")
}
