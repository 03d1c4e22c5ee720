package raftlog

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

const (
	killChildEnv = "RAFTLOG_KILL_CHILD_DIR"
	killRunEnv   = "RAFTLOG_KILL_RUN"
)

// killOptions are the child's and the checker's: small segments, so kills
// land at segment changes too.
var killOptions = Options{SegmentSize: 64 << 10}

// TestSIGKILLLosesNothingAcknowledged re-executes the test binary as a
// child that stores batches (and now and then cuts a suffix above the
// commit index or a prefix), printing each acknowledgement after
// StoreLogs returns and each deletion before it starts. The parent
// SIGKILLs it, by PID, after a random number of acknowledgements, reopens
// the log and requires every acknowledged entry not since deleted to be
// there with its bytes, and the log contiguous. 20 kills by default;
// RAFTLOG_KILLS raises it.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		run, _ := strconv.ParseUint(os.Getenv(killRunEnv), 10, 64)
		killChild(dir, run)
		return
	}
	t.Parallel()
	kills := envInt("RAFTLOG_KILLS", 20)
	dir := filepath.Join(t.TempDir(), "raft")
	must := map[uint64]uint64{} // index → term: acknowledged, not since deleted
	r := rand.New(rand.NewPCG(11, 12))
	acked := 0
	for run := 1; run <= kills; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLLosesNothingAcknowledged$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killRunEnv+"="+strconv.Itoa(run))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		wait := 1 + r.IntN(40)
		killed := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				// EOF, with at most a line cut by the kill: it was
				// never a whole acknowledgement.
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			var a, b, term uint64
			switch {
			case scan(line, "ack %d %d %d\n", &a, &b, &term):
				for i := a; i <= b; i++ {
					must[i] = term
				}
				acked++
				if wait--; wait == 0 && !killed {
					// Kill by PID; the lines it wrote before dying are
					// still read (and count) below.
					if err := cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			case scan(line, "cutting %d\n", &a):
				for i := range must {
					if i >= a {
						delete(must, i)
					}
				}
			case scan(line, "front %d\n", &a):
				for i := range must {
					if i < a {
						delete(must, i)
					}
				}
			case strings.HasPrefix(line, "error "):
				t.Fatalf("child run %d: %s", run, line)
			}
		}
		if err := cmd.Wait(); !killed || err == nil {
			t.Fatalf("child run %d ended by itself (%v) before the kill", run, err)
		}
		checkKilled(t, dir, run, must)
	}
	t.Logf("%d kills, %d acknowledged batches, %d entries that must survive at the end", kills, acked, len(must))
}

func scan(line, format string, args ...any) bool {
	n, err := fmt.Sscanf(line, format, args...)
	return err == nil && n == len(args)
}

// checkKilled reopens the log after a kill: every entry in must is there
// with its term and bytes, and every index between first and last reads.
func checkKilled(t *testing.T, dir string, run int, must map[uint64]uint64) {
	t.Helper()
	s, err := Open(dir, killOptions)
	if err != nil {
		t.Fatalf("after kill %d: %v", run, err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	// In index order: a random order would load a segment per read.
	for _, i := range slices.Sorted(maps.Keys(must)) {
		term := must[i]
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("after kill %d: acknowledged entry %d (term %d) lost: %v (log %d..%d)", run, i, term, err, first, last)
		}
		if l.Term != term || string(l.Data) != string(entryData(i, term)) {
			t.Fatalf("after kill %d: entry %d holds term %d, want %d (or other bytes)", run, i, l.Term, term)
		}
	}
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("after kill %d: log %d..%d has no entry %d: %v", run, first, last, i, err)
		}
		if string(l.Data) != string(entryData(i, l.Term)) {
			t.Fatalf("after kill %d: entry %d's bytes are not the ones stored", run, i)
		}
	}
	if c, _ := s.GetCommitIndex(); c > last {
		t.Fatalf("after kill %d: commit index %d above the last index %d", run, c, last)
	}
}

// killChild is the child's workload; it runs until killed (bounded, in
// case the parent is gone).
func killChild(dir string, run uint64) {
	fail := func(err error) {
		fmt.Printf("error %d %v\n", run, err)
		os.Exit(3)
	}
	s, err := Open(dir, killOptions)
	if err != nil {
		fail(err)
	}
	r := rand.New(rand.NewPCG(run, 99))
	for i := uint64(0); i < 200000; i++ {
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		switch x := r.IntN(20); {
		case x == 0 && last > first+10:
			commit, _ := s.GetCommitIndex()
			lo := last - uint64(r.IntN(5))
			if lo <= commit {
				continue
			}
			fmt.Printf("cutting %d\n", lo)
			if err := s.DeleteRange(lo, last); err != nil {
				fail(err)
			}
		case x == 1 && last > first+50:
			hi := first + r.Uint64N((last-first)/2+1)
			fmt.Printf("front %d\n", hi+1)
			if err := s.DeleteRange(first, hi); err != nil {
				fail(err)
			}
		default:
			start, n := last+1, 1+r.IntN(16)
			term := run<<32 | i // unique per batch, so a rewritten index has other bytes
			logs := make([]*raft.Log, n)
			for k := range logs {
				idx := start + uint64(k)
				logs[k] = &raft.Log{Index: idx, Term: term, Type: raft.LogCommand, Data: entryData(idx, term)}
			}
			s.StageCommitIndex(last - min(last, uint64(r.IntN(8))))
			if err := s.StoreLogs(logs); err != nil {
				fail(err)
			}
			fmt.Printf("ack %d %d %d\n", start, start+uint64(n)-1, term)
		}
	}
	os.Exit(0)
}
