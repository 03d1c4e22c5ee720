package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
	"github.com/keeppeek/statestore/journal"
)

func openStore(t testing.TB, dir string, opts Options) *LogStore {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// entryData is the deterministic content of the entry at index in term,
// 0 to ~2.3 KB, so a reader can tell the bytes are the ones stored.
func entryData(index, term uint64) []byte {
	r := rand.New(rand.NewPCG(index, term))
	b := make([]byte, int(index*7919%2300))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newLog(r *rand.Rand, index, term uint64) *raft.Log {
	l := &raft.Log{Index: index, Term: term, Type: raft.LogType(r.IntN(6)), Data: entryData(index, term)}
	if r.IntN(4) == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	switch r.IntN(3) {
	case 0: // the zero time: raft's own entries before AppendedAt existed
	case 1:
		l.AppendedAt = time.Unix(int64(r.Uint32()), int64(r.IntN(1e9)))
	default:
		l.AppendedAt = time.Now() // with a monotonic reading and a location
	}
	return l
}

// sameLog compares two entries field by field (Data and Extensions by
// content, AppendedAt as an instant and by IsZero).
func sameLog(a, b *raft.Log) error {
	switch {
	case a.Index != b.Index, a.Term != b.Term, a.Type != b.Type:
		return fmt.Errorf("index/term/type %d/%d/%v vs %d/%d/%v", a.Index, a.Term, a.Type, b.Index, b.Term, b.Type)
	case !bytes.Equal(a.Data, b.Data):
		return fmt.Errorf("data differs at index %d (%d vs %d bytes)", a.Index, len(a.Data), len(b.Data))
	case !bytes.Equal(a.Extensions, b.Extensions):
		return fmt.Errorf("extensions differ at index %d: %q vs %q", a.Index, a.Extensions, b.Extensions)
	case !a.AppendedAt.Equal(b.AppendedAt) || a.AppendedAt.IsZero() != b.AppendedAt.IsZero():
		return fmt.Errorf("AppendedAt differs at index %d: %v vs %v", a.Index, a.AppendedAt, b.AppendedAt)
	}
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestDifferentialAgainstInmemStore runs seeded random sequences of every
// LogStore call, legal deletions of each shape and reopens against
// raft.NewInmemStore and requires identical answers. RAFTLOG_DIFF_SEEDS
// and RAFTLOG_DIFF_OPS raise the bounds.
func TestDifferentialAgainstInmemStore(t *testing.T) {
	t.Parallel()
	seeds, ops := envInt("RAFTLOG_DIFF_SEEDS", 6), envInt("RAFTLOG_DIFF_OPS", 400)
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			differential(t, uint64(seed), ops)
		})
	}
}

func differential(t *testing.T, seed uint64, ops int) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	dir := filepath.Join(t.TempDir(), "raft")
	opts := Options{SegmentSize: 16 << 10} // many segments, so prefixes and suffixes cross them
	s := openStore(t, dir, opts)
	defer func() { s.Close() }()
	m := raft.NewInmemStore()
	term := uint64(1)
	counts := map[string]int{}

	check := func(op string) {
		t.Helper()
		f1, err1 := s.FirstIndex()
		l1, err2 := s.LastIndex()
		f2, _ := m.FirstIndex()
		l2, _ := m.LastIndex()
		if err1 != nil || err2 != nil || f1 != f2 || l1 != l2 {
			t.Fatalf("after %s: store %d..%d (%v %v), inmem %d..%d", op, f1, l1, err1, err2, f2, l2)
		}
		if c, _ := s.GetCommitIndex(); c > l1 {
			t.Fatalf("after %s: commit index %d above the last index %d", op, c, l1)
		}
	}
	get := func(index uint64) {
		t.Helper()
		var a, b raft.Log
		e1, e2 := s.GetLog(index, &a), m.GetLog(index, &b)
		if (e1 == nil) != (e2 == nil) || (e1 != nil && !errors.Is(e1, raft.ErrLogNotFound)) {
			t.Fatalf("GetLog(%d): store %v, inmem %v", index, e1, e2)
		}
		if e1 == nil {
			if err := sameLog(&a, &b); err != nil {
				t.Fatalf("GetLog(%d): %v", index, err)
			}
		}
	}
	for range ops {
		first, _ := m.FirstIndex()
		last, _ := m.LastIndex()
		empty := last == 0
		op := r.IntN(100)
		switch {
		case op < 35: // StoreLogs / StoreLog
			start := last + 1
			if empty {
				start = 1 + r.Uint64N(500) // after a delete-all, anywhere
			}
			n := 1 + r.IntN(8)
			if r.IntN(3) == 0 {
				n = 1
			}
			logs := make([]*raft.Log, n)
			for i := range logs {
				logs[i] = newLog(r, start+uint64(i), term)
			}
			if r.IntN(2) == 0 {
				s.StageCommitIndex(start - 1 - r.Uint64N(min(start, 4))) // raft's commit trails its log
			}
			var err error
			if n == 1 && r.IntN(2) == 0 {
				err = s.StoreLog(logs[0])
				counts["StoreLog"]++
			} else {
				err = s.StoreLogs(logs)
				counts["StoreLogs"]++
			}
			if err != nil {
				t.Fatalf("StoreLogs at %d: %v", start, err)
			}
			m.StoreLogs(logs)
		case op < 60:
			if !empty {
				get(first + r.Uint64N(last-first+1))
			}
			get(last + 1 + r.Uint64N(3))
			if first > 1 {
				get(first - 1)
			}
			counts["GetLog"]++
		case op < 70 && !empty && last > first: // prefix, after a snapshot
			hi := first + r.Uint64N(last-first)
			lo := first - min(first-1, r.Uint64N(3)) // raft may pass a lower min
			if err := s.DeleteRange(lo, hi); err != nil {
				t.Fatalf("DeleteRange(%d, %d) prefix: %v", lo, hi, err)
			}
			m.DeleteRange(lo, hi)
			counts["prefix"]++
		case op < 82 && !empty && last > first: // conflicting suffix
			commit, _ := s.GetCommitIndex()
			lo := max(first, commit) + 1
			if lo > last {
				continue
			}
			lo += r.Uint64N(last - lo + 1)
			if err := s.DeleteRange(lo, last); err != nil {
				t.Fatalf("DeleteRange(%d, %d) suffix above commit %d: %v", lo, last, commit, err)
			}
			m.DeleteRange(lo, last)
			term++ // the entries that replace them come from a newer leader
			counts["suffix"]++
		case op < 85 && !empty: // everything, after a snapshot install
			if err := s.DeleteRange(first, last); err != nil {
				t.Fatalf("DeleteRange(%d, %d) all: %v", first, last, err)
			}
			m.DeleteRange(first, last)
			counts["all"]++
		case op < 95: // close and reopen
			commit, _ := s.GetCommitIndex()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, opts)
			if c, _ := s.GetCommitIndex(); c != commit {
				t.Fatalf("commit index %d before close, %d after reopen", commit, c)
			}
			counts["reopen"]++
		default:
			term++
		}
		check(fmt.Sprint("op ", op))
	}
	// Every entry, one last time, after a final reopen.
	s.Close()
	s = openStore(t, dir, opts)
	first, _ := m.FirstIndex()
	last, _ := m.LastIndex()
	for i := first; i <= last && last > 0; i++ {
		get(i)
	}
	check("final reopen")
	t.Logf("seed %d: %v; final log %d..%d", seed, counts, first, last)
}

// TestRefusals: what raft's contract rules out is refused with a typed
// error naming the index, and changes nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		do    func(s *LogStore) error
		index uint64
		want  error
	}{
		{"gap after the last entry", func(s *LogStore) error { return s.StoreLog(&raft.Log{Index: 22, Term: 2}) }, 22, ErrGap},
		{"overwrite of a stored entry", func(s *LogStore) error { return s.StoreLog(&raft.Log{Index: 15, Term: 2}) }, 15, ErrGap},
		{"batch with a hole", func(s *LogStore) error {
			return s.StoreLogs([]*raft.Log{{Index: 21, Term: 2}, {Index: 23, Term: 2}})
		}, 23, ErrGap},
		{"index zero", func(s *LogStore) error {
			return s.StoreLogs([]*raft.Log{{Index: 0, Term: 2}})
		}, 0, ErrGap},
		{"entry too large", func(s *LogStore) error {
			return s.StoreLog(&raft.Log{Index: 21, Term: 2, Data: make([]byte, 2000)})
		}, 21, ErrTooLarge},
		{"suffix at the commit floor", func(s *LogStore) error { return s.DeleteRange(12, 20) }, 12, ErrCommitted},
		{"suffix below the commit floor", func(s *LogStore) error { return s.DeleteRange(8, 20) }, 8, ErrCommitted},
		{"suffix beyond the last, from the floor", func(s *LogStore) error { return s.DeleteRange(12, 99) }, 12, ErrCommitted},
		{"hole in the middle", func(s *LogStore) error { return s.DeleteRange(14, 16) }, 14, ErrRange},
		{"min above max", func(s *LogStore) error { return s.DeleteRange(16, 14) }, 16, ErrRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "raft")
			s := openStore(t, dir, Options{MaxEntryBytes: 1000})
			defer s.Close()
			r := rand.New(rand.NewPCG(1, 2))
			var logs []*raft.Log
			for i := uint64(1); i <= 20; i++ {
				l := newLog(r, i, 1)
				l.Data = l.Data[:min(len(l.Data), 900)]
				logs = append(logs, l)
			}
			if err := s.StoreLogs(logs[:10]); err != nil {
				t.Fatal(err)
			}
			s.StageCommitIndex(12) // persisted with the next batch
			if err := s.StoreLogs(logs[10:]); err != nil {
				t.Fatal(err)
			}
			err := c.do(s)
			var re *RefusedError
			if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || !errors.Is(err, c.want) || re.Index != c.index {
				t.Fatalf("got %v, want a RefusedError (%v) at index %d", err, c.want, c.index)
			}
			if f, _ := s.FirstIndex(); f != 1 {
				t.Fatalf("FirstIndex %d after a refusal", f)
			}
			if l, _ := s.LastIndex(); l != 20 {
				t.Fatalf("LastIndex %d after a refusal", l)
			}
			for _, want := range logs {
				var got raft.Log
				if err := s.GetLog(want.Index, &got); err != nil {
					t.Fatal(err)
				}
				if err := sameLog(&got, want); err != nil {
					t.Fatal(err)
				}
			}
			// The legal suffix just above the floor still goes.
			if err := s.DeleteRange(13, 20); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCommitIndexPersistedWithTheNextBatch: a staged commit index is not
// persisted by itself, only with the StoreLogs after it, and survives a
// reopen; it is never reported above the last index.
func TestCommitIndexPersistedWithTheNextBatch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft")
	s := openStore(t, dir, Options{})
	r := rand.New(rand.NewPCG(3, 4))
	for i := uint64(1); i <= 5; i++ {
		if err := s.StoreLog(newLog(r, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	s.StageCommitIndex(4)
	if c, _ := s.GetCommitIndex(); c != 0 {
		t.Fatalf("commit index %d before any batch carried it", c)
	}
	if err := s.StoreLog(newLog(r, 6, 1)); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetCommitIndex(); c != 4 {
		t.Fatalf("commit index %d, want 4", c)
	}
	s.StageCommitIndex(6)
	// Reopen without Close (a crash): the entries carry it, not the marker.
	s.j.Close()
	s = openStore(t, dir, Options{})
	defer s.Close()
	if c, _ := s.GetCommitIndex(); c != 4 {
		t.Fatalf("commit index %d after reopen, want 4 (6 was only staged)", c)
	}
	s.StageCommitIndex(100)
	if err := s.StoreLog(newLog(r, 7, 1)); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetCommitIndex(); c != 7 {
		t.Fatalf("commit index %d, want it capped at the last index 7", c)
	}
}

// TestCorruptEntryBeforeTheTail: a flipped byte in an entry that is not
// the torn tail refuses the open with a CorruptError naming the entry's
// index, segment and offset.
func TestCorruptEntryBeforeTheTail(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"sealed segment", "tail segment"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "raft")
			s := openStore(t, dir, Options{SegmentSize: 32 << 10})
			r := rand.New(rand.NewPCG(5, 6))
			for i := uint64(1); i <= 200; i++ {
				if err := s.StoreLog(newLog(r, i, 1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs, err := journal.ListSegments(dir)
			if err != nil || len(segs) < 3 {
				t.Fatalf("segments %v, %v", segs, err)
			}
			seg := segs[1]
			if where == "tail segment" {
				seg = segs[len(segs)-1]
			}
			data, err := os.ReadFile(seg.Path)
			if err != nil {
				t.Fatal(err)
			}
			// The second entry of the segment, a byte in its middle.
			sc := journal.NewScanner(data, seg.Start, limits(DefaultMaxEntryBytes), journal.StopAtDamage)
			sc.Next()
			sc.Next()
			wantIndex, wantOff := sc.Index(), sc.Offset()
			if sc.Damage() != nil || sc.Raw() == nil {
				t.Fatalf("no second entry in %s", seg.Name())
			}
			data[int(sc.End())-len(sc.Raw())/2] ^= 0x40
			if err := os.WriteFile(seg.Path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, Options{SegmentSize: 32 << 10})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Index != wantIndex || ce.Offset != wantOff || ce.Segment != seg.Name() {
				t.Fatalf("got %v, want a CorruptError at index %d, segment %s, offset %d", err, wantIndex, seg.Name(), wantOff)
			}
		})
	}
}

// TestOneFdatasyncPerStoreLogs counts the journal's commit fdatasyncs and
// every other fsync (directories, cuts, files replaced) through the
// fault seams: a StoreLogs of 1 or of 64 entries is one fdatasync and
// nothing else (within a segment; see the package doc for a segment
// change).
func TestOneFdatasyncPerStoreLogs(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 64} {
		t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
			t.Parallel()
			var commits, others atomic.Int64
			h := &fault.Hooks{}
			s := openStore(t, filepath.Join(t.TempDir(), "raft"), Options{SegmentSize: 64 << 20, Faults: h})
			defer s.Close()
			h.SetSync(func(string) error { commits.Add(1); return nil })
			h.SetDiskSync(func(string) error { others.Add(1); return nil })
			r := rand.New(rand.NewPCG(7, 8))
			next := uint64(1)
			const rounds = 20
			for range rounds {
				logs := make([]*raft.Log, batch)
				for i := range logs {
					logs[i] = newLog(r, next, 1)
					logs[i].Data = make([]byte, 2300)
					next++
				}
				before := commits.Load()
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
				if got := commits.Load() - before; got != 1 {
					t.Fatalf("StoreLogs of %d entries: %d fdatasyncs", batch, got)
				}
			}
			if others.Load() != 0 {
				t.Fatalf("%d other fsyncs on the commit path", others.Load())
			}
			if st := s.Stats(); st.Syncs != rounds || st.Appends != rounds {
				t.Fatalf("journal counted %d syncs and %d appends for %d StoreLogs", st.Syncs, st.Appends, rounds)
			}
		})
	}
}

// TestTornTailCutUnlessCommitted: a final entry cut short by a crash is
// cut at Open (TailCut) when it lies above the commit floor, and refuses
// the open, naming its index, when the floor says it was committed.
func TestTornTailCutUnlessCommitted(t *testing.T) {
	t.Parallel()
	for _, committed := range []bool{false, true} {
		t.Run(fmt.Sprint("committed=", committed), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "raft")
			s := openStore(t, dir, Options{NoPrewrite: true})
			r := rand.New(rand.NewPCG(9, 10))
			for i := uint64(1); i <= 10; i++ {
				l := newLog(r, i, 1)
				l.Data = make([]byte, 500)
				if err := s.StoreLog(l); err != nil {
					t.Fatal(err)
				}
			}
			if committed {
				s.StageCommitIndex(10)
				if err := s.StoreLog(&raft.Log{Index: 11, Term: 1, Data: make([]byte, 500)}); err != nil {
					t.Fatal(err)
				}
				// Close raises the ACKNOWLEDGED marker to the floor, 10.
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs, _ := journal.ListSegments(dir)
			tail := segs[len(segs)-1]
			last := uint64(10)
			if committed {
				last = 11
			}
			// Cut 100 bytes off the last entry: what an interrupted write leaves.
			if err := os.Truncate(tail.Path, tail.Size-100); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{NoPrewrite: true})
			if !committed {
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if cut := s.TailCut(); cut == nil || cut.Index != last {
					t.Fatalf("TailCut %v, want the entry %d", cut, last)
				}
				if l, _ := s.LastIndex(); l != last-1 {
					t.Fatalf("LastIndex %d after the cut", l)
				}
				return
			}
			// Entry 11 is above the floor (10): still a torn tail, cut.
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			// Now tear entry 10 too, at the floor: refused.
			segs, _ = journal.ListSegments(dir)
			tail = segs[len(segs)-1]
			if err := os.Truncate(tail.Path, tail.Size-100); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, Options{NoPrewrite: true})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Index != 10 {
				t.Fatalf("got %v, want a CorruptError at index 10", err)
			}
		})
	}
}

// TestReadsDuringStores: raft's replication goroutines read while its
// loop stores and deletes (run under -race).
func TestReadsDuringStores(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "raft"), Options{SegmentSize: 32 << 10})
	defer s.Close()
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 3 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last == 0 {
					continue
				}
				i := first + r.Uint64N(last-first+1)
				var l raft.Log
				err := s.GetLog(i, &l)
				if err == nil && string(l.Data) != string(entryData(i, l.Term)) {
					err = fmt.Errorf("entry %d: other bytes", i)
				}
				if err != nil && !errors.Is(err, raft.ErrLogNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(5, 5))
	for i := uint64(1); i <= 400; i++ {
		l := newLog(r, i, 1)
		if err := s.StoreLog(l); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if err := s.DeleteRange(1, i-50); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailedSyncKeepsNothing: a StoreLogs whose fdatasync fails returns
// the error and keeps nothing of the batch, in memory or on disk; the
// same indexes can be stored again.
func TestFailedSyncKeepsNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft")
	h := &fault.Hooks{}
	s := openStore(t, dir, Options{Faults: h})
	r := rand.New(rand.NewPCG(13, 14))
	if err := s.StoreLogs([]*raft.Log{newLog(r, 1, 1), newLog(r, 2, 1)}); err != nil {
		t.Fatal(err)
	}
	restore := h.SetSync(func(string) error { return syscall.EIO })
	if err := s.StoreLogs([]*raft.Log{newLog(r, 3, 1), newLog(r, 4, 1)}); !errors.Is(err, syscall.EIO) || !errors.Is(err, journal.ErrStorage) {
		t.Fatalf("StoreLogs with a failing fdatasync: %v", err)
	}
	restore()
	if l, _ := s.LastIndex(); l != 2 {
		t.Fatalf("LastIndex %d after the failed batch", l)
	}
	var got raft.Log
	if err := s.GetLog(3, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(3) after the failed batch: %v", err)
	}
	again := newLog(r, 3, 2)
	if err := s.StoreLog(again); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	defer s.Close()
	if l, _ := s.LastIndex(); l != 3 {
		t.Fatalf("LastIndex %d after reopen", l)
	}
	if err := s.GetLog(3, &got); err != nil {
		t.Fatal(err)
	}
	if err := sameLog(&got, again); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteAllAfterARestoreKeepsWhatIsAbove: a deletion of the whole log
// right after raft restored a snapshot keeps the entries above it (raft
// still counts them as its log; see RestoringSnapshot), once; without a
// restore, or with a snapshot at or above the log's end, everything goes.
func TestDeleteAllAfterARestoreKeepsWhatIsAbove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		first, last uint64
		restoring   int64 // -1: no restore noted
		wantFirst   uint64
		wantLast    uint64 // 0: empty
	}{
		{"a snapshot inside the log", 1, 40, 25, 26, 40},
		{"a snapshot below the log", 30, 40, 10, 30, 40},
		{"a snapshot at the log's end", 1, 40, 40, 0, 0},
		{"a snapshot above the log", 1, 40, 90, 0, 0},
		{"no restore", 1, 40, -1, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, filepath.Join(t.TempDir(), "raft"), Options{SegmentSize: 16 << 10})
			defer s.Close()
			r := rand.New(rand.NewPCG(tc.first, tc.last))
			var logs []*raft.Log
			for i := tc.first; i <= tc.last; i++ {
				logs = append(logs, newLog(r, i, 3))
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if tc.restoring >= 0 {
				s.RestoringSnapshot(uint64(tc.restoring))
			}
			if err := s.DeleteRange(tc.first, tc.last); err != nil {
				t.Fatal(err)
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if tc.wantLast == 0 {
				if last != 0 {
					t.Fatalf("the log holds %d..%d, want nothing", first, last)
				}
			} else if first != tc.wantFirst || last != tc.wantLast {
				t.Fatalf("the log holds %d..%d, want %d..%d", first, last, tc.wantFirst, tc.wantLast)
			}
			for i := tc.wantFirst; tc.wantLast != 0 && i <= tc.wantLast; i++ {
				var got raft.Log
				if err := s.GetLog(i, &got); err != nil {
					t.Fatalf("GetLog(%d): %v", i, err)
				}
				if err := sameLog(&got, logs[i-tc.first]); err != nil {
					t.Fatalf("GetLog(%d): %v", i, err)
				}
			}
			// The note holds for one deletion only.
			if last != 0 {
				if err := s.DeleteRange(first, last); err != nil {
					t.Fatal(err)
				}
				if l, _ := s.LastIndex(); l != 0 {
					t.Fatalf("a second deletion of everything left up to %d", l)
				}
			}
		})
	}
}

// TestRecentEntriesAreBoundedInBytes: what the log holds in memory of its
// newest entries stays within recentMaxBytes however large they are, the
// newest ones are what it holds, and every entry still reads back (from
// the journal when not held).
func TestRecentEntriesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "raft"), Options{})
	defer s.Close()
	big := make([]byte, 1<<20)
	for i := uint64(1); i <= 20; i++ {
		big[0] = byte(i)
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Clone(big)}}); err != nil {
			t.Fatal(err)
		}
		if s.recentBytes > recentMaxBytes {
			t.Fatalf("after entry %d memory holds %d bytes of entries, the bound is %d", i, s.recentBytes, recentMaxBytes)
		}
		// The newest entry is held (replication reads it back at once),
		// and with it as many of the ones before as the bound allows.
		s.rmu.RLock()
		for j := uint64(0); j < min(i, recentMaxBytes/uint64(len(big))); j++ {
			if l := s.recent[(i-j)%uint64(len(s.recent))]; l == nil || l.Index != i-j {
				s.rmu.RUnlock()
				t.Fatalf("after entry %d memory does not hold entry %d", i, i-j)
			}
		}
		s.rmu.RUnlock()
	}
	for i := uint64(1); i <= 20; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || len(l.Data) != len(big) || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d): %v, %d bytes starting %d", i, err, len(l.Data), l.Data[0])
		}
	}
}

// failN makes the next n calls of a sync hook fail with EIO.
func failN(n int) fault.SyncHook {
	var left atomic.Int64
	left.Store(int64(n))
	return func(string) error {
		if left.Add(-1) >= 0 {
			return syscall.EIO
		}
		return nil
	}
}

// TestUnsettledSuffixDeletion: raft v1.8.0's follower cuts a conflicting
// suffix (DeleteRange) and stores the leader's entries (StoreLogs), and
// moves its own last-log index only once both succeed. When either fails,
// the log must still hold the deleted suffix, as raft believes, durably
// once the journal takes writes again: otherwise raft asks for entries it
// believes stored, fails every AppendEntries, and the follower stalls
// until the leader sends a snapshot (the nemesis saw a node stuck for
// 50 s). A successful replacement, or a restart, settles the deletion;
// without a failure the log answers as raft.InmemStore does.
func TestUnsettledSuffixDeletion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// fail arms the faults before the raft step that fails.
		fail func(h *fault.Hooks) (restore func())
		// deleteFails: the DeleteRange fails, not the StoreLogs after it.
		deleteFails bool
		// backOnDisk: the write-back succeeded before the next change.
		backOnDisk bool
	}{
		{name: "store fails", fail: func(h *fault.Hooks) func() { return h.SetSync(failN(1)) }, backOnDisk: true},
		{name: "store and write-back fail", fail: func(h *fault.Hooks) func() { return h.SetSync(failN(2)) }},
		{name: "store fails every time", fail: func(h *fault.Hooks) func() { return h.SetSync(failN(1 << 30)) }},
		{name: "delete fails", deleteFails: true, fail: func(h *fault.Hooks) func() {
			r1, r2 := h.SetSync(failN(1)), h.SetDiskSync(failN(1))
			return func() { r1(); r2() }
		}, backOnDisk: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "raft")
			h := &fault.Hooks{}
			s := openStore(t, dir, Options{Faults: h})
			r := rand.New(rand.NewPCG(21, 22))
			var old []*raft.Log
			for i := uint64(1); i <= 8; i++ {
				old = append(old, newLog(r, i, 1))
			}
			if err := s.StoreLogs(old); err != nil {
				t.Fatal(err)
			}
			// The leader's entries from 5 on conflict (term 2).
			leader := []*raft.Log{newLog(r, 5, 2), newLog(r, 6, 2)}
			restore := tc.fail(h)
			derr := s.DeleteRange(5, 8)
			var serr error
			if derr == nil {
				serr = s.StoreLogs(leader)
			}
			restore()
			switch {
			case tc.deleteFails && derr == nil:
				t.Fatal("DeleteRange succeeded with its syncs failing")
			case !tc.deleteFails && (derr != nil || serr == nil):
				t.Fatalf("DeleteRange: %v; StoreLogs with a failing fdatasync: %v", derr, serr)
			}
			// What raft believes: 1..8, the old entries.
			assertHolds(t, s, old)
			if tc.name == "store fails every time" {
				// With the journal still failing nothing settles; the
				// memory answers and the close reports the write-back.
				h.SetSync(failN(1 << 30))
				if err := s.Close(); err == nil {
					t.Fatal("Close settled a write-back with every fdatasync failing")
				}
				return
			}
			if !tc.backOnDisk {
				// The next change writes them back first: raft's next
				// AppendEntries cuts the suffix again and stores.
				if err := s.DeleteRange(5, 8); err != nil {
					t.Fatal(err)
				}
				if err := s.StoreLogs(leader); err != nil {
					t.Fatal(err)
				}
				assertHolds(t, s, append(old[:4:4], leader...))
				reopened := reopen(t, s, dir)
				assertHolds(t, reopened, append(old[:4:4], leader...))
				return
			}
			reopened := reopen(t, s, dir)
			assertHolds(t, reopened, old)
			if c, _ := reopened.GetCommitIndex(); c > 4 {
				t.Fatalf("commit index %d after the write-back: the old suffix counted committed", c)
			}
		})
	}
	t.Run("settled by success or by restart", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "raft")
		s := openStore(t, dir, Options{})
		r := rand.New(rand.NewPCG(23, 24))
		var old []*raft.Log
		for i := uint64(1); i <= 6; i++ {
			old = append(old, newLog(r, i, 1))
		}
		if err := s.StoreLogs(old); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRange(4, 6); err != nil {
			t.Fatal(err)
		}
		// Without a failure the log answers as raft.InmemStore does.
		assertHolds(t, s, old[:3])
		// A restart settles the deletion: raft reads LastIndex afresh.
		s = reopen(t, s, dir)
		assertHolds(t, s, old[:3])
		if err := s.DeleteRange(3, 3); err != nil {
			t.Fatal(err)
		}
		next := newLog(r, 3, 2)
		if err := s.StoreLog(next); err != nil {
			t.Fatal(err)
		}
		assertHolds(t, s, []*raft.Log{old[0], old[1], next})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// assertHolds checks that s holds exactly want, from its first index.
func assertHolds(t *testing.T, s *LogStore, want []*raft.Log) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != want[0].Index || last != want[len(want)-1].Index {
		t.Fatalf("the log holds %d..%d, want %d..%d", first, last, want[0].Index, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", w.Index, err)
		}
		if err := sameLog(&got, w); err != nil {
			t.Fatal(err)
		}
	}
}

// reopen closes s and opens the log in dir again, closed at the test's end.
func reopen(t *testing.T, s *LogStore, dir string) *LogStore {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, Options{})
	t.Cleanup(func() { s2.Close() })
	return s2
}

// TestSyncParksOnlyWhenContended: with Options.Contended, each StoreLogs'
// fdatasync parks on the io_uring exactly when Contended reports true,
// and holds its processor otherwise; without it every one parks, and
// WaitInSyscall holds it whatever Contended says. Each is still one
// fdatasync per StoreLogs.
func TestSyncParksOnlyWhenContended(t *testing.T) {
	t.Parallel()
	probe, err := uring.New()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	probe.Close()
	var busy atomic.Bool
	contended := func() bool { return busy.Load() }
	tests := []struct {
		name string
		opts Options
		// parked says, for a StoreLogs with Contended false and true,
		// whether its fdatasync parks.
		parked [2]bool
	}{
		{"contended", Options{Contended: contended}, [2]bool{false, true}},
		{"always parked without it", Options{}, [2]bool{true, true}},
		{"wait in syscall", Options{Contended: contended, WaitInSyscall: true}, [2]bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the subtests share busy.
			s := openStore(t, filepath.Join(t.TempDir(), "raft"), tc.opts)
			defer s.Close()
			r := rand.New(rand.NewPCG(9, 10))
			for i := range 8 {
				state := i%2 == 1
				busy.Store(state)
				before := s.Stats()
				if err := s.StoreLogs([]*raft.Log{newLog(r, uint64(i+1), 1)}); err != nil {
					t.Fatal(err)
				}
				after := s.Stats()
				if after.Syncs-before.Syncs != 1 {
					t.Fatalf("StoreLogs %d: %d fdatasyncs, want 1", i, after.Syncs-before.Syncs)
				}
				want := tc.parked[0]
				if state {
					want = tc.parked[1]
				}
				if got := after.ParkedSyncs-before.ParkedSyncs == 1; got != want {
					t.Fatalf("StoreLogs %d with Contended %v: parked %v, want %v", i, state, got, want)
				}
			}
		})
	}
}
