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
		b.Run(fmt.Sprintf("batch=%d/raftlog", batch), func(b *testing.B) { benchRaftlog(b, batch, Options{}) })
		b.Run(fmt.Sprintf("batch=%d/raftlog-syscall", batch), func(b *testing.B) { benchRaftlog(b, batch, Options{WaitInSyscall: true}) })
		b.Run(fmt.Sprintf("batch=%d/raftlog-noprewrite", batch), func(b *testing.B) { benchRaftlog(b, batch, Options{NoPrewrite: true}) })
		b.Run(fmt.Sprintf("batch=%d/tidwall", batch), func(b *testing.B) { benchTidwall(b, batch) })
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

func benchRaftlog(b *testing.B, batch int, opts Options) {
	s := openStore(b, filepath.Join(b.TempDir(), "raft"), opts)
	defer s.Close()
	logs := benchLogs(batch, 1)
	b.SetBytes(int64(batch * benchEntryBytes))
	b.ResetTimer()
	for range b.N {
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
		for _, l := range logs {
			l.Index += uint64(batch)
		}
	}
	b.StopTimer()
	if st := s.Stats(); st.Syncs > uint64(b.N) {
		b.Fatalf("%d fdatasyncs for %d StoreLogs", st.Syncs, b.N)
	}
}

func benchTidwall(b *testing.B, batch int) {
	dir := filepath.Join(b.TempDir(), "wal")
	const segSize = journal.DefaultSegmentSize
	l, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: segSize, LogFormat: wal.Binary, NoCopy: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	// The same frames raftlog writes.
	frames := make([][]byte, batch)
	for i, lg := range benchLogs(batch, 1) {
		rec := &journal.Record{Kind: journal.KindRaft, Raft: &journal.RaftEntry{Term: lg.Term, Type: uint8(lg.Type),
			AppendedAt: lg.AppendedAt, Data: lg.Data}}
		if frames[i], err = rec.Encode(); err != nil {
			b.Fatal(err)
		}
	}
	// Follow tidwall/wal's tail the way the journal does (tidwall.go): an
	// entry bringing the tail to the segment size seals it.
	tailStart, tailBytes := uint64(1), 0
	var tail *os.File
	var wb wal.Batch
	next := uint64(1)
	b.SetBytes(int64(batch * benchEntryBytes))
	b.ResetTimer()
	for range b.N {
		wb.Clear()
		for _, f := range frames {
			wb.Write(next, f)
			if tailBytes += len(f) + varintLen(len(f)); tailBytes >= segSize {
				tailStart, tailBytes = next+1, 0
			}
			next++
		}
		if err := l.WriteBatch(&wb); err != nil {
			b.Fatal(err)
		}
		if tail == nil || tail.Name() != filepath.Join(dir, fmt.Sprintf("%020d", tailStart)) {
			if tail != nil {
				tail.Close()
			}
			if tail, err = os.Open(filepath.Join(dir, fmt.Sprintf("%020d", tailStart))); err != nil {
				b.Fatal(err)
			}
		}
		if err := unix.Fdatasync(int(tail.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if tail != nil {
		tail.Close()
	}
}

func varintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
