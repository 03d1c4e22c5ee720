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
// (in-memory raft log and transport: no disk, so it isolates the cost of
// raft and the state machines) at the leader and at a follower, serial and
// with 127 writers, beside a single store with NoSync in the same run.
func BenchmarkClusterPut(b *testing.B) {
	c := newTestCluster(b, 3)
	single, err := statestore.Open(statestore.Options{Dir: b.TempDir(), Clock: c.clock, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer single.Close()
	targets := []struct {
		name string
		s    *statestore.Store
	}{{"single-nosync", single}, {"leader", c.leader()}, {"follower", c.follower()}}
	doc := docN(1)
	for _, tg := range targets {
		b.Run(tg.name+"/serial", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := tg.s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/s-" + tg.name, Key: fmt.Sprintf("k%d", i%500), Schema: schema.MediaIntentV1, Document: doc}); err != nil {
					b.Fatal(err)
				}
			}
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
