package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// BenchmarkPutRoundTrip times a serial Put of a 2,193-byte document two
// ways over loopback TCP, in rotating rounds of 64 on two stores: through
// client.Put over WebSocket to a wstransport.Handler (qualify's ws_cas),
// and as a fixed-size request that wakes a goroutine on the far side of a
// plain TCP connection, which Puts and sends a fixed-size answer back
// (qualify's tcp_cas_floor). It reports both medians and what the client,
// WebSocket, protobuf and the dispatcher add to the floor. The nosync case
// leaves the disk's noise out; the fsync case shows how the hand-offs
// interact with a blocking fdatasync; the conns127 case spreads the
// round trips over 127 connections each way in turn, as qualify does, so
// each finds its connection's buffers and goroutines cold. The ws-only
// cases run client.Put alone, for its allocations per call and for
// -cpuprofile, and the floor-only cases the floor alone, for its system
// calls; both count the threads put to sleep and the CPU time per call
// (reportSwitches), with and without fdatasync. Each
// alternating operation is a trace region ("floor", "ws").
func BenchmarkPutRoundTrip(b *testing.B) {
	b.Run("nosync", func(b *testing.B) { benchPutRoundTrip(b, true, 1) })
	b.Run("fsync", func(b *testing.B) { benchPutRoundTrip(b, false, 1) })
	b.Run("fsync-conns127", func(b *testing.B) { benchPutRoundTrip(b, false, 127) })
	for _, sync := range []struct {
		name   string
		noSync bool
	}{{"nosync", true}, {"fsync", false}} {
		b.Run("ws-only-"+sync.name, func(b *testing.B) {
			put, _ := wsPutter(b, openBenchStore(b, sync.noSync))
			b.ReportAllocs()
			defer reportSwitches(b)()
			for b.Loop() {
				if err := put(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("floor-only-"+sync.name, func(b *testing.B) {
			floor := tcpFloor(b, openBenchStore(b, sync.noSync))
			b.ReportAllocs()
			defer reportSwitches(b)()
			for b.Loop() {
				if err := floor(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportSwitches, deferred around a benchmark's loop, reports the
// process's voluntary context switches per operation ("ctxsw/op": a
// thread going to sleep in futex, epoll_wait or nanosleep, so about one
// per goroutine hand-off that finds no thread awake) and its CPU time
// per operation ("cpu-µs/op", user and system, every thread). Both are
// counts rather than latencies, so they compare the two paths even on a
// loaded machine, where the medians drift.
func reportSwitches(b *testing.B) func() {
	usage := func() (int64, time.Duration) {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return int64(ru.Nvcsw), time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	sw0, cpu0 := usage()
	return func() {
		sw, cpu := usage()
		n := float64(b.N)
		b.ReportMetric(float64(sw-sw0)/n, "ctxsw/op")
		b.ReportMetric(float64((cpu-cpu0).Microseconds())/n, "cpu-µs/op")
	}
}

// floorFrame is about the size of a PutState of the 2,193-byte document.
const floorFrame = 2193 + 100

func openBenchStore(b *testing.B, noSync bool) *statestore.Store {
	s, err := statestore.Open(statestore.Options{Dir: b.TempDir(), NoSync: noSync, CheckpointBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchPut is the Put both sides make.
func benchPut(doc []byte) statestore.PutRequest {
	return statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: schema.MediaIntentV1, Document: doc}
}

// wsPutter serves s over WebSocket on 127.0.0.1 and returns a Put through
// a client of it.
func wsPutter(b *testing.B, s *statestore.Store) (func() error, *client.Client) {
	puts, c := wsPutters(b, s, 1)
	return puts[0], c[0]
}

// wsPutters is wsPutter with n clients, each its own connection.
func wsPutters(b *testing.B, s *statestore.Store, n int) ([]func() error, []*client.Client) {
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{Authenticator: wstransport.AuthenticatorFunc(authenticate)})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	b.Cleanup(func() {
		h.Close()
		srv.Close()
		<-served
	})
	req := benchPut(testdoc.MediaIntent(2193, 1))
	var puts []func() error
	var cs []*client.Client
	for range n {
		c, err := client.Dial(context.Background(), client.Config{Endpoints: []string{"ws://" + ln.Addr().String()}, Token: aliceToken})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		cs = append(cs, c)
		puts = append(puts, func() error {
			_, err := c.Put(context.Background(), req)
			return err
		})
	}
	return puts, cs
}

// tcpFloor serves s as the floor over a loopback TCP connection and
// returns one round trip on it.
func tcpFloor(b *testing.B, s *statestore.Store) func() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return tcpFloorOn(b, s, ln)
}

// tcpFloorOn is tcpFloor through the listener ln.
func tcpFloorOn(b *testing.B, s *statestore.Store, ln net.Listener) func() error {
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	req := benchPut(testdoc.MediaIntent(2193, 1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		buf := make([]byte, floorFrame)
		for {
			if _, err := io.ReadFull(srv, buf); err != nil {
				return
			}
			if _, err := s.Put(context.Background(), alice, req); err != nil {
				return // the client's read fails
			}
			if _, err := srv.Write(buf); err != nil {
				return
			}
		}
	}()
	b.Cleanup(func() {
		cli.Close()
		<-done
	})
	buf := make([]byte, floorFrame)
	return func() error {
		if _, err := cli.Write(buf); err != nil {
			return err
		}
		_, err := io.ReadFull(cli, buf)
		return err
	}
}

func benchPutRoundTrip(b *testing.B, noSync bool, conns int) {
	ws, _ := wsPutters(b, openBenchStore(b, noSync), conns)
	fs := openBenchStore(b, noSync)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	floors := make([]func() error, conns)
	for i := range floors {
		floors[i] = tcpFloorOn(b, fs, ln)
	}
	ln.Close()
	ctx := context.Background()
	const round = 64
	var floorLat, wsLat []time.Duration
	for i := 0; b.Loop(); i++ {
		name, op, lat := "ws", ws[i%conns], &wsLat
		if i/round%2 == 0 {
			name, op, lat = "floor", floors[i%conns], &floorLat
		}
		t0 := time.Now()
		r := trace.StartRegion(ctx, name)
		if err := op(); err != nil {
			b.Fatal(name, ": ", err)
		}
		r.End()
		*lat = append(*lat, time.Since(t0))
	}
	median := func(l []time.Duration) float64 {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return float64(l[len(l)/2].Nanoseconds()) / 1e3
	}
	fm, wm := median(floorLat), median(wsLat)
	b.ReportMetric(fm, "floor-p50-µs")
	b.ReportMetric(wm, "ws-p50-µs")
	b.ReportMetric(wm-fm, "over-floor-p50-µs")
	if fm > 0 {
		b.ReportMetric(wm/fm, "ws/floor")
	}
}
