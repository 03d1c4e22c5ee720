package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/tidwall/wal"
	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore/journal"
)

// benchEntryBytes is the entry size (one store batch of a few
// documents).
const benchEntryBytes = 2300

// BenchmarkStoreLogs measures a StoreLogs of 1 and of 64 entries of 2,300
// bytes, and beside it, in the same run, the floor: tidwall/wal alone
// appending the same frame bytes as one batch and fdatasyncing its tail
// segment (no pre-written tail, no directory fsync at a new segment, no
// checks). Read the figures as the ratio raftlog/tidwall of one run.
// raftlog-syscall waits in fdatasync(2) instead of parking on io_uring;
// raftlog-noprewrite appends as tidwall/wal does, which isolates what the
// framing, the checks and the journal's bookkeeping cost.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		for _, v := range []struct {
			name string
			step func(testing.TB, int) (func(), func())
		}{
			{"raftlog", raftlogStep(Options{})},
			{"raftlog-syscall", raftlogStep(Options{WaitInSyscall: true})},
			{"raftlog-noprewrite", raftlogStep(Options{NoPrewrite: true})},
			{"tidwall", tidwallStep},
		} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, v.name), func(b *testing.B) {
				step, done := v.step(b, batch)
				defer done()
				b.SetBytes(int64(batch * benchEntryBytes))
				b.ResetTimer()
				for range b.N {
					step()
				}
			})
		}
	}
}

// BenchmarkStoreLogsAlternating runs a raftlog StoreLogs and the bare
// tidwall/wal append of the same bytes in turn, in the same iteration (the
// order swapped each time), so a shared disk's drift hits both alike; it
// reports each side's mean and their ratio.
func BenchmarkStoreLogsAlternating(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ours, doneOurs := raftlogStep(Options{})(b, batch)
			defer doneOurs()
			peer, donePeer := tidwallStep(b, batch)
			defer donePeer()
			var tOurs, tPeer time.Duration
			b.ResetTimer()
			for i := range b.N {
				first, second, t1, t2 := ours, peer, &tOurs, &tPeer
				if i%2 == 1 {
					first, second, t1, t2 = peer, ours, &tPeer, &tOurs
				}
				t0 := time.Now()
				first()
				m := time.Now()
				second()
				*t1 += m.Sub(t0)
				*t2 += time.Since(m)
			}
			b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "raftlog-ns/op")
			b.ReportMetric(float64(tPeer.Nanoseconds())/float64(b.N), "tidwall-ns/op")
			b.ReportMetric(float64(tOurs)/float64(tPeer), "raftlog/tidwall")
		})
	}
}

func benchLogs(batch int, next uint64) []*raft.Log {
	logs := make([]*raft.Log, batch)
	for i := range logs {
		logs[i] = &raft.Log{Index: next + uint64(i), Term: 3, Type: raft.LogCommand,
			Data: make([]byte, benchEntryBytes), AppendedAt: time.Unix(1700000000, 0)}
	}
	return logs
}

// raftlogStep returns a constructor of one StoreLogs of batch entries
// on a fresh LogStore with opts, and its cleanup.
func raftlogStep(opts Options) func(testing.TB, int) (func(), func()) {
	return func(tb testing.TB, batch int) (func(), func()) {
		s := openStore(tb, filepath.Join(tb.TempDir(), "raft"), opts)
		logs := benchLogs(batch, 1)
		calls := uint64(0)
		step := func() {
			if err := s.StoreLogs(logs); err != nil {
				tb.Fatal(err)
			}
			calls++
			for _, l := range logs {
				l.Index += uint64(batch)
			}
		}
		done := func() {
			if st := s.Stats(); st.Syncs > calls {
				tb.Errorf("%d fdatasyncs for %d StoreLogs", st.Syncs, calls)
			}
			s.Close()
		}
		return step, done
	}
}

// tidwallStep is the peer: tidwall/wal appending the frames raftlog
// writes, then one fdatasync of its tail segment.
func tidwallStep(tb testing.TB, batch int) (func(), func()) {
	dir := filepath.Join(tb.TempDir(), "wal")
	const segSize = journal.DefaultSegmentSize
	l, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: segSize, LogFormat: wal.Binary, NoCopy: true})
	if err != nil {
		tb.Fatal(err)
	}
	frames := make([][]byte, batch)
	for i, lg := range benchLogs(batch, 1) {
		rec := &journal.Record{Kind: journal.KindRaft, Raft: &journal.RaftEntry{Term: lg.Term, Type: uint8(lg.Type),
			AppendedAt: lg.AppendedAt, Data: lg.Data}}
		if frames[i], err = rec.Encode(); err != nil {
			tb.Fatal(err)
		}
	}
	// Follow tidwall/wal's tail the way the journal does (tidwall.go): an
	// entry bringing the tail to the segment size seals it.
	tailStart, tailBytes := uint64(1), 0
	var tail *os.File
	var wb wal.Batch
	next := uint64(1)
	step := func() {
		wb.Clear()
		for _, f := range frames {
			wb.Write(next, f)
			if tailBytes += len(f) + varintLen(len(f)); tailBytes >= segSize {
				tailStart, tailBytes = next+1, 0
			}
			next++
		}
		if err := l.WriteBatch(&wb); err != nil {
			tb.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("%020d", tailStart))
		if tail == nil || tail.Name() != name {
			if tail != nil {
				tail.Close()
			}
			if tail, err = os.Open(name); err != nil {
				tb.Fatal(err)
			}
		}
		if err := unix.Fdatasync(int(tail.Fd())); err != nil {
			tb.Fatal(err)
		}
	}
	done := func() {
		if tail != nil {
			tail.Close()
		}
		l.Close()
	}
	return step, done
}

func varintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
