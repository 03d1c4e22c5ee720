package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/keeppeek/statestore/internal/fault"
)

// fileBytes reads every regular file in dir, by name.
func fileBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = b
	}
	return out
}

// withoutZeroTail is b without its trailing zero bytes (pre-written space).
func withoutZeroTail(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:n]
}

// TestFailedSyncNeverAcknowledgesLostPages pins what the journal does after
// a failed fsync. Linux may mark the pages of a failed fdatasync clean, so
// a later fdatasync of the same file succeeds although those bytes never
// reached the disk (PostgreSQL's "fsyncgate", 2018). The journal therefore
// never retries the sync: it cuts the files back to the last acknowledged
// record and reopens. The test checks the cut on the bytes themselves
// (every file equal to what it held at the last good sync, a segment the
// failed batch created emptied or gone), that no later sync, although the
// disk now succeeds, acknowledges any record of the failed batch, that a
// crash copy taken then opens to the acknowledged records only, and that
// the journal goes on at the first unacknowledged index.
func TestFailedSyncNeverAcknowledgesLostPages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// arm makes j's next sync step of its kind fail once, then succeed.
		arm func(j *Journal, failed *atomic.Int64)
	}{
		{"fdatasync of the tail segment", func(j *Journal, failed *atomic.Int64) {
			j.opts.Faults.SetSync(func(string) error {
				if failed.Add(1) == 1 {
					return syscall.EIO
				}
				return nil
			})
		}},
		{"fsync of the directory holding a new segment", func(j *Journal, failed *atomic.Int64) {
			j.opts.seams.syncSegmentDir.set(func(dir string) error {
				if failed.Add(1) == 1 {
					return &os.PathError{Op: "fsync", Path: dir, Err: syscall.EIO}
				}
				return j.fs.SyncDir(dir)
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			// Small segments: the failed batch opens new segment files.
			// (The pre-writer's background syncs have a fault seam of their
			// own, so the injected failure hits the commit's sync.)
			j, _ := openJournalOpts(t, dir, Options{SegmentSize: 300, Faults: &fault.Hooks{}})
			defer j.Close()
			mustWrite(t, j, records(1, 3), 1)
			if err := j.Sync(3); err != nil {
				t.Fatal(err)
			}
			// The marker those records raise is written in the background.
			j.floorWG.Wait()
			acked := fileBytes(t, dir)
			mustWrite(t, j, records(4, 8), 4)
			if got := fileBytes(t, dir); len(got) <= len(acked) {
				t.Fatalf("the batch made no new segment (%d files before, %d after): the case tests nothing", len(acked), len(got))
			}
			var failed atomic.Int64
			c.arm(j, &failed)
			err := j.Sync(11)
			if !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrStorage) {
				t.Fatalf("sync under EIO: %v, want a storage error wrapping EIO", err)
			}
			if failed.Load() != 1 {
				t.Fatalf("the injected failure ran %d times, want once", failed.Load())
			}

			// The bytes of the failed batch are gone from the files. The
			// pre-written zeros ahead of the records are no data: a
			// recovery may trim them, so records are compared without them.
			after := fileBytes(t, dir)
			for name, b := range acked {
				if !bytes.Equal(withoutZeroTail(after[name]), withoutZeroTail(b)) {
					t.Errorf("%s: %d bytes of records after the failure, %d at the last good sync (or different content)", name, len(withoutZeroTail(after[name])), len(withoutZeroTail(b)))
				}
			}
			for name, b := range after {
				if _, ok := acked[name]; !ok && len(withoutZeroTail(b)) != 0 {
					t.Errorf("%s, created by the failed batch, still holds %d bytes", name, len(b))
				}
			}

			// The disk now syncs fine; still nothing of the batch counts.
			for upTo := uint64(4); upTo <= 11; upTo++ {
				if err := j.Sync(upTo); err == nil {
					t.Fatalf("sync up to %d succeeded after the failure: it acknowledged lost pages", upTo)
				}
			}
			if j.LastIndex() != 3 || j.Written() != 3 {
				t.Fatalf("last %d written %d after the failure, want 3 and 3", j.LastIndex(), j.Written())
			}

			// A crash now: the files open to exactly the acknowledged records.
			crash, cut := openJournal(t, copyDir(t, dir), 300)
			if cut != nil {
				t.Errorf("crash copy opened with a cut: %v", cut)
			}
			if got := replayAll(t, crash); !reflect.DeepEqual(got, records(1, 3)) {
				t.Errorf("crash copy replays %d records, want the 3 acknowledged", len(got))
			}
			crash.Close()

			// The journal continues at index 4 with new records.
			again := records(40, 5)
			for i, r := range again {
				r.Revision = uint64(4 + i)
			}
			mustWrite(t, j, again, 4)
			if err := j.Sync(8); err != nil {
				t.Fatal(err)
			}
			crash, _ = openJournal(t, copyDir(t, dir), 300)
			defer crash.Close()
			if got := replayAll(t, crash); !reflect.DeepEqual(got, append(records(1, 3), again...)) {
				t.Errorf("after recovery the journal replays %d records, want the 3 acknowledged then the 5 rewritten", len(got))
			}
		})
	}
}
