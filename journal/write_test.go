package journal

import (
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// TestNewSegmentDirectoryIsSynced checks how the directory keeps up with
// tidwall/wal's segment cycling: the Append whose records are the first in
// a new segment file fsyncs the directory before it returns, and no other
// does. An Append whose last record sealed a segment (the new file is still
// empty) needs no fsync at all: tidwall/wal fsynced the sealed file as it
// cycled, so Write acknowledges its records and Sync has nothing to do.
func TestNewSegmentDirectoryIsSynced(t *testing.T) {
	t.Parallel()
	dirSyncs, fileSyncs := 0, 0
	faults := &fault.Hooks{}
	faults.SetSync(func(path string) error {
		if filepath.Base(path) != FloorFile {
			fileSyncs++
		}
		return nil
	})
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 900, Faults: faults})
	defer j.Close()
	j.opts.seams.syncSegmentDir.set(func(dir string) error { dirSyncs++; return j.fs.SyncDir(dir) })
	var want []*Record
	pending, sealedOnly := false, 0
	for i := 1; i <= 200; i++ {
		before, _ := ListSegments(dir)
		dirBefore, filesBefore := dirSyncs, fileSyncs
		batch := []*Record{testRecord(i)}
		if i%5 == 0 {
			batch = append(batch, testRecord(i), testRecord(i)) // multi-record batches cross boundaries too
		}
		first, err := j.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
		after, _ := ListSegments(dir)
		j.mu.Lock()
		tailEmpty := j.tailBytes == 0
		j.mu.Unlock()
		pending = pending || len(after) > len(before)
		if synced, needed := dirSyncs > dirBefore, pending && !tailEmpty; synced != needed {
			t.Fatalf("append %d: a new segment awaiting its directory fsync=%v, its first records written=%v, directory synced=%v", i, pending, !tailEmpty, synced)
		}
		pending = pending && tailEmpty
		if tailEmpty {
			sealedOnly++
			last := first + uint64(len(batch)) - 1
			if fileSyncs != filesBefore || j.LastIndex() != last {
				t.Fatalf("append %d ended at a seal: %d fdatasyncs, last index %d, want none and %d", i, fileSyncs-filesBefore, j.LastIndex(), last)
			}
		}
	}
	if segs, _ := ListSegments(dir); len(segs) < 10 || sealedOnly == 0 {
		t.Fatalf("%d segments, %d appends ending at a seal: the test did not exercise cycling", len(segs), sealedOnly)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ = openJournal(t, dir, 900)
	defer j.Close()
	if got := replayAll(t, j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay after the reopen returned %d records, want %d", len(got), len(want))
	}
}

// TestSealAcknowledgesWholeBatchesOnly: a batch whose last record seals a
// segment is acknowledged by Write (tidwall/wal fsynced the segment), but a
// batch that continues into the next segment is not acknowledged in part:
// when the Sync covering its rest fails, none of it survives the cut-back
// or the reopen, so a batch the caller is told failed never reappears.
func TestSealAcknowledgesWholeBatchesOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	faults := &fault.Hooks{}
	j, _ := openJournalOpts(t, dir, Options{SegmentSize: 900, Faults: faults})
	defer func() { j.Close() }()
	tail := func() (uint64, int64) {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.tailStart, j.tailBytes
	}
	next, ended := uint64(1), false
	for i := 0; i < 300; i++ {
		n := 1 + i%3
		start, _ := tail()
		acked := j.LastIndex()
		mustWrite(t, j, records(int(next), n), next)
		next += uint64(n)
		switch now, bytes := tail(); {
		case now != start && bytes == 0:
			ended = true
			if j.LastIndex() != next-1 {
				t.Fatalf("a batch ending at a seal: last index %d after Write, want %d", j.LastIndex(), next-1)
			}
		case now != start && ended:
			if j.LastIndex() != acked {
				t.Fatalf("a batch continuing into the next segment moved the last index from %d to %d before its Sync", acked, j.LastIndex())
			}
			restore := faults.SetSync(func(path string) error {
				if filepath.Base(path) == FloorFile {
					return nil
				}
				return syscall.EIO
			})
			err := j.Sync(next - 1)
			restore()
			if err == nil || j.LastIndex() != acked {
				t.Fatalf("failed Sync of a batch crossing a seal: %v, last index %d, want an error and %d", err, j.LastIndex(), acked)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j, _ = openJournal(t, dir, 900)
			if got := replayAll(t, j); uint64(len(got)) != acked {
				t.Fatalf("reopen after the failed Sync holds %d records, want the %d acknowledged", len(got), acked)
			}
			return
		}
		if err := j.Sync(next - 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no batch ended at a seal and then crossed one (ended=%v)", ended)
}
