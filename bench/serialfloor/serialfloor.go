// Package serialfloor is the resident-memory floor of the specification's
// serial workload: the same owners' documents, in the same rounds, written
// through github.com/tidwall/wal alone (the journal's library) with
// fdatasync, in a process that links nothing of the store. It answers how
// much of serialproc's resident set any program journaling these bytes
// through tidwall/wal would hold (the binary, the runtime, tidwall/wal's
// in-memory tail segment, the documents), and so how much is the store's.
//
// Like serialwork it runs two sides in alternating rounds: a log made
// durable with fdatasync after every entry (the durable store's
// counterpart) and one never synced (the NoSync baseline's).
//
// # Invariants
//
//   - Every operation appends one entry holding the owner's namespace, key
//     and document (serialwork's workload's bytes, the documents of
//     internal/testdoc at harness.DocBytes) to its side's log; on the
//     durable side it is fdatasynced, on the segment file it landed in,
//     before the next begins. Run checks each log's entry count at the end.
//     Code: Run, newSide, side.append.
//     Tests: TestRunWritesEveryEntryDurably, TestPayloadIsTheWorkloads.
package serialfloor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidwall/wal"
	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/procstat"
	"github.com/keeppeek/statestore/internal/testdoc"
)

// Owners and Key are serialwork's (TestPayloadIsTheWorkloads holds them
// equal; importing serialwork would link the store).
const (
	Owners = 127
	Key    = "intents/front-door-video-browser-h264-720p"
)

// SegmentSize is the journal's default segment size
// (journal.DefaultSegmentSize, held equal by a test), so tidwall/wal holds
// the same tail in memory as under the store.
const SegmentSize = 1 << 20

// The two sides' row names.
const (
	WALFdatasync = "wal_fdatasync"
	WALNoSync    = "wal_nosync"
)

// Payloads are the bytes each owner's operation journals: its namespace,
// the key and its document.
func Payloads(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		ns := fmt.Sprintf("user/owner-%03d", i)
		out[i] = append([]byte(ns+"\x00"+Key+"\x00"), testdoc.MediaIntent(harness.DocBytes, i)...)
	}
	return out
}

// side is one log: tidwall/wal with its own fsync off, and fdatasync
// through a descriptor of the segment file tidwall/wal is appending to.
type side struct {
	dir   string
	log   *wal.Log
	next  uint64 // index of the next entry
	sync  bool
	tail  *os.File // the current segment file, for fdatasync
	bytes int      // in the current segment, as tidwall/wal counts them
}

func newSide(dir string, sync bool) (*side, error) {
	l, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: SegmentSize, LogFormat: wal.Binary, NoCopy: true})
	if err != nil {
		return nil, fmt.Errorf("serialfloor: open %s: %w", dir, err)
	}
	s := &side{dir: dir, log: l, next: 1, sync: sync}
	if err := s.openTail(1); err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// openTail opens the segment file whose first entry is first.
func (s *side) openTail(first uint64) error {
	if s.tail != nil {
		s.tail.Close()
	}
	f, err := os.Open(filepath.Join(s.dir, fmt.Sprintf("%020d", first)))
	if err != nil {
		return fmt.Errorf("serialfloor: the tail segment: %w", err)
	}
	s.tail, s.bytes = f, 0
	return nil
}

// append writes p as the next entry and, on a durable side, fdatasyncs it.
// tidwall/wal seals a segment once an entry brings it to SegmentSize
// (fsyncing it itself) and starts the next with the following index.
func (s *side) append(p []byte) error {
	if err := s.log.Write(s.next, p); err != nil {
		return fmt.Errorf("serialfloor: write entry %d in %s: %w", s.next, s.dir, err)
	}
	s.next++
	s.bytes += uvarintLen(len(p)) + len(p)
	if s.bytes >= SegmentSize {
		return s.openTail(s.next)
	}
	if s.sync {
		if err := unix.Fdatasync(int(s.tail.Fd())); err != nil {
			return fmt.Errorf("serialfloor: fdatasync entry %d in %s: %w", s.next-1, s.dir, err)
		}
	}
	return nil
}

func (s *side) close() error {
	if s.tail != nil {
		s.tail.Close()
	}
	return s.log.Close()
}

func uvarintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// Run is the floor of serialwork.Run: two logs under dir, ceil(ops/Owners)
// alternating rounds of one entry per owner on each, the resident set
// sampled after each round, then both logs left open and idle for
// procstat.IdleSample. The logs' directories are removed at the end.
func Run(dir string, ops int, run harness.Runner) (procstat.Figures, error) {
	var fig procstat.Figures
	var err error
	if fig.StartRSS, _, err = procstat.ResidentBytes(); err != nil {
		return fig, err
	}
	root, err := os.MkdirTemp(dir, "serial_floor-")
	if err != nil {
		return fig, err
	}
	defer os.RemoveAll(root)
	durable, err := newSide(filepath.Join(root, "durable"), true)
	if err != nil {
		return fig, err
	}
	defer durable.close()
	nosync, err := newSide(filepath.Join(root, "nosync"), false)
	if err != nil {
		return fig, err
	}
	defer nosync.close()
	if fig.OpenRSS, _, err = procstat.ResidentBytes(); err != nil {
		return fig, err
	}
	run.AfterRound = fig.SampleRound
	dPay, nPay := Payloads(Owners), Payloads(Owners)
	sides := []harness.SerialSide{
		{Name: WALFdatasync, Op: func(i int) error { return durable.append(dPay[i%Owners]) }},
		{Name: WALNoSync, Op: func(i int) error { return nosync.append(nPay[i%Owners]) }},
	}
	rounds := (ops + Owners - 1) / Owners
	if fig.Results, err = run.AlternateSerial(sides, rounds, Owners); err != nil {
		return fig, err
	}
	if fig.SampleErr != nil {
		return fig, fig.SampleErr
	}
	for _, s := range []*side{durable, nosync} {
		if last, err := s.log.LastIndex(); err != nil || last != uint64(rounds*Owners) {
			return fig, fmt.Errorf("serialfloor: %s holds %d entries (%v), want %d", s.dir, last, err, rounds*Owners)
		}
	}
	return fig, procstat.Idle(&fig)
}
