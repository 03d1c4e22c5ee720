// Package walpeer is the floor of the journal's chosen library: the bytes
// the store's writers would journal, written through github.com/tidwall/wal
// by one group committer (WriteBatch, then Sync) with no store logic at all
// (no admission, framing, view or publishing). qualify reports it as
// "wal_group"; the store's concurrent throughput is judged against it.
//
// # Invariants
//
//  1. Every acknowledged payload is one entry of the log, in
//     acknowledgement order, durable (tidwall/wal's Sync returned) before
//     its submitter is answered; Close checks the entry count against the
//     answers.
//     Code: Sink.Commit, Group, Committer.Close, harness.GroupCommitter.
//     Tests: TestSinkCommitsEveryPayloadInOrder, TestGroup,
//     harness.TestGroupCommitterAnswersEveryoneOnceAndWritesEveryByte.
package walpeer

import (
	"fmt"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/journal"
)

// NameGroup is the workload name in qualify's results.
const NameGroup = "wal_group"

// Sink writes each batch as tidwall/wal entries with one WriteBatch and
// makes it durable with one Sync. It implements harness.Sink.
type Sink struct {
	log   *wal.Log
	batch wal.Batch
	next  uint64
}

// Open creates a log in dir (which must hold none) with segments of
// segmentSize bytes (0: the journal's default, so both hold the same tail
// in memory).
func Open(dir string, segmentSize int) (*Sink, error) {
	if segmentSize <= 0 {
		segmentSize = journal.DefaultSegmentSize
	}
	l, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: segmentSize, LogFormat: wal.Binary, NoCopy: true})
	if err != nil {
		return nil, fmt.Errorf("walpeer: open %s: %w", dir, err)
	}
	last, err := l.LastIndex()
	if err != nil || last != 0 {
		l.Close()
		return nil, fmt.Errorf("walpeer: %s already holds a log (last index %d, %v)", dir, last, err)
	}
	return &Sink{log: l, next: 1}, nil
}

// Commit appends batch as consecutive entries and syncs the log.
func (s *Sink) Commit(batch [][]byte) error {
	s.batch.Clear()
	for i, p := range batch {
		s.batch.Write(s.next+uint64(i), p)
	}
	if err := s.log.WriteBatch(&s.batch); err != nil {
		return fmt.Errorf("walpeer: write batch at index %d: %w", s.next, err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("walpeer: sync: %w", err)
	}
	s.next += uint64(len(batch))
	return nil
}

// Entries is the number of entries committed so far.
func (s *Sink) Entries() uint64 { return s.next - 1 }

// Close closes the log.
func (s *Sink) Close() error { return s.log.Close() }

// Group measures wal_group at one writer count: writers goroutines submit
// payloadSize-byte payloads for budget b to one committer over a fresh log
// in dir. It checks that the log holds exactly the answered entries.
func Group(dir string, payloadSize, writers int, b harness.Budget) (harness.Result, error) {
	sink, err := Open(dir, 0)
	if err != nil {
		return harness.Result{}, err
	}
	g := harness.NewSinkCommitter(sink, 0)
	res, st, err := harness.GroupThroughput(NameGroup, g, payloadSize, writers, b)
	if err != nil {
		return harness.Result{}, err
	}
	if sink.Entries() != uint64(st.Ops) {
		return harness.Result{}, fmt.Errorf("walpeer: %d entries committed for %d answers", sink.Entries(), st.Ops)
	}
	res.Note += fmt.Sprintf(" tidwall/wal segment=%dB WriteBatch+Sync", journal.DefaultSegmentSize)
	return res, nil
}

// Committer is wal_group one submission at a time, for runs that
// interleave it with other workloads: a fresh log behind one group
// committer, which stays open across the caller's bursts.
type Committer struct {
	sink    *Sink
	g       *harness.GroupCommitter
	payload []byte
}

// NewCommitter opens a fresh log in dir behind a group committer taking
// payloadSize-byte submissions.
func NewCommitter(dir string, payloadSize int) (*Committer, error) {
	sink, err := Open(dir, 0)
	if err != nil {
		return nil, err
	}
	return &Committer{sink: sink, g: harness.NewSinkCommitter(sink, 0), payload: harness.Payload(payloadSize)}, nil
}

// Commit submits one payload and returns once its batch is durable.
func (c *Committer) Commit() error { return c.g.Commit(c.payload) }

// Close closes the committer and its log and checks that the log holds
// exactly the answered entries.
func (c *Committer) Close() error {
	if err := c.g.Close(); err != nil {
		return err
	}
	if ops := c.g.Stats().Ops; c.sink.Entries() != uint64(ops) {
		return fmt.Errorf("walpeer: %d entries committed for %d answers", c.sink.Entries(), ops)
	}
	return nil
}
