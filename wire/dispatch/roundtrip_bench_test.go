package dispatch_test

import (
	"context"
	"io"
	"net"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// BenchmarkPutRoundTrip times a serial PutState of a 2,193-byte document
// three ways, in rotating rounds of 64 on three stores: the Put called
// directly; the Put done by a goroutine on the far side of a net.Pipe
// that a fixed-size request wakes and a fixed-size answer comes back on,
// with no protocol at all (the transport floor, as qualify's
// pipe_cas_floor); and the PutState through a session (dispatcher and
// framing over net.Pipe). It reports the three medians, what the wire adds
// to the direct call, and what it adds to the floor: the dispatcher's and
// the protocol's own cost. The nosync case leaves the disk's noise out;
// the fsync case shows how the hand-offs interact with a blocking
// fdatasync; the sessions127 case spreads the wire's requests over 127
// sessions in turn, as qualify's wire_cas does, so each request finds its
// session's buffers and goroutines cold. Each operation is a trace region
// ("direct", "floor", "wire"), so that `go test -bench PutRoundTrip -trace
// FILE` shows where the difference goes. ns/op mixes the three kinds: the
// timer is never stopped, because StopTimer and StartTimer each read the
// memory statistics, which stops the world and wakes every thread once per
// operation.
func BenchmarkPutRoundTrip(b *testing.B) {
	b.Run("nosync", func(b *testing.B) { benchPutRoundTrip(b, true, 1) })
	b.Run("fsync", func(b *testing.B) { benchPutRoundTrip(b, false, 1) })
	b.Run("nosync-sessions127", func(b *testing.B) { benchPutRoundTrip(b, true, 127) })
}

// floorFrame is about the size of a PutState of the 2,193-byte document.
const floorFrame = 2193 + 100

// pipeFloor answers each fixed-size frame on conn with a Put of doc on s
// and the same frame back, until conn fails.
func pipeFloor(s *statestore.Store, conn net.Conn, doc []byte) {
	buf := make([]byte, floorFrame)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
		if _, err := s.Put(context.Background(), alice, statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: schema.MediaIntentV1, Document: doc}); err != nil {
			conn.Close() // the client's read fails
			return
		}
		if _, err := conn.Write(buf); err != nil {
			return
		}
	}
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
	direct, floored, wired := open(), open(), open()
	srv := dispatch.New(wired, dispatch.Options{})
	conns := make([]*framing.Conn[*pb.ServerMessage, *pb.ClientMessage], sessions)
	for i := range conns {
		srvSide, cliSide := net.Pipe()
		go srv.Serve(context.Background(), alice, dispatch.NewStreamConn(srvSide, 0))
		b.Cleanup(func() { cliSide.Close() })
		conns[i] = framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](cliSide, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	}
	d := testdoc.MediaIntent(2193, 1)
	floorSrv, floorCli := net.Pipe()
	go pipeFloor(floored, floorSrv, d)
	b.Cleanup(func() { floorCli.Close() })
	floorBuf := make([]byte, floorFrame)
	ctx := context.Background()
	var id uint64
	const round = 64
	var directLat, floorLat, wireLat []time.Duration
	for i := 0; b.Loop(); i++ {
		switch i / round % 3 {
		case 0:
			t0 := time.Now()
			r := trace.StartRegion(ctx, "direct")
			if _, err := direct.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: schema.MediaIntentV1, Document: d}); err != nil {
				b.Fatal(err)
			}
			r.End()
			directLat = append(directLat, time.Since(t0))
			continue
		case 1:
			t0 := time.Now()
			r := trace.StartRegion(ctx, "floor")
			if _, err := floorCli.Write(floorBuf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(floorCli, floorBuf); err != nil {
				b.Fatal("the floor's Put failed: ", err)
			}
			r.End()
			floorLat = append(floorLat, time.Since(t0))
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
	dm, fm, wm := median(directLat), median(floorLat), median(wireLat)
	b.ReportMetric(dm, "direct-p50-µs")
	b.ReportMetric(fm, "floor-p50-µs")
	b.ReportMetric(wm, "wire-p50-µs")
	b.ReportMetric(wm-dm, "added-p50-µs")
	b.ReportMetric(wm-fm, "over-floor-p50-µs")
}
