package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/journal"
)

// treeHashes fingerprints the tree under dir (internal/filetree).
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	h, err := filetree.Hashes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if diff := filetree.Diff(before, after); len(diff) > 0 {
		t.Errorf("%s changed the store: %s", what, strings.Join(diff, ", "))
	}
}

// damagedStore is a store with several journal segments, closed cleanly,
// that a damage row then edits.
type damagedStore struct {
	*testStore
	segs []journal.Segment
	rng  *rand.Rand
}

func (d *damagedStore) jdir() string { return filepath.Join(d.root(), "journal") }

func (d *damagedStore) last() journal.Segment { return d.segs[len(d.segs)-1] }

func (d *damagedStore) write(seg journal.Segment, data []byte) {
	d.t.Helper()
	if err := os.WriteFile(seg.Path, data, 0o644); err != nil {
		d.t.Fatal(err)
	}
}

func (d *damagedStore) read(seg journal.Segment) []byte {
	d.t.Helper()
	b, err := os.ReadFile(seg.Path)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *damagedStore) random(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(d.rng.Uint32())
	}
	return b
}

// crashedBeforeFinalAck sets the acknowledged floor where a crash during
// the final record's append leaves it: below that record.
func (d *damagedStore) crashedBeforeFinalAck() uint64 {
	d.t.Helper()
	if err := journal.SetFloor(d.jdir(), d.records-1); err != nil {
		d.t.Fatal(err)
	}
	return d.records - 1
}

// TestDamagedStoresOpenAndVerifyAgree damages a store in each way a crash,
// a bad disk or an operator can, then opens it with statestore.Open and
// checks it with kpjournal verify. On every row the two agree (Open
// refuses exactly when verify finds CORRUPTION), a refusal names the index
// and offset and changes no file, and an Open that succeeds cut only what
// was never acknowledged: every record up to the acknowledged floor is
// served.
func TestDamagedStoresOpenAndVerifyAgree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// damage edits the store and returns the index of the last
		// record it must still hold (the acknowledged ones).
		damage  func(d *damagedStore) uint64
		refused bool
		reason  string // in the refusal
	}{
		{"random bytes replace the only segment", func(d *damagedStore) uint64 {
			for _, s := range d.segs[:len(d.segs)-1] {
				os.Remove(s.Path)
			}
			os.Rename(d.last().Path, filepath.Join(d.jdir(), "00000000000000000001"))
			d.segs = []journal.Segment{{Start: 1, Path: filepath.Join(d.jdir(), "00000000000000000001")}}
			d.write(d.segs[0], d.random(5000))
			return d.records
		}, true, "journal corrupt at index 1"},
		{"random bytes replace a middle segment", func(d *damagedStore) uint64 {
			s := d.segs[1]
			d.write(s, d.random(int(s.Size)))
			return d.records
		}, true, "journal corrupt"},
		{"random bytes replace the first 64 bytes of the last segment", func(d *damagedStore) uint64 {
			b := d.read(d.last())
			copy(b, d.random(64))
			d.write(d.last(), b)
			return d.records
		}, true, "journal corrupt"},
		{"random bytes replace the whole last segment after a crash", func(d *damagedStore) uint64 {
			d.crashedBeforeFinalAck()
			d.write(d.last(), d.random(int(d.last().Size)))
			return d.records
		}, true, "journal corrupt"},
		{"a length field beyond the largest frame", func(d *damagedStore) uint64 {
			floor := d.crashedBeforeFinalAck() + 1 // the appended entry follows every record
			b := binary.AppendUvarint(d.read(d.last()), 1<<20)
			d.write(d.last(), append(b, 1, 1, 7, 7))
			return floor
		}, true, "exceeds the largest frame"},
		{"a valid CRC on a record whose revision does not follow", func(d *damagedStore) uint64 {
			rec := &journal.Record{Kind: journal.KindDelete, Namespace: "user/alice", Key: "intents/cam-0", Revision: 9999, TimeMs: 1}
			frame, err := rec.Encode()
			if err != nil {
				d.t.Fatal(err)
			}
			b := binary.AppendUvarint(d.read(d.last()), uint64(len(frame)))
			d.write(d.last(), append(b, frame...))
			return d.records + 1
		}, true, "revision"},
		{"zero-filled tail of 1 byte", zeroTail(1), false, ""},
		{"zeros after the records of a sealed segment", func(d *damagedStore) uint64 {
			d.write(d.segs[1], append(d.read(d.segs[1]), make([]byte, 4096)...))
			return d.records
		}, true, "zero bytes"},
		{"zero-filled tail of 100 bytes", zeroTail(100), false, ""},
		{"zero-filled tail of 8 KiB", zeroTail(8 << 10), false, ""},
		{"final record zeroed after a crash", func(d *damagedStore) uint64 {
			floor := d.crashedBeforeFinalAck()
			b := d.read(d.last())
			offs := entryOffsets(d.t, d.last().Path)
			clear(b[offs[len(offs)-1]:])
			d.write(d.last(), b)
			return floor
		}, false, ""},
		{"short final record after a crash", func(d *damagedStore) uint64 {
			floor := d.crashedBeforeFinalAck()
			b := d.read(d.last())
			d.write(d.last(), b[:len(b)-5])
			return floor
		}, false, ""},
		{"short final record after a clean close", func(d *damagedStore) uint64 {
			b := d.read(d.last())
			d.write(d.last(), b[:len(b)-5])
			return d.records
		}, true, "were acknowledged (marker ACKNOWLEDGED)"},
		{"byte flipped in the final record after a crash", func(d *damagedStore) uint64 {
			d.crashedBeforeFinalAck()
			b := d.read(d.last())
			b[len(b)-10] ^= 0x40
			d.write(d.last(), b)
			return d.records
		}, true, "whole final record was written"},
		{"last segment emptied", func(d *damagedStore) uint64 {
			d.write(d.last(), nil)
			return d.records
		}, true, "are missing"},
		{"last segment emptied below a checkpoint", func(d *damagedStore) uint64 {
			if err := journal.SetFloor(d.jdir(), 0); err != nil { // only the image says so
				d.t.Fatal(err)
			}
			d.write(d.last(), nil)
			return d.records
		}, true, "were acknowledged (checkpoint checkpoint-"},
		{"every segment removed and the only checkpoint damaged", func(d *damagedStore) uint64 {
			for _, s := range d.segs {
				os.Remove(s.Path)
			}
			imgs, _ := filepath.Glob(filepath.Join(d.root(), "checkpoint-*.ckpt"))
			if len(imgs) != 1 {
				d.t.Fatalf("checkpoint images %v, want one", imgs)
			}
			b, err := os.ReadFile(imgs[0])
			if err != nil {
				d.t.Fatal(err)
			}
			copy(b[20:], "garbage")
			os.WriteFile(imgs[0], b, 0o644)
			return d.records
		}, true, "are missing"},
		{"acknowledged-floor marker damaged", func(d *damagedStore) uint64 {
			os.WriteFile(filepath.Join(d.jdir(), journal.FloorFile), []byte("garbage"), 0o644)
			return d.records
		}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := newTestStore(t, func(o *statestore.Options) { o.SegmentSize = 4 << 10 })
			ts.fill(90)
			// The rows damage the last segment's final record: make sure it
			// holds two (segment cycling can leave the tail empty), and that
			// the final one does not end in a zero byte.
			for i := 0; ; i++ {
				last := ts.segments()[len(ts.segments())-1].Path
				if len(entryOffsets(t, last)) >= 2 && !endsInZero(t, last) {
					break
				}
				ts.put("user/alice", "tail", i, 0)
			}
			if strings.Contains(tc.name, "checkpoint") {
				if err := ts.s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			ts.close()
			d := &damagedStore{testStore: ts, segs: ts.segments(), rng: rand.New(rand.NewPCG(7, uint64(len(tc.name))))}
			if len(d.segs) < 3 {
				t.Fatalf("%d segments: the rows want at least 3", len(d.segs))
			}
			acked := tc.damage(d)
			before := treeHashes(t, ts.dir)

			code, rep := verifyChecked(t, ts.dir)
			var corrupt []problem
			for _, p := range rep.Problems {
				if p.Severity == corruption {
					corrupt = append(corrupt, p)
				}
			}
			sameTree(t, "verify", before, treeHashes(t, ts.dir))

			s, err := statestore.Open(ts.opts)
			if tc.refused {
				if err == nil {
					s.Close()
					t.Fatalf("Open accepted the damaged store; verify exit %d, problems %v", code, rep.Problems)
				}
				if len(corrupt) == 0 {
					t.Fatalf("Open refused (%v) but verify found no CORRUPTION: %v", err, rep.Problems)
				}
				var ce *journal.CorruptError
				if !errors.As(err, &ce) || ce.Index == 0 || ce.Segment == "" || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("refusal %v: want a *CorruptError naming index, segment and %q", err, tc.reason)
				}
				if !errors.Is(err, statestore.ErrUnavailable) {
					t.Fatalf("refusal %v is not UNAVAILABLE", err)
				}
				sameTree(t, "a refused Open", before, treeHashes(t, ts.dir))
				return
			}
			if err != nil {
				t.Fatalf("Open refused: %v; verify problems %v", err, rep.Problems)
			}
			defer s.Close()
			if len(corrupt) != 0 {
				t.Fatalf("Open accepted the store but verify found CORRUPTION: %v", corrupt)
			}
			// No acknowledged record is lost: the journal still reaches it.
			if got := s.OpenReport().Replayed; uint64(got) < acked {
				t.Fatalf("Open replayed %d records, but records up to %d were acknowledged", got, acked)
			}
			if cut := s.OpenReport().TailCut; cut != nil && cut.Index <= acked {
				t.Fatalf("Open cut at index %d, at or below the acknowledged %d", cut.Index, acked)
			}
		})
	}
}

// endsInZero reports whether the last record of the segment at path ends
// in a zero byte, as one in 256 does (the high byte of its CRC). Open
// cannot tell that byte from the zero fill after a torn write, so it calls
// such a record torn whatever else is damaged in it, and the rows that
// need a whole final record would see a torn one.
func endsInZero(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := entryOffsets(t, path)
	off := offs[len(offs)-1]
	n, w := binary.Uvarint(data[off:])
	return data[off+int64(w)+int64(n)-1] == 0
}

func zeroTail(n int) func(d *damagedStore) uint64 {
	return func(d *damagedStore) uint64 {
		d.write(d.last(), append(d.read(d.last()), bytes.Repeat([]byte{0}, n)...))
		return d.records
	}
}

// TestRefusedCommandsChangeNothing runs every kpjournal command that must
// refuse on a store whose journal is corrupt in its middle (or, for
// restore, on a store that exists, and with a damaged backup): each exits
// non-zero and leaves every file byte-identical, LOCK included.
func TestRefusedCommandsChangeNothing(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t, func(o *statestore.Options) { o.SegmentSize = 4 << 10 })
	ts.fill(90)
	var backup bytes.Buffer
	if err := ts.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	ts.close()
	segs := ts.segments()
	b, _ := os.ReadFile(segs[1].Path)
	b[len(b)/2] ^= 0x20
	os.WriteFile(segs[1].Path, b, 0o644)
	good := filepath.Join(t.TempDir(), "good.kpbak")
	os.WriteFile(good, backup.Bytes(), 0o644)
	bad := filepath.Join(t.TempDir(), "bad.kpbak")
	damaged := bytes.Clone(backup.Bytes())
	damaged[len(damaged)/2] ^= 0x20
	os.WriteFile(bad, damaged, 0o644)
	empty := t.TempDir()
	out := filepath.Join(t.TempDir(), "out.kpbak")
	noLock := t.TempDir() // the store's files copied without its LOCK
	if err := copyStore(ts.root(), filepath.Join(noLock, statestore.StoreDirName)); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		dir  string // the tree that must not change
		args []string
	}{
		{"verify", ts.dir, []string{"verify", "--dir", ts.dir}},
		{"replay", ts.dir, []string{"replay", "--dir", ts.dir}},
		{"checkpoint", ts.dir, []string{"checkpoint", "--dir", ts.dir}},
		{"backup", ts.dir, []string{"backup", "--dir", ts.dir, "--out", out}},
		{"repair of mid-journal damage", ts.dir, []string{"repair", "--dir", ts.dir, "--yes"}},
		{"repair --truncate-after without --yes", ts.dir, []string{"repair", "--dir", ts.dir, "--truncate-after", "3"}},
		{"restore into an existing store", ts.dir, []string{"restore", "--dir", ts.dir, "--in", good}},
		{"restore into a store copied without its LOCK", noLock, []string{"restore", "--dir", noLock, "--in", good}},
		{"restore of a damaged backup", empty, []string{"restore", "--dir", empty, "--in", bad}},
	}
	// The cases run one by one: several share ts.dir, whose tree each one
	// holds unchanged while its command runs.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := treeHashes(t, tc.dir)
			code, stdout, stderr := kp(t, tc.args...)
			if code == exitOK {
				t.Fatalf("exit 0, want a refusal\n%s%s", stdout, stderr)
			}
			sameTree(t, tc.name, before, treeHashes(t, tc.dir))
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("a refused command wrote %s", out)
			}
		})
	}
}

// TestDamagedCheckpointWayOut: a store whose only image is damaged opens
// when the journal still holds every record from index 1 (verify calls the
// image REPAIRABLE, checkpoint and backup work, repair moves it aside);
// when the journal was reclaimed behind the images, every command refuses
// saying that the records exist only in the damaged images, and repair
// changes nothing.
func TestDamagedCheckpointWayOut(t *testing.T) {
	t.Parallel()
	t.Run("journal holds everything", func(t *testing.T) {
		t.Parallel()
		ts := newTestStore(t)
		ts.fill(40)
		if err := ts.s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		ts.fill(10)
		ts.close()
		ckpts, _ := listCheckpoints(ts.root())
		flipByte(t, ckpts[0].Path, 80)
		code, rep := verifyChecked(t, ts.dir)
		if code != exitProblems || len(rep.Problems) != 1 || rep.Problems[0].Severity != repairable || !strings.Contains(rep.Problems[0].Reason, "replays it from the empty state") {
			t.Fatalf("verify exit %d, problems %v", code, rep.Problems)
		}
		if code, out, errs := kp(t, "backup", "--dir", ts.dir, "--out", filepath.Join(t.TempDir(), "b.kpbak")); code != exitOK {
			t.Fatalf("backup exit %d: %s%s", code, out, errs)
		}
		if code, out, errs := kp(t, "replay", "--dir", ts.dir); code != exitOK || !strings.Contains(errs, "does not load") || !strings.Contains(errs, "replaying the journal from index 1") {
			t.Fatalf("replay exit %d, want it to say it replays from index 1: %s%s", code, out, errs)
		}
		code, out, errs := kp(t, "repair", "--dir", ts.dir, "--yes")
		if code != exitOK || !strings.Contains(out, "moved a damaged checkpoint to "+filepath.Join(ts.root(), "quarantine", ckpts[0].Name())) {
			t.Fatalf("repair exit %d: %s%s", code, out, errs)
		}
		if code, rep := verifyChecked(t, ts.dir); code != exitOK || rep.Replay.Records != int(ts.records) {
			t.Fatalf("verify after repair: exit %d, replay %+v, problems %v", code, rep.Replay, rep.Problems)
		}
	})
	t.Run("journal reclaimed behind the images", func(t *testing.T) {
		t.Parallel()
		ts := newTestStore(t, func(o *statestore.Options) { o.SegmentSize = 2 << 10 })
		for range 3 {
			ts.fill(40)
			if err := ts.s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		ts.close()
		segs := ts.segments()
		if segs[0].Start == 1 {
			t.Fatal("the journal was not reclaimed; the test needs it to start after index 1")
		}
		ckpts, _ := listCheckpoints(ts.root())
		for _, ck := range ckpts {
			flipByte(t, ck.Path, 80)
		}
		before := treeHashes(t, ts.dir)
		code, rep := verifyChecked(t, ts.dir)
		if code != exitProblems || rep.Problems[0].Severity != corruption || !strings.Contains(rep.Problems[0].Reason, "restore a backup") {
			t.Fatalf("verify exit %d, problems %v", code, rep.Problems)
		}
		for _, args := range [][]string{{"checkpoint", "--dir", ts.dir}, {"repair", "--dir", ts.dir, "--yes"}} {
			code, out, errs := kp(t, args...)
			if code == exitOK || !strings.Contains(errs, "restore a backup") {
				t.Fatalf("%s: exit %d, want a refusal saying to restore a backup: %s%s", args[0], code, out, errs)
			}
		}
		sameTree(t, "refused commands", before, treeHashes(t, ts.dir))
	})
}
