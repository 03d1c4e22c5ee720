package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
	"github.com/tidwall/wal"
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
	// ReserveBytes is the size of the reserve that keeps deletes and
	// expiries possible on a full disk (see reserve.go); 0 means
	// DefaultReserveBytes, negative keeps none.
	ReserveBytes int64
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

// Open opens (creating if needed) the journal in dir. It finishes any
// truncation tidwall/wal left half done, cuts a torn final record off the
// last segment (reporting it in the returned *TailCut, nil if none), and
// refuses to open when damage sits anywhere else. It does not read sealed
// segments: Replay validates them.
func Open(dir string, opts Options) (*Journal, *TailCut, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	if opts.QuarantineDir == "" {
		opts.QuarantineDir = filepath.Join(filepath.Dir(dir), "quarantine")
	}
	// Records were acknowledged but the journal directory is gone: refuse
	// before creating it (openLog refuses a directory with no segment).
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && opts.Floor.Index > 0 {
		return nil, nil, CheckFloor(0, segmentName(1), opts.Floor)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, &StorageError{Op: "create directory", Err: err}
	}
	if err := disk.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, nil, &StorageError{Op: "create directory", Err: err}
	}
	j := &Journal{dir: dir, opts: opts}
	if err := finishTruncation(dir); err != nil {
		return nil, nil, err
	}
	floor, err := LoadFloor(dir, opts.Floor)
	if err != nil {
		return nil, nil, err
	}
	j.floor = floor
	cut, err := j.repairTail()
	if err != nil {
		return nil, nil, err
	}
	if err := j.openLog(); err != nil {
		return nil, nil, err
	}
	if err := CheckFloor(j.last, j.tailName(), floor); err != nil {
		j.log.Close()
		return nil, nil, err
	}
	j.reserve = openReserve(dir, opts.ReserveBytes, opts.NoSync)
	if !opts.NoSync && !opts.DirectSync {
		j.rings.commit, j.rings.background = openRing(), openRing()
	}
	j.marker = newFloorMarker(dir, opts.NoSync, j.rings.background)
	j.startPrewriter()
	return j, cut, nil
}

// MarkServed records that every record now in the journal is served (the
// store calls it once Open has replayed them): from then on they count as
// acknowledged, and an open that no longer finds them refuses. It is
// separate from Open so that an open refused later, during replay, writes
// nothing.
func (j *Journal) MarkServed() error {
	j.floorMu.Lock()
	j.served = true
	j.floorMu.Unlock()
	if err := j.fillReserve(); err != nil {
		return err
	}
	return j.raiseFloor(j.LastIndex())
}

// LoadFloor combines outside evidence with the ACKNOWLEDGED marker in dir.
// A damaged marker is no evidence (Open rewrites it); any other read
// failure is returned.
func LoadFloor(dir string, outside Floor) (Floor, error) {
	mf, err := ReadFloor(dir)
	if err != nil && !errors.Is(err, ErrFloorDamaged) {
		return Floor{}, err
	}
	return outside.Raise(mf.Index, mf.Source), nil
}

// CheckFloor refuses a journal whose last record, last, lies below the
// acknowledged floor: records that were acknowledged are missing (an
// emptied or shortened segment, a deleted tail). seg names the last segment.
func CheckFloor(last uint64, seg string, floor Floor) error {
	if last >= floor.Index {
		return nil
	}
	return &CorruptError{Segment: seg, Offset: -1, Index: last + 1,
		Reason: fmt.Sprintf("the journal ends at index %d but records up to index %d were acknowledged (%s): records %d..%d are missing",
			last, floor.Index, floor.Source, last+1, floor.Index)}
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

// closeFloor raises the marker to last, the final acknowledged index, and
// closes it.
func (j *Journal) closeFloor(last uint64) error {
	j.floorMu.Lock()
	defer j.floorMu.Unlock()
	var err error
	if j.served {
		err = j.marker.raise(last)
	}
	err = errors.Join(err, j.marker.close())
	j.marker = nil
	return err
}

// raiseFloor records index as acknowledged in the marker.
func (j *Journal) raiseFloor(index uint64) error {
	j.floorMu.Lock()
	defer j.floorMu.Unlock()
	return j.marker.raise(index)
}

// Dir is the directory holding the segment files.
func (j *Journal) Dir() string { return j.dir }

// openLog opens tidwall/wal on a directory whose tail is known good and
// loads the index range.
func (j *Journal) openLog() error {
	if segs, err := ListSegments(j.dir); err != nil {
		return &StorageError{Op: "open", Err: err}
	} else if len(segs) == 0 {
		// Records were acknowledged but no segment is left: refuse
		// before tidwall/wal starts an empty one, so a refused Open
		// changes nothing.
		if err := CheckFloor(0, segmentName(1), j.floor); err != nil {
			return err
		}
	}
	log, err := openTidwall(j.dir, j.opts.SegmentSize)
	if err != nil {
		return &StorageError{Op: "open", Err: err}
	}
	// tidwall/wal may just have created the first segment file, and never
	// fsyncs directories; a tail left by a process that stopped before its
	// directory fsync may not be durable either. Make the entries durable
	// ourselves, so the tail's seal can be acknowledged without another
	// (see Write).
	if err := disk.SyncDir(j.dir); err != nil {
		log.Close()
		return &StorageError{Op: "open", Err: err}
	}
	first, err1 := log.FirstIndex()
	last, err2 := log.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		log.Close()
		return &StorageError{Op: "open", Err: err}
	}
	segs, err := ListSegments(j.dir)
	if err != nil || len(segs) == 0 {
		log.Close()
		return &StorageError{Op: "open", Err: fmt.Errorf("no segment after open: %v", err)}
	}
	tail := segs[len(segs)-1]
	j.log, j.first, j.last, j.written = log, first, last, last
	j.tailStart, j.tailBytes = tail.Start, tail.Size
	j.tailChangedLocked()
	j.dirSynced = tail.Start
	j.pre.held = false
	j.kickPrewriterLocked()
	return nil
}

// repairTail checks the last segment and cuts a torn final record. Damage
// followed by any whole record is corruption and is never cut.
func (j *Journal) repairTail() (*TailCut, error) {
	segs, err := ListSegments(j.dir)
	if err != nil {
		return nil, &StorageError{Op: "open", Err: err}
	}
	if len(segs) == 0 {
		return nil, nil
	}
	tail := segs[len(segs)-1]
	data, err := os.ReadFile(tail.Path)
	if err != nil {
		return nil, &StorageError{Op: "read tail segment", Err: err}
	}
	res, _ := scan(data, j.opts.Limits, nil)
	index := tail.Start + uint64(res.count)
	if res.bad == nil && res.zeros > 0 {
		// Pre-written space, or records whose data never reached the disk
		// (their sync never returned): trimmed, not reported as damage,
		// unless acknowledged records were there.
		if err := JudgeTail(tail.Name(), data, res.end, index, j.floor, j.opts.Limits); err != nil {
			return nil, err
		}
		if err := disk.Truncate(tail.Path, res.end); err != nil {
			return nil, &StorageError{Op: "trim pre-written tail", Err: err}
		}
		j.stats.Trimmed = res.zeros
		return nil, nil
	}
	if res.bad == nil {
		return nil, nil
	}
	if err := JudgeTail(tail.Name(), data, res.bad.offset, index, j.floor, j.opts.Limits); err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Reason = res.bad.reason + "; " + ce.Reason
		}
		return nil, err
	}
	cut := &TailCut{Segment: tail.Name(), Offset: res.bad.offset, Index: index, Bytes: int64(len(data)) - res.bad.offset, Reason: res.bad.reason}
	if err := os.MkdirAll(j.opts.QuarantineDir, 0o755); err != nil {
		return nil, &StorageError{Op: "quarantine torn segment", Err: err}
	}
	cut.SavedAs = filepath.Join(j.opts.QuarantineDir, fmt.Sprintf("%s.%d.torn", tail.Name(), time.Now().UnixNano()))
	if err := disk.WriteAtomic(cut.SavedAs, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return nil, &StorageError{Op: "quarantine torn segment", Err: err}
	}
	if err := disk.Truncate(tail.Path, res.bad.offset); err != nil {
		return nil, &StorageError{Op: "cut torn tail", Err: err}
	}
	if err := disk.SyncDir(j.dir); err != nil {
		return nil, &StorageError{Op: "cut torn tail", Err: err}
	}
	return cut, nil
}

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

// Append writes recs as one batch and syncs it: Write then Sync, for
// callers that do not pipeline.
func (j *Journal) Append(recs []*Record) (uint64, error) {
	j.mu.Lock()
	next := j.written + 1
	j.mu.Unlock()
	first, err := j.Write(recs, next)
	if err != nil {
		return 0, err
	}
	if len(recs) > 0 {
		if err := j.Sync(first + uint64(len(recs)) - 1); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// ErrStale is wrapped by Write when the caller's expected first index is
// not the journal's next one: a failure cut back records the caller built
// on, so its batch would skip or repeat indexes.
var ErrStale = errors.New("journal: batch built on records that were cut back")

// Write hands recs to the segment files as one batch with consecutive
// indexes starting at first, which must be the index after the last record
// written (else the error wraps ErrStale and nothing is written). The
// records are not acknowledged until a Sync covers them; when the batch
// opened a new segment file, the Sync that covers the first records in it
// also fsyncs the directory, so the new file's entry is durable before any
// record in it is acknowledged. tidwall/wal fsyncs the finished segment
// itself as it cycles: when the batch's last record sealed the segment and
// that segment's directory entry is already durable, Write itself
// acknowledges everything written (LastIndex moves) and a Sync up to it
// does no I/O; so a batch that ends at the seal costs one fsync, not three
// (the sealed file, the new empty file, the directory). On
// failure nothing of the batch is kept: the handle is discarded and the
// files are cut back to the last synced record (so records written earlier
// but not yet synced are gone too, and their Sync fails).
func (j *Journal) Write(recs []*Record, first uint64) (uint64, error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return 0, ErrClosed
	}
	if j.broken != nil {
		release := j.claimFilesLocked()
		err := j.recoverLocked()
		release()
		if err != nil {
			j.mu.Unlock()
			return 0, &StorageError{Op: "recover", Index: first, Err: err}
		}
	}
	if first != j.written+1 {
		j.mu.Unlock()
		return 0, &StorageError{Op: "append", Index: first, Err: fmt.Errorf("%w: next index is %d", ErrStale, j.written+1)}
	}
	if len(recs) == 0 {
		j.mu.Unlock()
		return first, nil
	}
	tail := tailCycle{bytes: j.tailBytes, start: j.tailStart, size: int64(j.opts.SegmentSize)}
	log := j.log
	j.mu.Unlock()

	// Under wmu alone: the handle, the batch, the buffer and the tail
	// offset are the writer's until it returns (see Journal).
	j.batch.Clear()
	j.rest.Clear()
	j.batchBytes = 0
	tail.begin(first)
	// The segment the batch starts in, and how many segments it seals.
	sealing, seals := tail.start, 0
	part, split := &j.batch, false
	for i, r := range recs {
		var err error
		j.buf, err = r.AppendFrame(j.buf[:0])
		if err != nil {
			return 0, err
		}
		part.Write(first+uint64(i), j.buf)
		j.batchBytes += len(j.buf)
		if tail.append(len(j.buf), first+uint64(i)) {
			seals++
			if i+1 < len(recs) {
				part, split = &j.rest, true
			}
		}
	}
	j.waitPrewriteBelow(tail.bytes, tail.cycled)
	err := writeBatch(log, &j.batch)
	if err == nil && split {
		// The first part sealed the tail and tidwall/wal opened an empty
		// segment: its buffer gets a whole segment's room before the rest
		// of the batch goes in, instead of being regrown from nothing by
		// it (about 230 KB of garbage at every segment change).
		presizeTail(log, j.tailCapacity(), &j.spares)
		err = writeBatch(log, &j.rest)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.failLocked(err)
		defer j.claimFilesLocked()()
		return 0, &StorageError{Op: "append", Index: first, Err: j.recoverAfter(err)}
	}
	j.written += uint64(len(recs))
	j.stats.Appends++
	j.stats.Records += uint64(len(recs))
	j.stats.Bytes += uint64(j.batchBytes)
	j.tailBytes, j.tailStart = tail.bytes, tail.start
	// A batch is acknowledged whole or not at all, and a recovery cuts the
	// files back to j.last: so j.last stays put when cycling fsynced a
	// finished segment in the middle of the batch. When the batch's last
	// record sealed the segment it started in, and a directory fsync has
	// covered that segment's entry (and so every older one's), every
	// record written so far is durable: tidwall/wal fsynced the segment
	// before opening the next, and no fdatasync of the new, empty file or
	// of the directory adds anything to them. The directory is left to the
	// Sync that covers the first records in the new segment (dirDirty).
	// (The new tail is empty exactly when the last record sealed.)
	if seals == 1 && tail.bytes == 0 && sealing == j.dirSynced {
		j.last = j.written
	}
	if tail.cycled {
		// The entry that sealed the old segment reached SegmentSize, past
		// every pre-written byte; the new tail is a fresh, empty file.
		j.tailChangedLocked()
	}
	// The new segment's directory entry is made durable by the Sync that
	// acknowledges its first records, off the writer's path; that Sync
	// wakes the pre-writer.
	j.dirDirty = j.dirDirty || tail.cycled
	j.pre.held = j.pre.held || tail.cycled
	j.kickPrewriterLocked()
	return first, nil
}

// failLocked records a failed write or sync.
func (j *Journal) failLocked(err error) {
	j.stats.Failures++
	j.broken = err
	j.spendOnLocked(err)
}

// recoverAfter tries to recover right away so the next batch needs no extra
// work; if that fails too, the next Write tries again. wmu, mu and rmMu
// are held.
func (j *Journal) recoverAfter(err error) error {
	if rerr := j.recoverLocked(); rerr != nil {
		return errors.Join(err, fmt.Errorf("recovery: %w", rerr))
	}
	return err
}

// Sync makes every record written so far durable with one fdatasync of the
// tail segment, issued without holding the journal's lock so Write can
// proceed meanwhile. It succeeds only if every record up to upTo is then
// acknowledged; if a failure (this sync's or a concurrent write's) cut
// records back, it fails and LastIndex tells which records survived.
//
// The calling goroutine waits in fdatasync(2) itself, holding its
// scheduler processor meanwhile: the fastest for a lone committer (one
// thread wake-up when the disk answers). When other goroutines need the
// CPU, use SyncParked.
func (j *Journal) Sync(upTo uint64) error { return j.sync(upTo, nil) }

// SyncParked is Sync with the fdatasync run through an io_uring (where the
// kernel allows one): the calling goroutine parks while the disk works,
// so its processor runs other goroutines. With GOMAXPROCS=2 and 127
// writers this raised throughput by a sixth; a lone committer pays a
// second thread wake-up (20-40 us here), so Sync suits it better.
func (j *Journal) SyncParked(upTo uint64) error { return j.sync(upTo, j.rings.commit) }

// sync is Sync through ring (nil: directly).
func (j *Journal) sync(upTo uint64, ring *uring.Ring) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	if upTo <= j.last {
		j.mu.Unlock()
		return nil
	}
	if upTo > j.written || j.broken != nil {
		// A failure (or one whose cut-back is still to come) took them.
		last := j.last
		j.mu.Unlock()
		return &StorageError{Op: "sync", Index: last + 1, Err: fmt.Errorf("records %d..%d were cut back after a failure", last+1, upTo)}
	}
	target, epoch, dir, tailStart := j.written, j.epoch, j.dirDirty, j.tailStart
	j.dirDirty = false
	f, err := j.syncFileLocked()
	j.mu.Unlock()
	if err == nil && !j.opts.NoSync {
		err = syncFile(f, ring, fault.Sync)
		// Records in a segment file created since the last sync are
		// durable only once the file's directory entry is.
		if err == nil && dir {
			err = syncSegmentDir(j.dir)
		}
	}
	j.mu.Lock()
	if err != nil && j.epoch == epoch {
		j.failLocked(err)
		// From here on no sync in flight acknowledges anything: the
		// pages this one failed on may be marked clean, so a later
		// fdatasync succeeding proves nothing about them.
		j.epoch++
		j.mu.Unlock()
		return j.recoverFailedSync(err)
	}
	defer j.mu.Unlock()
	switch {
	case j.epoch != epoch || j.broken != nil:
		// A write or sync failed while this sync ran: the files are (or
		// are about to be) cut back to j.last, so nothing this sync
		// covered stands.
		return &StorageError{Op: "sync", Index: j.last + 1, Err: fmt.Errorf("records %d..%d were cut back by a failure during the sync", j.last+1, upTo)}
	}
	j.stats.Syncs++
	if ring != nil {
		j.stats.ParkedSyncs++
	}
	j.last = max(j.last, target)
	if dir && !j.opts.NoSync && tailStart == j.tailStart {
		j.dirSynced = tailStart
	}
	if dir && !j.closed {
		// The first records of a new segment (written after MarkServed, since
		// only the store writes): move the floor up, once per
		// segment, so an emptied tail is noticed even after a crash. The
		// records are durable whatever happens to this write: a failure
		// only leaves the evidence lower (Close raises it again and
		// reports the error). So it is written in the background: on the
		// commit path it was a third sync at every segment change (after
		// the new file's and the directory's), queued behind them on the
		// device. It only ever claims records this sync made durable.
		j.floorWG.Add(1)
		go func() {
			defer j.floorWG.Done()
			j.raiseFloor(target)
		}()
		// The new segment's first sync is done: the pre-writer may go
		// (see prewriter.held).
		j.pre.held = false
		j.kickPrewriterLocked()
	}
	return nil
}

// recoverFailedSync cuts the files back after the failed fdatasync err,
// unless a Write already did (it recovers a broken journal first). It takes
// wmu, so the cut never overlaps a batch being written.
func (j *Journal) recoverFailedSync(err error) error {
	defer j.lockAll()()
	if j.broken != nil && !j.closed {
		err = j.recoverAfter(err)
	}
	return &StorageError{Op: "sync", Index: j.last + 1, Err: err}
}

// syncFileLocked returns a descriptor on the tail segment for Sync,
// reopening it when the tail moved to a new file.
func (j *Journal) syncFileLocked() (*os.File, error) {
	if j.syncFile != nil && j.syncStart == j.tailStart {
		return j.syncFile, nil
	}
	j.closeSyncFileLocked()
	// Read-only is enough: fdatasync flushes the file's dirty pages
	// whichever descriptor asks.
	f, err := os.Open(filepath.Join(j.dir, segmentName(j.tailStart)))
	if err != nil {
		return nil, err
	}
	j.syncFile, j.syncStart = f, j.tailStart
	return f, nil
}

// closeSyncFileLocked drops the sync descriptor. A Sync still using it is
// safe: os.File defers the close until its call returns.
func (j *Journal) closeSyncFileLocked() {
	if j.syncFile != nil {
		j.syncFile.Close()
		j.syncFile = nil
	}
}

// syncFile fdatasyncs f after consulting the fault hook, through ring (nil:
// directly). uring holds a reference on the descriptor until the operation
// completed, so a concurrent Close of f waits rather than letting the
// number be reused.
func syncFile(f *os.File, ring *uring.Ring, hook func(path string) error) error {
	if err := hook(f.Name()); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return ring.Fdatasync(f)
}

// Poll hands a finished fdatasync to the goroutine waiting for it, if one
// finished. The journal's callers call it on their way in: when every
// processor is busy, the scheduler would otherwise notice the completion
// only once its run queues drain (internal/uring). It never blocks and
// costs an atomic load or two.
func (j *Journal) Poll() {
	j.rings.commit.Poll()
	j.rings.background.Poll()
}

// openRing sets up a ring for fdatasync, or returns nil (direct
// fdatasync) where io_uring is refused.
func openRing() *uring.Ring {
	r, err := uring.New()
	if err != nil {
		return nil
	}
	return r
}

// Written is the index of the last record written, synced or not.
func (j *Journal) Written() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.written
}

// recoverLocked discards the wal handle and cuts the files back to the last
// acknowledged record: whatever a failed batch left on disk (whole records
// included, since their fsync failed or never ran) must not reappear on the
// next open with revisions the memory never applied.
//
// wmu, mu and rmMu are held: a Reclaim unlinking meanwhile would leave the
// listing below, and tidwall/wal's, naming files that are gone.
func (j *Journal) recoverLocked() error {
	j.epoch++
	j.written = j.last
	j.closeSyncFileLocked()
	if j.log != nil {
		j.log.Close()
		j.log = nil
	}
	if err := finishTruncation(j.dir); err != nil {
		return err
	}
	segs, err := ListSegments(j.dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		switch {
		case s.Start > j.last+1:
			if err := os.Remove(s.Path); err != nil {
				return err
			}
		case s.Start == j.last+1:
			if err := disk.Truncate(s.Path, 0); err != nil {
				return err
			}
		default:
			// Only the segment holding j.last can have bytes after it.
			if next := nextStart(segs, s.Start); next != 0 && next <= j.last+1 {
				continue
			}
			data, err := os.ReadFile(s.Path)
			if err != nil {
				return err
			}
			want := int(j.last - s.Start + 1)
			var end int64
			res, _ := scan(data, j.opts.Limits, func(i int, off int64, r *Record) error {
				if i == want {
					return errStop
				}
				return nil
			})
			end = res.end
			if res.count < want {
				return &CorruptError{Segment: s.Name(), Offset: res.end, Index: s.Start + uint64(res.count),
					Reason: fmt.Sprintf("acknowledged record missing while recovering (segment holds %d of %d)", res.count, want)}
			}
			if end < int64(len(data)) {
				if err := disk.Truncate(s.Path, end); err != nil {
					return err
				}
			}
		}
	}
	// openLog fsyncs the directory, making the removals durable.
	if err := j.openLog(); err != nil {
		return err
	}
	if j.log != nil {
		if last, _ := j.log.LastIndex(); last != j.last {
			j.log.Close()
			j.log = nil
			return fmt.Errorf("journal reopened at index %d, expected %d", last, j.last)
		}
	}
	j.broken, j.reclaimed = nil, false
	return nil
}

var errStop = errors.New("stop")

func nextStart(segs []Segment, start uint64) uint64 {
	for _, s := range segs {
		if s.Start > start {
			return s.Start
		}
	}
	return 0
}

// Replay reads every record with index >= from, in order, validating the
// framing of each and the index continuity across segment files, and calls
// fn. An error from fn, or any damage, stops the replay and comes back as a
// *CorruptError naming the journal index, segment and offset.
func (j *Journal) Replay(from uint64, fn func(index uint64, rec *Record) error) error {
	j.mu.Lock()
	last := j.last
	j.mu.Unlock()
	return ReplayDir(j.dir, from, last, j.opts.Limits, fn)
}

// ReplayDir is Replay on a journal directory that is not open, for tools.
// last is the index the replay must reach; pass 0 to accept whatever the
// files hold (a torn tail is then reported as corruption, since nothing here
// may cut it).
func ReplayDir(dir string, from, last uint64, lim Limits, fn func(index uint64, rec *Record) error) error {
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	segs, err := ListSegments(dir)
	if err != nil {
		return &StorageError{Op: "replay", Err: err}
	}
	for i, s := range segs {
		next := uint64(0)
		if i+1 < len(segs) {
			next = segs[i+1].Start
			if next <= s.Start {
				return &CorruptError{Segment: s.Name(), Index: s.Start, Reason: "segment start indexes are not increasing"}
			}
			if next <= from {
				continue
			}
		}
		data, err := os.ReadFile(s.Path)
		if err != nil {
			return &StorageError{Op: "replay", Err: fmt.Errorf("read segment %s: %w", s.Name(), err)}
		}
		res, err := scan(data, lim, func(k int, off int64, rec *Record) error {
			idx := s.Start + uint64(k)
			if idx < from {
				return nil
			}
			if err := fn(idx, rec); err != nil {
				return &CorruptError{Segment: s.Name(), Offset: off, Index: idx, Reason: err.Error(), Err: err}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if res.bad != nil {
			return &CorruptError{Segment: s.Name(), Offset: res.bad.offset, Index: s.Start + uint64(res.count), Reason: res.bad.reason}
		}
		if res.zeros > 0 && next != 0 {
			// Pre-writing never passes the entry that seals a segment.
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: s.Start + uint64(res.count),
				Reason: fmt.Sprintf("sealed segment ends in %d zero bytes (empty entries)", res.zeros)}
		}
		end := s.Start + uint64(res.count)
		if next != 0 && end != next {
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: end,
				Reason: fmt.Sprintf("segment holds records up to index %d but the next segment starts at %d (missing or duplicated segment)", end-1, next)}
		}
		if next == 0 && last != 0 && end-1 != last {
			return &CorruptError{Segment: s.Name(), Offset: res.end, Index: end,
				Reason: fmt.Sprintf("journal ends at index %d, expected %d", end-1, last)}
		}
	}
	return nil
}

// TruncateFront removes every record before index (which must be at most
// LastIndex()+1), so the journal then starts at index. The store calls it
// only for records a durable checkpoint already covers.
// The directory changes are durable when it returns.
func (j *Journal) TruncateFront(index uint64) error {
	defer j.lockAll()()
	if j.closed {
		return ErrClosed
	}
	if index <= j.first {
		return nil
	}
	if index > j.last+1 {
		return fmt.Errorf("truncate front to index %d: beyond last index %d", index, j.last)
	}
	if j.broken != nil || j.reclaimed {
		// After Reclaim, reopening is how tidwall/wal relearns which
		// segments exist (a recovery cuts back to the last acknowledged
		// record; callers truncate with no write in flight).
		if err := j.recoverLocked(); err != nil {
			return &StorageError{Op: "recover", Err: err}
		}
	}
	err := j.log.TruncateFront(index)
	if err == nil {
		err = disk.SyncDir(j.dir)
	}
	if err != nil {
		j.broken = err
		return &StorageError{Op: "truncate front", Index: index, Err: j.recoverAfter(err)}
	}
	j.first = index
	if index >= j.tailStart {
		// tidwall/wal rewrote the tail from index on (records only, no
		// pre-written zeros) under the name of index.
		j.closeSyncFileLocked()
		if segs, err := ListSegments(j.dir); err == nil && len(segs) > 0 {
			j.tailStart, j.tailBytes = segs[len(segs)-1].Start, segs[len(segs)-1].Size
		}
		j.tailChangedLocked()
		j.kickPrewriterLocked()
	}
	return nil
}

// Reclaim frees the segment files that hold only records before index,
// the first record the caller still needs: every sealed segment whose
// successor starts at or before index is removed, oldest first, so a crash
// part way leaves a journal that merely starts earlier. It works on the
// files alone and never calls tidwall/wal's TruncateFront, which rewrites
// the segment holding the new first record through a new file and an
// fsync while holding the lock every write takes: a reclaim after each
// checkpoint would stall commits for that long. Removing whole files takes
// none of the locks commits take (see Journal). tidwall/wal's own list of
// segments then names files that are gone; it reads that list only for
// Read (never used) and TruncateFront, so TruncateFront reopens the Log
// first. The directory is not fsynced: if a crash undoes a removal, the
// journal starts earlier, which checkpoints make harmless. It does nothing
// when no whole segment can be freed.
func (j *Journal) Reclaim(index uint64) error {
	j.mu.Lock()
	closed, last, tailStart := j.closed, j.last, j.tailStart
	j.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if index > last+1 {
		return fmt.Errorf("reclaim to index %d: beyond last index %d", index, last)
	}
	// The directory is read under no lock: a segment below the tail
	// segment is sealed, and only what holds wmu changes sealed files.
	// Holding mu here stalled every Sync's acknowledgement behind a
	// directory listing (at 127 writers, most of the wait on mu).
	segs, err := ListSegments(j.dir)
	if err != nil {
		return &StorageError{Op: "reclaim", Err: err}
	}
	n := 0
	for n+1 < len(segs) && segs[n+1].Start <= index && segs[n].Start < tailStart {
		n++
	}
	if n == 0 {
		return nil
	}
	// Only rmMu across the unlinks (see Journal): a Write, a Sync and the
	// pre-writer go on meanwhile; what lists the segments to act on them
	// waits. mu is never taken under rmMu, so the new first index is
	// recorded once the files are gone.
	j.rmMu.Lock()
	if j.rmClosed {
		j.rmMu.Unlock()
		return ErrClosed
	}
	removed, err := removeSegments(segs[:n])
	j.rmMu.Unlock()
	if removed > 0 {
		j.mu.Lock()
		j.first = max(j.first, segs[removed].Start)
		j.reclaimed = true
		j.mu.Unlock()
	}
	return err
}

// removeSegmentFile unlinks one segment file for removeSegments; a
// variable so tests can hold it (a slow file system, on demand).
var removeSegmentFile = os.Remove

// removeSegments unlinks segs, oldest first, so a crash part way leaves a
// journal that merely starts earlier. It returns how many are gone; a
// segment already gone (a TruncateFront since the listing) counts.
func removeSegments(segs []Segment) (int, error) {
	for i, seg := range segs {
		if err := removeSegmentFile(seg.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return i, &StorageError{Op: "reclaim", Index: seg.Start, Err: err}
		}
	}
	return len(segs), nil
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

// Close flushes and closes the journal. Later calls return ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.closed = true
	j.mu.Unlock()
	j.stopPrewriter()
	j.floorWG.Wait()
	// A Write that began before closed was set finishes its batch first,
	// and a Reclaim its unlinks.
	defer j.lockAll()()
	j.rmClosed = true
	j.closeSyncFileLocked()
	err := j.closeFloor(j.last)
	if j.log == nil {
		return err
	}
	err = errors.Join(err, j.log.Close())
	j.log = nil
	if j.broken == nil {
		// Leave records only: the next open then needs no trim. (After a
		// failure the next open's repair cuts everything after j.last.)
		err = errors.Join(err, j.trimTailLocked())
	}
	j.tailChangedLocked()
	j.rings.commit.Close()
	j.rings.background.Close()
	return err
}

// CreateEmpty makes dir an empty journal whose first record will get index
// next, as a store restored from a checkpoint at index next-1 needs. dir
// must not hold segments already.
func CreateEmpty(dir string, next uint64) error {
	if next == 0 {
		next = 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &StorageError{Op: "create journal", Err: err}
	}
	if segs, err := ListSegments(dir); err != nil {
		return &StorageError{Op: "create journal", Err: err}
	} else if len(segs) > 0 {
		return &StorageError{Op: "create journal", Err: fmt.Errorf("%s already holds %d segments", dir, len(segs))}
	}
	f, err := os.OpenFile(filepath.Join(dir, segmentName(next)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = disk.SyncDir(dir)
	}
	if err == nil {
		err = disk.SyncDir(filepath.Dir(dir))
	}
	if err != nil {
		return &StorageError{Op: "create journal", Err: err}
	}
	// Records up to next-1 live in the image the journal continues.
	return SetFloor(dir, next-1)
}

// writeBatch hands a batch to tidwall/wal. A variable so a test can hold a
// Write in the middle of its batch (holding wmu, not mu).
var writeBatch = (*wal.Log).WriteBatch

// syncSegmentDir makes a segment file that an append just created durable.
// A variable so a test can count that every new segment gets one.
var syncSegmentDir = disk.SyncDir
