package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/fault"
)

// raftLimits are the decoder bounds of a raft journal in these tests.
var raftLimits = func() Limits { l := DefaultLimits; l.MaxRaftEntry = 1 << 20; return l }()

func raftRec(term uint64, data string) *Record {
	return &Record{Kind: KindRaft, Raft: &RaftEntry{Term: term, Commit: term / 2, Type: 3,
		AppendedAt: time.Unix(1700000000, 123456789).UTC(), Extensions: []byte("ext"), Data: []byte(data)}}
}

// TestRaftFrameFormat pins the kind-4 layout of doc.go and raftframe.go
// byte for byte, built here field by field without the encoder.
func TestRaftFrameFormat(t *testing.T) {
	t.Parallel()
	e := &RaftEntry{Term: 0x0102030405060708, Commit: 42, Type: 2, AppendedAt: time.Unix(1700000000, 5).UTC(),
		Extensions: []byte{0xEE}, Data: []byte("hello")}
	var want []byte
	want = append(want, 1, 4)
	want = binary.LittleEndian.AppendUint64(want, 0x0102030405060708)
	want = binary.LittleEndian.AppendUint64(want, 42)
	want = binary.LittleEndian.AppendUint64(want, 1700000000)
	want = binary.LittleEndian.AppendUint32(want, 5)
	want = append(want, 2)
	want = binary.LittleEndian.AppendUint32(want, 1)
	want = binary.LittleEndian.AppendUint32(want, 5)
	want = append(want, 0xEE)
	want = append(want, "hello"...)
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	r := &Record{Kind: KindRaft, Raft: e}
	got, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame\n got %x\nwant %x", got, want)
	}
	if r.EncodedSize() != len(want) || len(want) != raftHeaderSize+1+5+crcSize {
		t.Fatalf("EncodedSize %d, frame %d bytes", r.EncodedSize(), len(want))
	}
	if !PlausibleFrame(got, raftLimits) {
		t.Fatal("PlausibleFrame refuses a valid raft frame")
	}
}

// TestRaftFrameRoundTrip: every field comes back, the zero time stays
// zero, and the decoded slices never alias the frame.
func TestRaftFrameRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range []*RaftEntry{
		raftRec(7, "data").Raft,
		{Term: 1},
		{Term: 1 << 60, Commit: 1 << 59, Type: 255, AppendedAt: time.Unix(-5, 999999999).UTC(), Data: make([]byte, 1000)},
	} {
		frame, err := (&Record{Kind: KindRaft, Raft: e}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := Decode(frame, raftLimits)
		if err != nil {
			t.Fatal(err)
		}
		g := rec.Raft
		if rec.Kind != KindRaft || g.Term != e.Term || g.Commit != e.Commit || g.Type != e.Type ||
			!g.AppendedAt.Equal(e.AppendedAt) || g.AppendedAt.IsZero() != e.AppendedAt.IsZero() ||
			!bytes.Equal(g.Extensions, e.Extensions) || !bytes.Equal(g.Data, e.Data) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", g, e)
		}
		if len(g.Data) > 0 {
			frame[raftHeaderSize+len(e.Extensions)] ^= 0xFF
			if !bytes.Equal(g.Data, e.Data) {
				t.Fatal("decoded data aliases the frame")
			}
		}
	}
}

// TestRaftFrameRejects: store limits refuse the kind outright; damaged
// headers are refused naming the field.
func TestRaftFrameRejects(t *testing.T) {
	t.Parallel()
	frame, err := raftRec(3, "payload").Encode()
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		return b
	}
	cases := []struct {
		name  string
		frame []byte
		lim   Limits
		field string
	}{
		{"store limits", frame, DefaultLimits, "kind"},
		{"flipped data", func() []byte { b := bytes.Clone(frame); b[len(b)-6] ^= 1; return b }(), raftLimits, "crc"},
		{"nanoseconds", reseal(func() []byte { b := bytes.Clone(frame); binary.LittleEndian.PutUint32(b[26:], 1e9); return b }()), raftLimits, "appended at"},
		{"data length", reseal(func() []byte { b := bytes.Clone(frame); binary.LittleEndian.PutUint32(b[35:], 99); return b }()), raftLimits, "length"},
		{"over the limit", frame, func() Limits { l := raftLimits; l.MaxRaftEntry = 4; return l }(), "raft data length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.frame, c.lim)
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want a FrameError on %q", err, c.field)
			}
		})
	}
}

func openRaftJournal(t *testing.T, dir string) *Journal { return openRaftJournalFaults(t, dir, nil) }

// openRaftJournalFaults opens a raft journal of 4 KiB segments whose syncs
// go through h (nil: none).
func openRaftJournalFaults(t *testing.T, dir string, h *fault.Hooks) *Journal {
	t.Helper()
	j, _, err := Open(dir, Options{Limits: raftLimits, ExternalFloor: true, NoPrewrite: true, ReserveBytes: -1, SegmentSize: 4096, Faults: h})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func appendRaft(t *testing.T, j *Journal, n int) {
	t.Helper()
	for range n {
		if _, err := j.Append([]*Record{raftRec(1, "0123456789abcdef0123456789abcdef")}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncateBackAndReset: a suffix cut across segments is durable and
// the next write continues after it; the floor refuses a cut reaching it;
// Reset starts over at any index and leaves the floor below it.
func TestTruncateBackAndReset(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j := openRaftJournal(t, dir)
	appendRaft(t, j, 300) // several 4 KiB segments
	if err := j.RaiseFloor(100); err != nil {
		t.Fatal(err)
	}
	var fe *FloorError
	if err := j.TruncateBack(99); !errors.As(err, &fe) || fe.Index != 100 {
		t.Fatalf("TruncateBack below the floor: %v", err)
	}
	if err := j.TruncateBack(150); err != nil {
		t.Fatal(err)
	}
	if j.LastIndex() != 150 {
		t.Fatalf("LastIndex %d after TruncateBack(150)", j.LastIndex())
	}
	if _, err := j.Read(151, nil); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("Read(151): %v", err)
	}
	appendRaft(t, j, 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openRaftJournal(t, dir)
	if j.LastIndex() != 151 || j.Floor().Index != 100 {
		t.Fatalf("reopened at %d, floor %v", j.LastIndex(), j.Floor())
	}
	if err := ReplayDir(dir, 1, 151, raftLimits, func(uint64, *Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := j.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if j.FirstIndex() != 1000 || j.LastIndex() != 999 {
		t.Fatalf("after Reset(1000): first %d last %d", j.FirstIndex(), j.LastIndex())
	}
	if _, err := j.Write([]*Record{raftRec(2, "x")}, 1000); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(1000); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openRaftJournal(t, dir)
	defer j.Close()
	if j.FirstIndex() != 1000 || j.LastIndex() != 1000 || j.Floor().Index != 999 {
		t.Fatalf("reopened after Reset: first %d last %d floor %v", j.FirstIndex(), j.LastIndex(), j.Floor())
	}
}

// TestResetMarkerFinishedByOpen: a crash after the RESET marker became
// durable, with the old segments still there, opens as the reset journal.
func TestResetMarkerFinishedByOpen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j := openRaftJournal(t, dir)
	appendRaft(t, j, 200)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	copy(b, resetMagic)
	binary.LittleEndian.PutUint64(b[4:], 77)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	if err := os.WriteFile(filepath.Join(dir, ResetFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	j = openRaftJournal(t, dir)
	if j.FirstIndex() != 77 || j.LastIndex() != 76 {
		t.Fatalf("first %d last %d", j.FirstIndex(), j.LastIndex())
	}
	if _, err := os.Stat(filepath.Join(dir, ResetFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left: %v", err)
	}
	j.Close()
	// A damaged marker is corruption, not a reason to drop anything.
	if err := os.WriteFile(filepath.Join(dir, ResetFile), []byte("KPRS garbage...."), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, Options{Limits: raftLimits, ExternalFloor: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged marker: %v", err)
	}
}

// TestExternalFloorNeverRaisedByTheJournal: with ExternalFloor the
// marker moves only by RaiseFloor, not at segment changes or Close.
func TestExternalFloorNeverRaisedByTheJournal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j := openRaftJournal(t, dir)
	if err := j.MarkServed(); err != nil {
		t.Fatal(err)
	}
	appendRaft(t, j, 300)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if fl, err := ReadFloor(dir); err != nil || fl.Index != 0 {
		t.Fatalf("floor %v, %v: the journal raised it itself", fl, err)
	}
}

// TestTruncateBackCrashLeavesNoGap: a TruncateBack interrupted after some
// of its removals (a failing directory fsync stands for the crash) leaves
// a contiguous journal ending at or after the cut, never a hole.
func TestTruncateBackCrashLeavesNoGap(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	h := &fault.Hooks{}
	j := openRaftJournalFaults(t, dir, h)
	appendRaft(t, j, 300)
	segs, _ := ListSegments(dir)
	if len(segs) < 6 {
		t.Fatalf("%d segments", len(segs))
	}
	calls := 0
	h.SetDiskSync(func(string) error {
		if calls++; calls == 3 {
			return syscall.EIO
		}
		return nil
	})
	if err := j.TruncateBack(50); !errors.Is(err, syscall.EIO) {
		t.Fatalf("TruncateBack with the third directory fsync failing: %v", err)
	}
	// The crash: the directory as the failure left it, opened afresh.
	j2 := openRaftJournal(t, dir)
	defer j2.Close()
	if last := j2.LastIndex(); last < 50 || last >= 300 {
		t.Fatalf("journal ends at %d after an interrupted cut to 50", last)
	}
	if err := ReplayDir(dir, 1, j2.LastIndex(), raftLimits, func(uint64, *Record) error { return nil }); err != nil {
		t.Fatalf("not contiguous: %v", err)
	}
}

// TestReadAfterAFailedWriteReopens: a failed fdatasync or a failed
// truncation discards the wal handle; the next Read reopens it instead of
// failing until some Write does. A raft follower reads its log (the term
// of the entry before the leader's) before it writes again, so a Read
// that waited for a Write refused every AppendEntries for ever.
func TestReadAfterAFailedWriteReopens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail func(j *Journal, h *fault.Hooks) error
		last uint64 // LastIndex after the failure
	}{
		{"failed sync and recovery", func(j *Journal, h *fault.Hooks) error {
			defer h.SetSync(func(string) error { return syscall.EIO })()
			defer h.SetDiskSync(func(string) error { return syscall.EIO })() // the immediate recovery fails too
			_, err := j.Append([]*Record{raftRec(1, "lost")})
			return err
		}, 40},
		{"failed truncation", func(j *Journal, h *fault.Hooks) error {
			defer h.SetSync(func(string) error { return syscall.EIO })()
			defer h.SetDiskSync(func(string) error { return syscall.EIO })()
			return j.TruncateBack(30)
		}, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "journal")
			h := &fault.Hooks{}
			j := openRaftJournalFaults(t, dir, h)
			defer j.Close()
			appendRaft(t, j, 40)
			if err := c.fail(j, h); !errors.Is(err, syscall.EIO) {
				t.Fatalf("with its syncs failing: %v", err)
			}
			if j.LastIndex() != c.last {
				t.Fatalf("LastIndex %d, want %d", j.LastIndex(), c.last)
			}
			for _, i := range []uint64{1, c.last} {
				frame, err := j.Read(i, nil)
				if err != nil {
					t.Fatalf("Read(%d) with no write since the failure: %v", i, err)
				}
				if _, err := Decode(frame, raftLimits); err != nil {
					t.Fatalf("Read(%d): %v", i, err)
				}
			}
			if _, err := j.Read(c.last+1, nil); !errors.Is(err, ErrNoRecord) {
				t.Fatalf("Read(%d) past the end: %v", c.last+1, err)
			}
		})
	}
}

// TestReadNeverFailsASyncInFlight: a Read while Reclaim has left
// tidwall/wal's segment list stale must not reopen the journal, which
// cuts it back to the last synced record: the batch whose fdatasync is in
// flight would fail (on a raft leader, a step-down and an election per
// reclaim: leader transfers then took 600 ms).
func TestReadNeverFailsASyncInFlight(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	h := &fault.Hooks{}
	j := openRaftJournalFaults(t, dir, h)
	defer j.Close()
	appendRaft(t, j, 300)
	if err := j.Reclaim(200); err != nil {
		t.Fatal(err)
	}
	if j.FirstIndex() == 1 {
		t.Fatal("Reclaim(200) removed no segment")
	}
	last, err := j.Write([]*Record{raftRec(1, "in flight")}, 301)
	if err != nil || last != 301 {
		t.Fatalf("Write: %d, %v", last, err)
	}
	entered, release, restore := h.StallNextSync()
	defer restore()
	done := make(chan error, 1)
	go func() { done <- j.Sync(301) }()
	<-entered
	j.Read(250, nil) // an error ("being recovered") is allowed; a reopen is not
	release()
	if err := <-done; err != nil {
		t.Fatalf("the sync in flight across a Read: %v", err)
	}
	if j.LastIndex() != 301 {
		t.Fatalf("LastIndex %d after the sync of 301", j.LastIndex())
	}
}
