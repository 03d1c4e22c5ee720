package journal

import (
	"os"
	"sync"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
)

// DefaultSegmentSize keeps the tail segment, which tidwall/wal holds in
// memory as one growing slice, small enough that regrowing it never stalls
// a commit for long (with 20 MB segments, regrowing measured 20-150 ms
// stalls), and the journal reclaimable in small steps: the specification's
// churn workload must stay under 5 MiB of journal plus checkpoints, and a
// sealed segment is freed only whole. Larger segments change segments less
// often (each change costs an fsync of the sealed file inside tidwall/wal's
// write, and an appending first commit): at 127 writers, 8 MiB segments
// measured a ~10% lower median commit latency, and broke that ceiling;
// 2 MiB segments raised the store's throughput by ~9% (ten alternating
// runs) but peaked at 4.2 MB in that workload, against 3.2 MB, leaving a
// fifth of the ceiling instead of two fifths, and 4 MiB peaked at 6.3 MB.
const DefaultSegmentSize = 1 << 20

// Options configure a Journal.
type Options struct {
	SegmentSize int    // bytes per segment file; 0 means DefaultSegmentSize
	Limits      Limits // decoder bounds; zero means DefaultLimits
	// NoSync skips fsync of appended batches. Only for measuring the cost of
	// everything but the disk: a journal opened with it is not durable.
	NoSync bool
	// NoPrewrite keeps the tail segment append-only, as tidwall/wal alone
	// writes it (see prewrite.go): for measuring what pre-writing gains,
	// and for tests that count fdatasyncs. Open still trims zeros a
	// pre-writing journal left.
	NoPrewrite bool
	// CacheSealed keeps tidwall/wal's in-memory copy of the last sealed
	// segment, as it does alone, so Reads of recent records just below the
	// tail come from memory: for a raft log, whose leader reads the records
	// it sends. Without it the sealed segment's buffer serves the next
	// tail at once (dropSealed), a segment's worth of memory less.
	CacheSealed bool
	// DirectSync never opens an io_uring: SyncParked, the pre-writer and
	// the ACKNOWLEDGED marker call fdatasync(2) directly, as Sync does.
	DirectSync bool
	// QuarantineDir receives a copy of a segment whose torn tail is cut.
	// Empty means a "quarantine" directory beside the journal directory.
	QuarantineDir string
	// Floor is evidence, from outside the journal, of records that were
	// acknowledged (the store passes its newest checkpoint's index). Open
	// raises it with the ACKNOWLEDGED marker, refuses a journal that ends
	// below it, and never cuts at or below it.
	Floor Floor
	// ExternalFloor hands the ACKNOWLEDGED marker to the caller: the
	// journal never raises it on its own (MarkServed, Close, a new
	// segment's first sync), only RaiseFloor and Reset change it. For a
	// raft log, where an acknowledged record above the commit index may
	// still be cut (TruncateBack), so the floor must be the commit index,
	// not the last acknowledged record.
	ExternalFloor bool
	// ReserveBytes is the size of the reserve that keeps deletes and
	// expiries possible on a full disk (see reserve.go); 0 means
	// DefaultReserveBytes, negative keeps none.
	ReserveBytes int64
	// Faults is a test seam of this module: hooks that every fsync the
	// journal issues consults first (the commit's and the marker's
	// fdatasyncs, the pre-writer's, and through the journal's disk.FS its
	// directory syncs, cuts and copies). nil in real use.
	Faults *fault.Hooks
	// seams are the package's own test seams (seams.go); nil in real use.
	seams *seams
}

// Journal is the write-ahead journal: an append-only sequence of framed
// records with dense indexes starting at 1. It is safe for concurrent use.
//
// Writing and syncing are separate steps so a committer can write batch N+1
// while batch N's fdatasync is still in flight: Write hands a batch to the
// page cache, Sync makes everything written so far durable. Only synced
// records count as acknowledged; any failure cuts the files back to the
// last synced record, so written-but-unsynced records never survive one.
//
// Three locks, always taken in this order: wmu is held by whatever changes
// the files or the wal handle (a Write for its whole batch, a recovery, a
// truncation, Close; the pre-writer only while it reserves the range its
// zeros go to, see prewrite.go), so none of them overlaps another; mu guards the fields and is held only for short
// steps, never across a batch's encoding or its write(2). So a Sync whose
// fdatasync returns acknowledges its records at once instead of waiting
// for the next batch to be copied and written (at 127 writers that wait
// was 110-160 us of every 400-700 us sync cycle, the disk idle meanwhile).
// rmMu is held by Reclaim while it unlinks sealed segments, and by
// whatever lists the segments to act on them or reopens the wal handle
// (a recovery, TruncateFront, Close); nothing else is taken while it is
// held. Reclaim holds neither wmu nor mu across its unlinks: freeing a
// segment's blocks can wait on the file system's journal, and at 127
// writers the write stage measured 5 ms waits, one 122 ms, behind them.
type Journal struct {
	wmu        sync.Mutex
	mu         sync.Mutex
	rmMu       sync.Mutex
	rmClosed   bool // under rmMu: Close has begun, Reclaim removes nothing
	dir        string
	opts       Options
	fs         disk.FS // the disk as this journal sees it: Options.Faults consulted
	log        *wal.Log
	first      uint64 // first index still on disk (last+1 when empty)
	last       uint64 // last synced (acknowledged) index (0 when none ever)
	written    uint64 // last index handed to the files (>= last)
	tailStart  uint64 // first index of the tail segment file
	tailBytes  int64  // size of the tail segment, to predict tidwall/wal's segment cycling
	epoch      uint64 // bumped by every recovery, so a sync that raced one claims nothing
	dirDirty   bool   // a segment file was created since the last sync
	syncFile   *os.File
	syncStart  uint64 // tailStart of the segment syncFile has open
	broken     error  // set by a failed write; cleared by a successful recovery
	closed     bool
	floor      Floor // the acknowledged floor Open judged the tail against
	floorMu    sync.Mutex
	floorWG    sync.WaitGroup // background raises of the marker; Close waits
	marker     *floorMarker   // under floorMu
	served     bool           // MarkServed was called (under floorMu)
	batch      wal.Batch
	rest       wal.Batch // the part of a batch after the entry that seals a segment
	buf        []byte
	stats      Stats
	batchBytes int    // frame bytes of the batch being (or last) written, under wmu
	tailGen    uint64 // bumped whenever the tail segment becomes another file
	reclaimed  bool   // Reclaim removed segments tidwall/wal still lists
	pre        prewriter
	spares     tailSpares // tail buffers for reuse (tidwall.go), under wmu
	pages      tailPages  // off-heap tail buffers and their released pages (tailpages.go), under wmu
	reserve    *reserve   // nil when Options.ReserveBytes < 0
	// rings run fdatasync without holding a scheduler P (internal/uring):
	// commit for the syncs that acknowledge records, background for the
	// pre-writer's and the marker's, so neither queues behind the other.
	// nil (direct fdatasync) under NoSync or where io_uring is refused.
	rings struct{ commit, background *uring.Ring }
	// dirSynced is the start index of the tail segment once a directory
	// fsync is known to have covered its entry (0: not known), under mu.
	// Reset whenever the tail becomes another file (tailChangedLocked).
	dirSynced uint64
}

// Stats count what the journal has done since Open, for benchmarks and
// operators (the mean batch size is Records/Appends; Records/Syncs is the
// mean number of records each fdatasync made durable).
type Stats struct {
	Appends uint64 // batches written
	Records uint64 // records in them
	Bytes   uint64 // frame bytes in them
	Syncs   uint64 // fdatasyncs that made written batches durable
	// ParkedSyncs is how many of them parked on an io_uring completion
	// (SyncParked with a ring open) instead of holding a processor.
	ParkedSyncs uint64
	Failures    uint64 // failed writes and syncs
	// Prewritten is how many bytes of the tail segment, from the write
	// offset on, are pre-written with zeros and synced right now: disk
	// space already allocated to the journal that the next records fill
	// without growing the file (see prewrite.go). It is 0 when the journal
	// was opened with NoSync, after a cycle until the background catches
	// up, and near the end of a segment.
	Prewritten int64
	// PrewriteFailures counts zero writes or syncs that failed (a full
	// disk, for one); the journal then appends as tidwall/wal does alone.
	PrewriteFailures uint64
	// Trimmed is how many zero bytes Open cut from the end of the last
	// segment: pre-written space, or data of records whose sync never
	// returned, left by a crash.
	Trimmed int64
}

// Stats returns the journal's counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.stats
	st.Prewritten = max(0, j.pre.synced-j.tailBytes)
	return st
}

// lockAll takes the three locks in their order (wmu, mu, then rmMu) and
// returns the function that releases them.
//
// Every holder of all three may change the tail file or the wal handle:
// a write of pre-written zeros under way outside wmu ends first.
func (j *Journal) lockAll() (unlock func()) {
	j.wmu.Lock()
	j.mu.Lock()
	release := j.claimFilesLocked()
	return func() {
		release()
		j.mu.Unlock()
		j.wmu.Unlock()
	}
}

// claimFilesLocked makes the files the caller's to change, wmu and mu held:
// it waits out a write of zeros under way outside wmu, then takes rmMu
// (no Reclaim unlinking). It returns the function that lets rmMu go.
func (j *Journal) claimFilesLocked() (release func()) {
	j.waitPrewriteLocked()
	j.rmMu.Lock()
	return j.rmMu.Unlock
}

// tailName is the file name of the tail segment.
func (j *Journal) tailName() string { return segmentName(j.tailStart) }

// Dir is the directory holding the segment files.
func (j *Journal) Dir() string { return j.dir }

// FirstIndex is the index of the first record still on disk; when the
// journal holds no record it is LastIndex()+1.
func (j *Journal) FirstIndex() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.first
}

// LastIndex is the index of the last acknowledged record (0 if none was
// ever written).
func (j *Journal) LastIndex() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// Written is the index of the last record written, synced or not.
func (j *Journal) Written() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.written
}

// Size is the total size in bytes of the segment files.
func (j *Journal) Size() (int64, error) {
	segs, err := ListSegments(j.dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n, nil
}
