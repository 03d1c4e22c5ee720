package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

const verifyAbout = `Checks a stopped store's files without changing them: every checkpoint
(decoded within the bounds, then every bound and identifier rule on the image, then every document
against its schema and the content guard); every journal record's framing and CRC-32C in every
segment, going on past damage so that each problem is reported, not just the first; index continuity
across segments; a semantic replay from the newest checkpoint that loads (revision continuity,
identifiers, schema and owner, every bound, and every PUT document from there on validated against its
schema and the content guard, as the store does when it opens); and that the journal continues that
checkpoint. Each problem names the file, byte
offset, journal index and reason. A torn final record of the last segment is REPAIRABLE (kpjournal
repair cuts it); anything else is CORRUPTION. Overdue leases are listed as notes: the store purges them
when it opens. Pass the bounds the store runs with if they differ from the defaults. Throughput is
printed on stderr.

On a cluster node (the directory holds raft-stable) it checks the raft log instead: every entry's
framing and CRC-32C, index continuity, terms never decreasing, every store command decoding, the
persisted commit floor (the ACKNOWLEDGED marker within the log), raft-stable's checksum and a current
term no older than the log's, and each snapshot in raft-snapshots/ (its size and CRC-64, the image
loading as a backup does, its index and term against meta.json and the log, and no gap between the
newest snapshot and the log's first entry); each problem names the file, offset and raft index.`

func runVerify(args []string, stdout, stderr io.Writer) int {
	c := newCLI("verify", "--dir DIR [flags]", verifyAbout, []string{
		"kpjournal verify --dir /var/lib/keeppeek",
		"kpjournal verify --dir /backup/copy --json --max-entries-per-namespace 256",
	}, stdout, stderr)
	c.clusterOK = true
	c.dirFlag()
	c.jsonFlag()
	c.limitFlags()
	maxProblems := c.FS.Int("max-problems", 100, "list at most this many problems (0: all); the count is always exact")
	workers := c.FS.Int("workers", runtime.GOMAXPROCS(0), "goroutines reading and checking segments")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	if isClusterNode(c.root()) {
		return verifyCluster(c, stdout)
	}
	chk := c.chk
	v := &verifier{c: c, chk: chk, workers: *workers}
	rep, err := v.run()
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	fmt.Fprintf(stderr, "kpjournal verify: %d records, %.1f MB in %v: %.0f records/s, %.1f MB/s\n",
		rep.Throughput.Records, float64(rep.Throughput.Bytes)/1e6, time.Duration(rep.Throughput.Seconds*float64(time.Second)).Round(time.Millisecond),
		rep.Throughput.RecordsPerSecond, rep.Throughput.MBPerSecond)
	return c.finish(stdout, rep, func(w io.Writer) error { return rep.print(w, *maxProblems) }, len(rep.Problems))
}

// verifyReport is what verify found; it is also the --json document.
type verifyReport struct {
	Store       string         `json:"store"`
	OK          bool           `json:"ok"`
	Checkpoints []ckptVerdict  `json:"checkpoints"`
	Journal     journalSummary `json:"journal"`
	Replay      replaySummary  `json:"replay"`
	Problems    []problem      `json:"problems"`
	Notes       []string       `json:"notes"`
	Overdue     []lease        `json:"overdue_leases"`
	Throughput  throughput     `json:"throughput"`
}

type ckptVerdict struct {
	Name  string      `json:"name"`
	Index uint64      `json:"index"`
	Size  int64       `json:"size"`
	Error opt[string] `json:"error"` // why it does not load; null when it does
	Base  bool        `json:"replay_base"`
}

type journalSummary struct {
	Segments   int    `json:"segments"`
	FirstIndex uint64 `json:"first_index"` // 0 when the journal has no segment
	LastIndex  uint64 `json:"last_index"`  // last valid record (first_index-1 when empty)
	Records    int    `json:"records"`     // valid records
	Bytes      int64  `json:"bytes"`
}

type replaySummary struct {
	FromIndex  uint64      `json:"from_index"`
	Records    int         `json:"records"`
	StoppedAt  opt[uint64] `json:"stopped_at"` // index where the replay had to stop; null when it did not
	Entries    int         `json:"entries"`
	Bytes      int64       `json:"bytes"`
	Namespaces int         `json:"namespaces"`
}

type throughput struct {
	Seconds          float64 `json:"seconds"`
	Records          int     `json:"records"`
	Bytes            int64   `json:"bytes"`
	RecordsPerSecond float64 `json:"records_per_second"`
	MBPerSecond      float64 `json:"mb_per_second"`
}

type verifier struct {
	c       *cli
	chk     *recovery.Checker
	workers int
	rep     verifyReport

	// semantic replay
	rp        *tally
	frame     journal.Frame // reused for every record: the replay copies nothing
	from      uint64        // first index the replay applies
	replaying bool
	lim       journal.Limits
	floor     journal.Floor // the acknowledged floor, as Open judges the tail
	segNo     int           // segments taken in so far
}

func (v *verifier) problem(sev, file string, off int64, idx uint64, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, problem{Severity: sev, File: file, Offset: off, Index: idx, Reason: fmt.Sprintf(format, args...)})
}

// stopReplay ends the semantic replay at index idx.
func (v *verifier) stopReplay(idx uint64, why string) {
	if !v.replaying {
		return
	}
	v.replaying = false
	v.rep.Replay.StoppedAt = some(idx)
	v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("semantic replay stopped at index %s: %s; records after it were checked for framing and documents only", indexText(idx), why))
}

func (v *verifier) run() (*verifyReport, error) {
	start := time.Now()
	root := v.c.root()
	v.rep.Store = root
	ckpts, err := listCheckpoints(root)
	if err != nil {
		return nil, err
	}
	segs, err := listSegments(v.c.journalDir())
	if err != nil {
		return nil, err
	}
	total := journalSize(segs)
	for _, ck := range ckpts {
		total += ck.Size
	}
	prog := startProgress(v.c.Stderr, "verify", total)
	defer prog.finish()

	// Checkpoints: every one is decoded and checked; the newest that loads
	// is where the semantic replay starts, as at open.
	var base *ckpt
	for i := len(ckpts) - 1; i >= 0; i-- {
		ck := ckpts[i]
		if ck.load(v.chk); ck.base() && base == nil {
			base = ck
		}
		prog.add(ck.Size)
	}
	for i := len(ckpts) - 1; i >= 0; i-- {
		if ck := ckpts[i]; ck.Err != nil {
			sev, why := ckptSeverity(ck, base, segs)
			v.problem(sev, ck.Name(), ck.Offset, ck.Index, "checkpoint does not load: %v%s", ck.Err, why)
		}
	}
	floor, markerErr, err := ackFloor(root, v.c.journalDir())
	if err != nil {
		return nil, err
	}
	v.floor = floor
	if markerErr != nil {
		v.problem(repairable, "journal/"+journal.FloorFile, 0, 0, "%v: it is no evidence of what was acknowledged; the store rewrites it when it opens", markerErr)
	}
	for _, ck := range ckpts {
		cv := ckptVerdict{Name: ck.Name(), Index: ck.Index, Size: ck.Size, Base: ck == base}
		if ck.Err != nil {
			cv.Error = some(ck.Err.Error())
		}
		v.rep.Checkpoints = append(v.rep.Checkpoints, cv)
	}
	v.from = 1
	if base != nil {
		v.from = base.Index + 1
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("semantic replay starts from %s (index %d)", base.Name(), base.Index))
	}
	var baseView *materialize.View
	if base != nil {
		baseView = base.View
	}
	v.rp = newTally(v.chk, baseView)
	v.rep.Replay.FromIndex = v.from
	v.replaying = true
	v.markers()

	js := &v.rep.Journal
	js.Segments, js.Bytes = len(segs), journalSize(segs)
	if len(segs) > 0 {
		js.FirstIndex = segs[0].Start
		js.LastIndex = segs[0].Start - 1
		if segs[0].Start > v.from {
			if base != nil {
				v.problem(corruption, segFile(segs[0].Name()), 0, v.from, "checkpoint %s ends at index %d but the journal starts at %d: records %d..%d are missing",
					base.Name(), base.Index, segs[0].Start, v.from, segs[0].Start-1)
			} else {
				v.problem(corruption, segFile(segs[0].Name()), 0, 1, "journal starts at index %d but no checkpoint covers indexes before it", segs[0].Start)
			}
			v.stopReplay(v.from, "records before the journal's first segment are missing")
		}
	} else if base != nil && base.Index > 0 {
		v.problem(corruption, "journal", -1, base.Index+1, "the journal directory holds no segment, so nothing continues checkpoint %s at index %d", base.Name(), base.Index)
	}

	v.lim = v.chk.JournalLimits()
	lim := v.lim
	docs := make([]docChecker, max(v.workers, 1))
	var expect uint64 // index the next segment must start at; 0 when unknown
	var prev *journal.Segment
	err = scanJournal(segs, lim, v.workers,
		func(w int, s *segmentScan, it *item, f *journal.Frame) { docs[w].check(v.chk, v.from, s, it, f) },
		func(s *segmentScan) error {
			v.segment(s, segs, prev, expect)
			expect = s.next
			seg := s.seg
			prev = &seg
			prog.add(s.seg.Size)
			return nil
		})
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if d.failed {
			v.rep.Notes = append(v.rep.Notes, "documents the rules refuse: the store refuses to open; "+recovery.MigrationHint)
			break
		}
	}

	// Records up to the acknowledged floor must all be there (an emptied or
	// shortened tail segment reads as a shorter journal): Open's own check.
	belowFloor := false
	if len(segs) > 0 {
		if err := journal.CheckFloor(js.LastIndex, segs[len(segs)-1].Name(), floor); err != nil {
			belowFloor = true
			v.problem(corruption, segFile(segs[len(segs)-1].Name()), -1, js.LastIndex+1, "%s", err.(*journal.CorruptError).Reason)
		}
	} else if floor.Index > 0 {
		v.problem(corruption, "journal", -1, 1, "the journal directory holds no segment but records up to index %d were acknowledged (%s)", floor.Index, floor.Source)
	}
	// The newest loadable checkpoint must lie within the journal's range
	// (said once: the floor check above already covers a newest image).
	if base != nil && len(segs) > 0 && js.LastIndex < base.Index && !belowFloor {
		v.problem(corruption, base.Name(), -1, base.Index, "checkpoint is at index %d but the journal ends at %d", base.Index, js.LastIndex)
	}
	v.rep.Replay.Entries, v.rep.Replay.Bytes, v.rep.Replay.Namespaces = v.rp.totals()
	v.rep.Overdue = v.rp.overdue(time.Now().UnixMilli())
	for _, l := range v.rep.Overdue {
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("lease %s/%s expired at %s: the store purges it (journaling an EXPIRE) when it opens", l.Namespace, l.Key, l.Expires))
	}
	v.rep.OK = len(v.rep.Problems) == 0
	el := time.Since(start).Seconds()
	tp := &v.rep.Throughput
	tp.Seconds, tp.Records, tp.Bytes = el, js.Records, total
	if el > 0 {
		tp.RecordsPerSecond, tp.MBPerSecond = float64(js.Records)/el, float64(total)/1e6/el
	}
	if v.rep.Problems == nil {
		v.rep.Problems = []problem{}
	}
	if v.rep.Notes == nil {
		v.rep.Notes = []string{}
	}
	if v.rep.Overdue == nil {
		v.rep.Overdue = []lease{}
	}
	if v.rep.Checkpoints == nil {
		v.rep.Checkpoints = []ckptVerdict{}
	}
	return &v.rep, nil
}

// segment takes in one scanned segment, in index order: continuity with
// the previous one, its damage, its documents, and the semantic replay of
// its records.
func (v *verifier) segment(s *segmentScan, segs []journal.Segment, prev *journal.Segment, expect uint64) {
	js := &v.rep.Journal
	name := segFile(s.seg.Name())
	k := v.segNo
	v.segNo++
	isLast := k == len(segs)-1
	var nextStart uint64
	if !isLast {
		nextStart = segs[k+1].Start
	}
	if prev != nil && expect != 0 && s.seg.Start != expect {
		v.problem(corruption, segFile(prev.Name()), prev.Size, expect,
			"segment holds records up to index %d but the next segment, %s, starts at %d (missing or duplicated segment)", expect-1, s.seg.Name(), s.seg.Start)
		if s.seg.Start > expect && s.seg.Start > v.from {
			v.stopReplay(expect, "records are missing between segments")
		}
	}
	js.Records += s.records
	// Problems come out in file order: damage and documents by offset.
	di, pi := 0, 0
	for _, it := range s.items {
		for di < len(s.damage) && s.damage[di].Offset < it.offset {
			v.damage(s, name, isLast, di)
			di++
		}
		for pi < len(s.docProblems) && s.docProblems[pi].Offset <= it.offset {
			v.rep.Problems = append(v.rep.Problems, s.docProblems[pi])
			pi++
		}
		idx := it.index
		if idx != 0 && idx > js.LastIndex {
			js.LastIndex = idx
		}
		if !v.replaying || (idx != 0 && idx < v.from) || (idx == 0 && nextStart != 0 && nextStart <= v.from) {
			continue
		}
		if idx == 0 {
			v.stopReplay(0, "record indexes are unknown after damage")
			continue
		}
		f := &v.frame
		s.frame(&it, v.lim, f)
		ok, prob := v.rp.apply(f)
		if prob != nil {
			v.problem(corruption, name, it.offset, idx, "replay: %v", prob)
		}
		if !ok {
			v.stopReplay(idx, "the record cannot follow the state before it")
			continue
		}
		v.rep.Replay.Records++
	}
	for ; di < len(s.damage); di++ {
		v.damage(s, name, isLast, di)
	}
	v.rep.Problems = append(v.rep.Problems, s.docProblems[pi:]...)
}

func (v *verifier) damage(s *segmentScan, name string, isLast bool, i int) {
	d := s.damage[i]
	if s.prewrittenTail(i, isLast, v.floor) {
		return
	}
	torn, reason := s.torn(i, isLast, v.floor, v.lim)
	if torn {
		v.problem(repairable, name, d.Offset, d.Index, "%s: torn final record, never acknowledged (kpjournal repair cuts it)", reason)
		return
	}
	v.problem(corruption, name, d.Offset, d.Index, "%s", reason)
	// Damage before the replay start does not stop it (records after a
	// resync, whose indexes are unknown, stop it in segment()).
	if d.Index == 0 || d.Index >= v.from {
		v.stopReplay(d.Index, "the record is damaged")
	}
}

// markers notes truncation markers tidwall/wal leaves when a crash
// interrupts a truncation; the store finishes the truncation at open.
func (v *verifier) markers() {
	names, err := journal.TruncationMarkers(v.c.journalDir())
	if err != nil {
		return
	}
	for _, n := range names {
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s: an interrupted truncation; the store finishes it when it opens", filepath.Join("journal", n)))
	}
}

// docChecker validates PUT documents on one worker, reusing one record so
// that validation allocates nothing of its own. It checks the records the
// store replays (from the replay base on), as Open does.
type docChecker struct {
	rec     journal.Record
	schemas map[string]string
	failed  bool // a document failed
}

func (d *docChecker) check(chk *recovery.Checker, from uint64, s *segmentScan, it *item, f *journal.Frame) {
	if f.Kind != journal.KindPut || it.index != 0 && it.index < from {
		return // no document, or one the store never reads again: the replay starts after it
	}
	if d.schemas == nil {
		d.schemas = make(map[string]string)
	}
	name, ok := d.schemas[string(f.Schema)]
	if !ok {
		name = string(f.Schema)
		if len(d.schemas) < 64 {
			d.schemas[name] = name
		}
	}
	d.rec.Kind, d.rec.Schema, d.rec.Document = journal.KindPut, name, f.Document
	if err := chk.CheckDocument(it.index, &d.rec); err != nil {
		// Again with the whole record, so the problem is Open's refusal
		// word for word, naming the entry (a copy made only on failure).
		err = chk.CheckDocument(it.index, f.Record())
		s.docProblems = append(s.docProblems, problem{Severity: corruption, File: segFile(s.seg.Name()), Offset: it.offset, Index: it.index,
			Reason: err.Error()})
		d.failed = true
	}
	d.rec.Document = nil
}

func (r *verifyReport) print(w io.Writer, maxProblems int) error {
	fmt.Fprintf(w, "store %s\n\n", r.Store)
	t := newTable(w, "CHECKPOINT", "INDEX", "SIZE", "STATUS")
	for _, c := range r.Checkpoints {
		status := "ok"
		if c.Error.ok {
			status = "DOES NOT LOAD"
		} else if c.Base {
			status = "ok, replay base"
		}
		t.row(c.Name, c.Index, c.Size, status)
	}
	if len(r.Checkpoints) == 0 {
		t.row("(none)", "-", "-", "-")
	}
	t.flush()
	js := r.Journal
	fmt.Fprintf(w, "\njournal: %d segments, %d bytes, %d valid records", js.Segments, js.Bytes, js.Records)
	if js.Segments > 0 {
		fmt.Fprintf(w, ", indexes %s", indexRange(js.FirstIndex, js.LastIndex))
	}
	rp := r.Replay
	fmt.Fprintf(w, "\nreplay: %d records from index %d; state: %d entries, %d bytes, %d namespaces holding entries\n",
		rp.Records, rp.FromIndex, rp.Entries, rp.Bytes, rp.Namespaces)
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range r.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	if len(r.Problems) == 0 {
		_, err := fmt.Fprintln(w, "\nOK: no problems found")
		return err
	}
	counts := map[string]int{}
	for _, p := range r.Problems {
		counts[p.Severity]++
	}
	fmt.Fprintf(w, "\n%d problems (%d CORRUPTION, %d REPAIRABLE):\n", len(r.Problems), counts[corruption], counts[repairable])
	if err := problemTable(w, r.Problems, maxProblems); err != nil {
		return err
	}
	if counts[corruption] == 0 {
		_, err := fmt.Fprintln(w, "\nOnly a torn tail: kpjournal repair --dir DIR cuts it (the store would cut it at open too).")
		return err
	}
	return nil
}
