package statestore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

// A store that restarts often must still checkpoint: the trigger follows
// the journal after the newest image as it stands on disk, not what one
// process wrote. These tests run many lifetimes, each writing far less than
// CheckpointBytes, and hold the journal on disk and each Open's replay to a
// ceiling derived from CheckpointBytes and the segment size.

// envRestartWriter makes TestRestartingWriterChild run one lifetime in the
// store directory it names.
const envRestartWriter = "KP_TEST_RESTART_WRITER"

const (
	restartNS   = "group/restart"
	restartKeys = 64
)

// restartDoc is a document of the same size for every n, so every record
// frame a lifetime writes has one size and bounds in records are exact.
func restartDoc(n int) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%09d","media_kind":"video"}`, n)
}

// lifetime is what one open-write-close cycle saw.
type lifetime struct {
	replayed int           // records Open replayed
	written  journal.Stats // what it appended
	live     int64         // live value bytes when it closed
}

// runLifetime opens the store, puts `puts` documents over restartKeys keys
// starting at key gen*puts, and closes it.
func runLifetime(opts statestore.Options, gen, puts int) (lifetime, error) {
	s, err := statestore.Open(opts)
	if err != nil {
		return lifetime{}, err
	}
	lt := lifetime{replayed: s.OpenReport().Replayed}
	for i := range puts {
		n := gen*puts + i
		_, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: restartNS, Key: fmt.Sprintf("k%02d", n%restartKeys), Schema: schema.MediaIntentV1, Document: restartDoc(n)})
		if err != nil {
			s.Close()
			return lt, err
		}
	}
	lt.written = s.JournalStats()
	_, lt.live, _ = s.Usage()
	return lt, s.Close()
}

// restartBounds are the ceilings a lifetime's store must stay under.
type restartBounds struct {
	opts  statestore.Options
	frame int64 // bytes of one record frame (all frames here are equal)
	// perLife is the journal bytes one lifetime writes (all write the
	// same records, so the first one's count holds for all).
	perLife int64
	// the largest journal and replay seen, for the log
	seenSize     int64
	seenReplayed int
}

// threshold is the checkpoint trigger in force: CheckpointBytes, or half
// the live value bytes if larger.
func (b restartBounds) threshold(live int64) int64 { return max(b.opts.CheckpointBytes, live/2) }

// maxReplayed: a checkpoint starts whenever the journal after the newest
// image reaches the threshold (at Open too), so what a lifetime leaves
// after it is under the threshold plus what it writes while the last
// checkpoint runs, at most one lifetime's bytes.
func (b restartBounds) maxReplayed(live int64) int {
	return int((b.threshold(live) + b.perLife) / b.frame)
}

// maxJournalBytes: the journal keeps the records after the older of the
// two images (two spans of at most threshold + one lifetime), plus the
// segment holding the older image's next record and the one-record
// segment Reclaim leaves in front of it; every entry also carries a length
// prefix of at most 2 bytes at these sizes.
func (b restartBounds) maxJournalBytes(live int64) int64 {
	span := 2 * (b.threshold(live) + b.perLife)
	return span*(b.frame+2)/b.frame + int64(b.opts.SegmentSize) + 2*(b.frame+2)
}

// check measures the journal on disk after a lifetime and fails the test if
// it, or that lifetime's replay, is over its ceiling.
func (b *restartBounds) check(t *testing.T, gen int, lt lifetime) {
	t.Helper()
	if lt.written.Records == 0 || lt.written.Bytes%lt.written.Records != 0 {
		t.Fatalf("lifetime %d: wrote %d records in %d bytes, want equal frames", gen, lt.written.Records, lt.written.Bytes)
	}
	if b.frame == 0 {
		b.frame = int64(lt.written.Bytes / lt.written.Records)
	}
	if got := int64(lt.written.Bytes / lt.written.Records); got != b.frame {
		t.Fatalf("lifetime %d: frame of %d bytes, earlier ones %d", gen, got, b.frame)
	}
	if b.perLife == 0 {
		b.perLife = int64(lt.written.Bytes)
	}
	if int64(lt.written.Bytes) != b.perLife || 4*b.perLife > b.opts.CheckpointBytes {
		t.Fatalf("lifetime %d wrote %d journal bytes, the first %d: the test needs equal lifetimes of at most a quarter of CheckpointBytes %d", gen, lt.written.Bytes, b.perLife, b.opts.CheckpointBytes)
	}
	if limit := b.maxReplayed(lt.live); lt.replayed > limit {
		t.Fatalf("lifetime %d: Open replayed %d records, ceiling %d (threshold %d bytes, frames of %d)", gen, lt.replayed, limit, b.threshold(lt.live), b.frame)
	}
	size := journalBytes(t, b.opts.Dir)
	b.seenSize, b.seenReplayed = max(b.seenSize, size), max(b.seenReplayed, lt.replayed)
	if limit := b.maxJournalBytes(lt.live); size > limit {
		t.Fatalf("lifetime %d: journal holds %d bytes on disk, ceiling %d (CheckpointBytes %d, segments of %d)", gen, size, limit, b.opts.CheckpointBytes, b.opts.SegmentSize)
	}
}

func journalBytes(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := journal.ListSegments(filepath.Join(dir, statestore.StoreDirName, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}

// TestRestartingWriterJournalBounded runs 150 in-process lifetimes of 10
// puts each (about a tenth of CheckpointBytes): together they write many
// times the ceiling, yet after every one the journal on disk and the next
// Open's replay stay under it.
func TestRestartingWriterJournalBounded(t *testing.T) {
	const lifetimes, puts = 150, 10
	opts := statestore.Options{Dir: t.TempDir(), Clock: clock.NewFake(t0), CheckpointBytes: 16 << 10, SegmentSize: 4 << 10}
	boundedAcross(t, opts, lifetimes, 3, func(gen int) (lifetime, error) { return runLifetime(opts, gen, puts) })
}

// boundedAcross runs n lifetimes through run, checking each against the
// ceilings. Together they must write factor times the journal ceiling, or
// the test could not tell a bounded journal from one that only grows.
func boundedAcross(t *testing.T, opts statestore.Options, n int, factor uint64, run func(gen int) (lifetime, error)) {
	t.Helper()
	b := &restartBounds{opts: opts}
	var total uint64
	for gen := range n {
		lt, err := run(gen)
		if err != nil {
			t.Fatalf("lifetime %d: %v", gen, err)
		}
		b.check(t, gen, lt)
		total += lt.written.Bytes
	}
	if limit := b.maxJournalBytes(0); total < factor*uint64(limit) {
		t.Fatalf("the lifetimes wrote only %d bytes in all, too little to show a ceiling of %d", total, limit)
	}
	t.Logf("wrote %d journal bytes in all; largest journal on disk %d bytes (ceiling %d), largest replay %d records (ceiling %d)",
		total, b.seenSize, b.maxJournalBytes(0), b.seenReplayed, b.maxReplayed(0))
}

// TestOpenCheckpointsWhenJournalIsOver: a journal left over the threshold
// by earlier processes is checkpointed right after Open, before any write;
// one under the threshold is not.
func TestOpenCheckpointsWhenJournalIsOver(t *testing.T) {
	opts := statestore.Options{Dir: t.TempDir(), Clock: clock.NewFake(t0), CheckpointBytes: -1}
	lt, err := runLifetime(opts, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	backlog := int64(lt.written.Bytes)
	root := filepath.Join(opts.Dir, statestore.StoreDirName)
	for _, c := range []struct {
		name      string
		threshold int64
		wantImage bool
	}{
		{"under the threshold", backlog + 1, false},
		{"at the threshold", backlog, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts.CheckpointBytes = c.threshold
			s, err := statestore.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.OpenReport().Replayed; got != 100 {
				t.Fatalf("replayed %d records, want 100", got)
			}
			// Close waits for a background checkpoint Open started.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := checkpoint.List(root)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if c.wantImage {
				want = 1
			}
			if len(files) != want || (want == 1 && files[0].Index != 100) {
				t.Fatalf("journal of %d bytes, threshold %d: checkpoints %v, want %d image(s) at index 100", backlog, c.threshold, files, want)
			}
		})
	}
	s, err := statestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rep := s.OpenReport(); rep.Replayed != 0 || rep.Checkpoint.Index != 100 {
		t.Fatalf("after the checkpoint at Open, the next Open replayed %d records from image %d, want 0 from 100", rep.Replayed, rep.Checkpoint.Index)
	}
}

// restartChildOptions are the options of the writer processes: a small
// threshold and segments so that a few dozen processes outgrow them.
func restartChildOptions(dir string) statestore.Options {
	return statestore.Options{Dir: dir, CheckpointBytes: 4 << 10, SegmentSize: 1 << 10}
}

// TestRestartingWriterChild is one writer process of
// TestRestartingWriterProcessesJournalBounded; run directly it does nothing.
func TestRestartingWriterChild(t *testing.T) {
	dir := os.Getenv(envRestartWriter)
	if dir == "" {
		t.Skip("runs only as a child process of TestRestartingWriterProcessesJournalBounded")
	}
	gen, err := strconv.Atoi(os.Getenv(envRestartWriter + "_GEN"))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := runLifetime(restartChildOptions(dir), gen, restartChildPuts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LIFETIME %d %d %d %d\n", lt.replayed, lt.written.Records, lt.written.Bytes, lt.live)
}

const restartChildPuts = 5

// TestRestartingWriterProcessesJournalBounded runs 30 real writer
// processes one after another on one store, each writing about a quarter
// of CheckpointBytes and exiting: the journal on disk and each process's
// replay stay under the ceiling.
func TestRestartingWriterProcessesJournalBounded(t *testing.T) {
	const processes = 30
	opts := restartChildOptions(t.TempDir())
	boundedAcross(t, opts, processes, 2, func(gen int) (lifetime, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestartingWriterChild$", "-test.count=1", "-test.v")
		// A race-enabled child otherwise sleeps a second at exit.
		cmd.Env = append(os.Environ(), envRestartWriter+"="+opts.Dir, envRestartWriter+"_GEN="+strconv.Itoa(gen),
			"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return lifetime{}, fmt.Errorf("writer process: %w\n%s", err, out)
		}
		var lt lifetime
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(l, "LIFETIME %d %d %d %d", &lt.replayed, &lt.written.Records, &lt.written.Bytes, &lt.live); err == nil {
				return lt, nil
			}
		}
		return lt, fmt.Errorf("writer process reported nothing:\n%s", out)
	})
}
