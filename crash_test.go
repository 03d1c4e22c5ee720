package statestore_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

// Child processes: the test binary re-executes itself with one of these set
// and runs the matching role instead of the tests.
const (
	envCrashWriter = "KP_TEST_CRASH_WRITER"
	envFsizeChild  = "KP_TEST_FSIZE_CHILD"
	envCrashCkpt   = "KP_TEST_CRASH_CHECKPOINT_BYTES"
	// envCrashReopen makes the writer close and reopen its store every few
	// writes, so kills land in the trims of pre-written space at Close and
	// at Open as well as in pre-writing itself.
	envCrashReopen = "KP_TEST_CRASH_REOPEN"
)

// crashOptions are the options of the crash writer and of the reopen that
// verifies it; a small checkpoint threshold (from the environment) makes
// checkpoint writing and journal truncation happen all the time, so kills
// land inside them.
func crashOptions(dir string) statestore.Options {
	o := statestore.Options{Dir: dir, SegmentSize: 64 << 10}
	if v, err := strconv.ParseInt(os.Getenv(envCrashCkpt), 10, 64); err == nil {
		o.CheckpointBytes, o.SegmentSize = v, int(v)
	}
	return o
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(envCrashWriter); dir != "" {
		crashWriter(dir)
		return
	}
	if dir := os.Getenv(envSettingsCrashWriter); dir != "" {
		settingsCrashWriter(dir)
		return
	}
	os.Exit(m.Run())
}

const crashNS = "group/crash"

// crashWriter runs compare-and-set writers and deletes forever, printing
// each acknowledged mutation as "P key rev" or "D key rev" only after the
// store returned success. The parent SIGKILLs it.
func crashWriter(dir string) {
	if os.Getenv(envCrashReopen) != "" {
		reopeningWriter(dir)
		return
	}
	s, err := statestore.Open(crashOptions(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	var out sync.Mutex
	admin := statestore.Principal{ID: "writer", Admin: true}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("k%d", (w*7+i)%12)
				cur, err := s.Get(ctx, admin, crashNS, key)
				x := statestore.CreateOnly
				if err == nil {
					x = statestore.IfRevision(cur.Revision)
				}
				if err == nil && i%5 == 4 {
					rev, err := s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: crashNS, Key: key, Expect: x})
					if err == nil {
						out.Lock()
						fmt.Printf("D %s %d\n", key, rev)
						out.Unlock()
					}
					continue
				}
				e, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: crashNS, Key: key, Schema: schema.MediaIntentV1, Document: docN(w*100000 + i), Expect: x})
				if err == nil {
					out.Lock()
					fmt.Printf("P %s %d\n", key, e.Revision)
					out.Unlock()
				} else if statestore.CodeOf(err) != statestore.Conflict {
					fmt.Fprintln(os.Stderr, "write:", err)
					os.Exit(4)
				}
			}
		}(w)
	}
	wg.Wait()
}

// reopeningWriter is the crash writer of TestCrashKillDuringTrims: one
// writer that closes and reopens the store after every few puts, printing
// each acknowledged put as "P key rev".
func reopeningWriter(dir string) {
	fmt.Println("READY")
	admin := statestore.Principal{ID: "writer", Admin: true}
	for i := 0; ; {
		s, err := statestore.Open(crashOptions(dir))
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			os.Exit(3)
		}
		for end := i + 1 + i%7; i < end; i++ {
			key := fmt.Sprintf("k%d", i%12)
			x := statestore.CreateOnly
			if cur, err := s.Get(ctx, admin, crashNS, key); err == nil {
				x = statestore.IfRevision(cur.Revision)
			}
			e, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: crashNS, Key: key, Schema: schema.MediaIntentV1, Document: docN(i), Expect: x})
			if err != nil {
				fmt.Fprintln(os.Stderr, "write:", err)
				os.Exit(4)
			}
			fmt.Printf("P %s %d\n", key, e.Revision)
		}
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			os.Exit(5)
		}
	}
}

type ackedOp struct {
	del bool
	rev uint64
}

// TestCrashKillNoAcknowledgedWriteLost SIGKILLs a writer process at random
// moments, many times, on one store directory. After each kill every
// acknowledged write is present or superseded by a later one, and
// revisions never go backwards.
func TestCrashKillNoAcknowledgedWriteLost(t *testing.T) {
	// Serial: it forks child processes, and from fork to exec a child
	// holds this process's flocks (the stores' LOCK files), which a
	// parallel test's Open would find taken.
	crashKillLoop(t, "")
}

// TestCrashKillDuringCheckpoints is the same with a checkpoint and a
// journal truncation every few kilobytes.
func TestCrashKillDuringCheckpoints(t *testing.T) {
	// Serial: t.Setenv: the children inherit the environment.
	crashKillLoop(t, "12000")
}

// TestCrashKillDuringTrims is the same with a writer that closes and
// reopens the store every few writes, so kills also land in the trim of
// the pre-written tail at Close and at Open.
func TestCrashKillDuringTrims(t *testing.T) {
	// Serial: t.Setenv: the children inherit the environment.
	t.Setenv(envCrashReopen, "1")
	crashKillLoop(t, "")
}

func crashKillLoop(t *testing.T, ckptBytes string) {
	if ckptBytes != "" {
		t.Setenv(envCrashCkpt, ckptBytes)
	}
	trims := 0 // reopens that found pre-written space to trim
	cuts := 0  // reopens that cut a torn record (each keeps a quarantine copy)
	iterations := 25
	if testing.Short() {
		iterations = 5
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	last := map[string]ackedOp{} // per key, the highest acknowledged mutation
	var maxAcked uint64
	var floor uint64 // namespace revision seen at the last reopen
	for it := 0; it < iterations; it++ {
		// Kill after a random number of acknowledgements, so the kill lands
		// anywhere in the commit cycle.
		got := killWriter(t, it, envCrashWriter, dir, rng.IntN(400))
		for _, l := range got {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue // a line cut by the kill was never a complete acknowledgement
			}
			rev, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				continue
			}
			// Acknowledgements of one run print in any order, but every one
			// must lie above the revision the previous reopen served.
			if rev <= floor {
				t.Fatalf("iteration %d: revision %d acknowledged after the store had reached %d: revisions went backwards", it, rev, floor)
			}
			if rev > last[f[1]].rev {
				last[f[1]] = ackedOp{del: f[0] == "D", rev: rev}
			}
			maxAcked = max(maxAcked, rev)
		}
		var trimmed bool
		floor, trimmed = verifyAfterCrash(t, it, dir, last, maxAcked, &cuts)
		if trimmed {
			trims++
		}
	}
	if maxAcked == 0 {
		t.Fatal("no write was ever acknowledged")
	}
	if trims == 0 {
		t.Fatal("no reopen found pre-written space: the kills never landed while the journal's tail was pre-written")
	}
	if ckptBytes != "" {
		files, _ := checkpoint.List(filepath.Join(dir, statestore.StoreDirName))
		segs, _ := journal.ListSegments(filepath.Join(dir, statestore.StoreDirName, "journal"))
		if len(files) == 0 || len(segs) == 0 || segs[0].Start == 1 {
			t.Fatalf("no checkpoint or truncation happened (%d checkpoints, journal %v): the kills never landed in them", len(files), segs)
		}
	}
}

// killWriter runs the test binary as the writer role that env selects on
// dir, SIGKILLs it after it printed want lines (after READY), and returns
// every line it printed. It fails the test if the writer did not start or
// exited on its own.
func killWriter(t *testing.T, it int, env, dir string, want int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l, ok := <-lines; !ok || l != "READY" {
		cmd.Wait()
		t.Fatalf("iteration %d: writer did not start: %q %s", it, l, stderr.String())
	}
	var got []string
	for len(got) < want {
		l, ok := <-lines
		if !ok {
			break
		}
		got = append(got, l)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for l := range lines {
		got = append(got, l)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("iteration %d: writer exited on its own: %v\n%s", it, err, stderr.String())
	}
	return got
}

// verifyAfterCrash reopens the store and checks every acknowledged write.
// It returns the namespace revision served and whether the open trimmed
// pre-written space off the journal's tail.
func verifyAfterCrash(t *testing.T, it int, dir string, last map[string]ackedOp, maxAcked uint64, cuts *int) (uint64, bool) {
	t.Helper()
	s, err := statestore.Open(crashOptions(dir))
	if err != nil {
		t.Fatalf("iteration %d: reopen after SIGKILL: %v", it, err)
	}
	defer s.Close()
	// Pre-written zeros are trimmed without a report: only a torn record
	// (a kill can cut a write short between pages) leaves a quarantine copy.
	if s.OpenReport().TailCut != nil {
		*cuts++
	}
	if q, _ := os.ReadDir(filepath.Join(dir, statestore.StoreDirName, "quarantine")); len(q) != *cuts {
		t.Fatalf("iteration %d: quarantine holds %d files after %d torn tails", it, len(q), *cuts)
	}
	// Every record is in crashNS, so a record's journal index is its
	// namespace revision: a cut at or below the highest acknowledged
	// revision would have cut acknowledged data.
	if cut := s.OpenReport().TailCut; cut != nil && cut.Index <= maxAcked {
		t.Fatalf("iteration %d: open cut the journal at index %d, but records up to %d were acknowledged: %v", it, cut.Index, maxAcked, cut)
	}
	nsRev := s.Namespace(crashNS).Revision
	if nsRev < maxAcked {
		t.Fatalf("iteration %d: namespace revision %d below acknowledged %d", it, nsRev, maxAcked)
	}
	for key, op := range last {
		e, err := s.Get(ctx, sys, crashNS, key)
		switch {
		case err == nil && e.Revision < op.rev:
			t.Fatalf("iteration %d: %s at revision %d, but revision %d was acknowledged", it, key, e.Revision, op.rev)
		case err == nil && op.del && e.Revision == op.rev:
			t.Fatalf("iteration %d: %s deleted at %d yet present at that revision", it, key, op.rev)
		case errors.Is(err, statestore.ErrNotFound) && !op.del && nsRev <= op.rev:
			t.Fatalf("iteration %d: acknowledged put of %s at %d is gone", it, key, op.rev)
		case err != nil && !errors.Is(err, statestore.ErrNotFound):
			t.Fatalf("iteration %d: get %s: %v", it, key, err)
		}
	}
	return nsRev, s.JournalStats().Trimmed > 0
}
