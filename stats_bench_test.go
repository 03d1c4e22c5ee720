package statestore

import "testing"

// recordOneOp is the metrics work one serial write adds to the commit
// path, in the order the path does it: the queue timestamp, the batch
// size, the sync's two timestamps and its histograms, the commit latency
// and the result counter.
func recordOneOp(m *metrics, o *op) {
	queued := monoNow()
	m.batchOps.Observe(1)
	start := monoNow()
	m.synced(monoNow()-start, 1)
	m.answered(o, queued)
	m.wrote(nil)
}

// BenchmarkRecordOp measures recordOneOp. The store cannot run without
// its metrics, so this is how their cost is measured: per operation, to
// set against the p50 of durable_cas (hundreds of µs) and memory_cas
// (about 10 µs).
func BenchmarkRecordOp(b *testing.B) {
	m := newMetrics()
	o := &op{kind: opPut}
	b.ReportAllocs()
	for b.Loop() {
		recordOneOp(m, o)
	}
}

// BenchmarkRecordOpParallel is BenchmarkRecordOp from every CPU at once:
// the counters are shared, so this shows what contention on their cache
// lines costs concurrent writers.
func BenchmarkRecordOpParallel(b *testing.B) {
	m := newMetrics()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		o := &op{kind: opPut}
		for pb.Next() {
			recordOneOp(m, o)
		}
	})
}
