package statestore_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

// BenchmarkClusterPut measures puts on a 3-node cluster in one process
// with the durable default (each node's raft log in its journal, one
// fdatasync per committed batch; in-memory transport) at the leader and at
// a follower, serial and with 127 writers, beside a durable single store
// on the same disk in the same run. The single store runs first, and each
// cluster sub-benchmark reports its time per put as a ratio to the single
// store's of the same shape (x-single).
//
// Measured (go test -run x -bench BenchmarkClusterPut -benchtime 2000x .,
// one run on this 2-core host, the three nodes and the single store on one
// shared disk): serial, single 473 us, leader 1.47 ms (3.1x), follower
// 2.20 ms (4.6x); 127 writers, single 11.4 us, leader 55 us (4.9x),
// follower 100 us (8.8x). A commit here waits for two fdatasyncs in turn
// on the one disk (the leader's and a follower's; the third node's queues
// beside them), and three raft loops, FSMs and transports share the two
// processors: the figure is not a three-machine cluster's.
func BenchmarkClusterPut(b *testing.B) {
	c := newTestCluster(b, 3)
	single, err := statestore.Open(statestore.Options{Dir: b.TempDir(), Clock: c.clock})
	if err != nil {
		b.Fatal(err)
	}
	defer single.Close()
	targets := []struct {
		name string
		s    *statestore.Store
	}{{"single", single}, {"leader", c.leader()}, {"follower", c.follower()}}
	doc := docN(1)
	base := map[string]float64{} // the single store's ns per put, by shape
	report := func(b *testing.B, target, shape string) {
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if target == "single" {
			base[shape] = ns
		} else if base[shape] > 0 {
			b.ReportMetric(ns/base[shape], "x-single")
		}
	}
	for _, tg := range targets {
		b.Run(tg.name+"/serial", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := tg.s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/s-" + tg.name, Key: fmt.Sprintf("k%d", i%500), Schema: schema.MediaIntentV1, Document: doc}); err != nil {
					b.Fatal(err)
				}
			}
			report(b, tg.name, "serial")
		})
		b.Run(tg.name+"/127-writers", func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(64) // 2 cores x 64 = 128 goroutines
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := tg.s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/p-" + tg.name, Key: fmt.Sprintf("p%d", i%500), Schema: schema.MediaIntentV1, Document: doc}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b, tg.name, "127-writers")
		})
	}
}

// BenchmarkClusterFollowerWatch measures how long after the leader's
// acknowledgement a follower's watch delivers the update (the follower
// learns the commit from the next AppendEntries, within CommitTimeout),
// reported as p50 and max in µs.
func BenchmarkClusterFollowerWatch(b *testing.B) {
	c := newTestCluster(b, 3)
	l, f := c.leader(), c.follower()
	sink := newSink()
	ss, err := f.OpenSession(admin, sink)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/w"}); err != nil {
		b.Fatal(err)
	}
	sink.next(b)
	var lags []time.Duration
	doc := docN(1)
	for i := 0; b.Loop(); i++ {
		if _, err := l.Put(ctx, admin, statestore.PutRequest{Namespace: "group/w", Key: fmt.Sprintf("k%d", i%100), Schema: schema.MediaIntentV1, Document: doc}); err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		u := sink.nextUpdate(b)
		lags = append(lags, time.Since(acked))
		if err := f.Ack(ss, "w", u.Sequence); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds()), "max-µs")
}
