package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// Baseline names, as they appear in results and in qualify's --only flag.
const (
	NameRawAppend = "raw_append_fdatasync"
	NameRawGroup  = "raw_group_fdatasync"
)

// Payload sizes of the qualification workload.
const (
	// DocBytes is the size of the benchmark document.
	DocBytes = 2193
	// FrameOverhead approximates the journal framing around one document
	// (header, key, revision, checksum).
	FrameOverhead = 80
	// DefaultPayload is the number of bytes one durable write appends.
	DefaultPayload = DocBytes + FrameOverhead
)

// Payload returns size deterministic, printable bytes (a repeating
// JSON-like text), so that no layer can shortcut all-zero data.
func Payload(size int) []byte {
	const pattern = `{"owner":"o-042","kind":"media_intent","rev":17,"state":"ready","tags":["a","b"],"note":"lorem ipsum dolor sit amet"},`
	b := make([]byte, size)
	for i := range b {
		b[i] = pattern[i%len(pattern)]
	}
	return b
}

// createDurable creates path exclusively for appending and fsyncs its
// directory, so that the file's existence is durable before any timed write.
func createDurable(path string) (*os.File, int, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, 0, err
	}
	// Fd puts the descriptor in blocking mode; regular files are not
	// polled anyway, so write(2) and fdatasync(2) are issued directly.
	return f, int(f.Fd()), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkSize verifies that path holds exactly want bytes.
func checkSize(path string, want int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Size() != want {
		return fmt.Errorf("harness: %s holds %d bytes, want %d", path, st.Size(), want)
	}
	return nil
}

// RawAppendFdatasync measures the serial durable-append floor
// ("raw_append_fdatasync"): n times, one write(2) of payloadSize bytes to a
// fresh plain file in dir followed by one fdatasync(2), each timed. It checks
// that the file finally holds n*payloadSize bytes, then removes it.
func RawAppendFdatasync(dir string, payloadSize, n int) (Result, error) {
	a, err := NewRawAppender(dir, payloadSize)
	if err != nil {
		return Result{}, err
	}
	res, err := Serial(NameRawAppend, n, func(int) error { return a.Append() })
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	res.Note = fmt.Sprintf("n=%d payload=%dB", n, payloadSize)
	return res, nil
}

// RawAppender is raw_append_fdatasync one operation at a time, for runs
// that interleave it with other workloads ([AlternateSerial]).
type RawAppender struct {
	f       *os.File
	fd      int
	path    string
	payload []byte
	n       int64
}

// NewRawAppender creates a fresh plain file in dir (its directory entry
// made durable) for appends of payloadSize bytes.
func NewRawAppender(dir string, payloadSize int) (*RawAppender, error) {
	if payloadSize <= 0 {
		return nil, fmt.Errorf("harness: payload size must be positive, got %d", payloadSize)
	}
	path := filepath.Join(dir, NameRawAppend+".log")
	f, fd, err := createDurable(path)
	if err != nil {
		return nil, err
	}
	return &RawAppender{f: f, fd: fd, path: path, payload: Payload(payloadSize)}, nil
}

// Append writes the payload at the end of the file with one write(2) and
// makes it durable with one fdatasync(2).
func (a *RawAppender) Append() error {
	if err := writeFull(a.fd, a.payload); err != nil {
		return err
	}
	a.n++
	return fdatasync(a.fd)
}

// Close checks that the file holds every appended byte and removes it.
func (a *RawAppender) Close() error {
	defer os.Remove(a.path)
	if err := a.f.Close(); err != nil {
		return err
	}
	return checkSize(a.path, a.n*int64(len(a.payload)))
}

// RawGroupFdatasync measures the group-commit durable-append ceiling
// ("raw_group_fdatasync"): writers goroutines each submit payloadSize-byte
// appends to one [GroupCommitter] on a fresh plain file in dir, for budget b.
// The result's latencies are per submission (queueing included) and OpsPerS
// is acknowledged submissions per second. It checks that every submission
// was answered and that the file holds every byte, then removes it.
func RawGroupFdatasync(dir string, payloadSize, writers int, b Budget) (Result, error) {
	if payloadSize <= 0 {
		return Result{}, fmt.Errorf("harness: payload size must be positive, got %d", payloadSize)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-w%d.log", NameRawGroup, writers))
	g, err := NewGroupCommitter(path, 0)
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(path)
	res, st, err := GroupThroughput(NameRawGroup, g, payloadSize, writers, b)
	if err != nil {
		return Result{}, err
	}
	if err := checkSize(path, st.Ops*int64(payloadSize)); err != nil {
		return Result{}, err
	}
	return res, nil
}

// GroupThroughput runs writers goroutines submitting payloadSize-byte
// payloads to g for budget b, closes g, and checks that every submission
// was answered. Latencies are per submission (queueing included) and
// OpsPerS is acknowledged submissions per second.
func GroupThroughput(name string, g *GroupCommitter, payloadSize, writers int, b Budget) (Result, GroupStats, error) {
	payload := Payload(payloadSize)
	var acked atomic.Int64
	res, err := RunBudget(name, writers, b, func(int, int) error {
		if err := g.Commit(payload); err != nil {
			return err
		}
		acked.Add(1)
		return nil
	})
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Result{}, GroupStats{}, err
	}
	st := g.Stats()
	if n := acked.Load(); n != st.Ops {
		return Result{}, st, fmt.Errorf("harness: %s: %d submissions acknowledged but %d answered", name, n, st.Ops)
	}
	res.Note = fmt.Sprintf("n=%d payload=%dB batches=%d mean_batch=%.1f max_batch=%d",
		st.Ops, payloadSize, st.Batches, st.MeanBatch(), st.MaxBatch)
	return res, st, nil
}
