package statestore_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
)

// BenchmarkCASNoSync measures the serial compare-and-set path without the
// disk: admission, journal encoding, apply and reply.
func BenchmarkCASNoSync(b *testing.B) {
	f := newFixture(b, func(o *statestore.Options) { o.NoSync = true })
	const owners = 127
	docs := make([][]byte, owners)
	revs := make([]uint64, owners)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(2193, i)
	}
	b.SetBytes(2193)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o := i % owners
		p := statestore.Principal{ID: fmt.Sprintf("owner-%03d", o)}
		x := statestore.CreateOnly
		if revs[o] != 0 {
			x = statestore.IfRevision(revs[o])
		}
		e, err := f.put(p, "user/"+p.ID, "intent", docs[o], x)
		if err != nil {
			b.Fatal(err)
		}
		revs[o] = e.Revision
	}
}

// BenchmarkCASConcurrent127 is 127 writers compare-and-setting their own
// keys through group commit, durable: the commit path's throughput.
func BenchmarkCASConcurrent127(b *testing.B) {
	f := newFixture(b, func(o *statestore.Options) {
		o.NoSync = os.Getenv("KP_BENCH_NOSYNC") != ""
		if v, err := strconv.ParseInt(os.Getenv("KP_BENCH_CHECKPOINT_BYTES"), 10, 64); err == nil {
			o.CheckpointBytes = v
		}
		if v, err := strconv.Atoi(os.Getenv("KP_BENCH_SEGMENT_BYTES")); err == nil {
			o.SegmentSize = v
		}
	})
	const writers = 127
	docs := make([][]byte, writers)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(2193, i)
	}
	b.SetParallelism((writers + 1) / 2) // GOMAXPROCS=2 in this sandbox
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		w := int(next.Add(1) - 1)
		p := statestore.Principal{ID: fmt.Sprintf("owner-%03d", w)}
		var rev uint64
		for pb.Next() {
			x := statestore.CreateOnly
			if rev != 0 {
				x = statestore.IfRevision(rev)
			}
			e, err := f.put(p, "user/"+p.ID, "intent", docs[w%writers], x)
			if err != nil {
				b.Fatal(err)
			}
			rev = e.Revision
		}
	})
	st := f.s.JournalStats()
	b.ReportMetric(float64(st.Records)/float64(max(st.Appends, 1)), "records/batch")
	b.ReportMetric(float64(st.Records)/float64(max(st.Syncs, 1)), "records/sync")
	b.ReportMetric(float64(st.Syncs)/b.Elapsed().Seconds(), "syncs/s")
}

// BenchmarkReplay opens a store of 5,000 2,193-byte documents from its
// journal alone: the replay path.
func BenchmarkReplay(b *testing.B) {
	f := newFixture(b, func(o *statestore.Options) { o.CheckpointBytes = -1; o.NoSync = true })
	for i := 0; i < 5000; i++ {
		f.mustPut(admin, fmt.Sprintf("group/r%d", i%8), fmt.Sprintf("k%05d", i), testdoc.MediaIntent(2193, i))
	}
	f.s.Close()
	f.s = nil
	b.SetBytes(5000 * 2193)
	for b.Loop() {
		f.open()
		f.s.Close()
		f.s = nil
	}
}

// BenchmarkOpenFromCheckpoint opens a store of 5,000 2,193-byte documents
// from a checkpoint image and an empty journal after it: the image path of
// Open, whose every document is validated as replayed records are.
func BenchmarkOpenFromCheckpoint(b *testing.B) {
	f := newFixture(b, func(o *statestore.Options) { o.CheckpointBytes = -1; o.NoSync = true })
	for i := 0; i < 5000; i++ {
		f.mustPut(admin, fmt.Sprintf("group/r%d", i%8), fmt.Sprintf("k%05d", i), testdoc.MediaIntent(2193, i))
	}
	if err := f.s.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	f.s.Close()
	f.s = nil
	b.SetBytes(5000 * 2193)
	for b.Loop() {
		f.open()
		if f.s.OpenReport().Checkpoint.Path == "" {
			b.Fatal("Open did not start from the checkpoint")
		}
		f.s.Close()
		f.s = nil
	}
}
