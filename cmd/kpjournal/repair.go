package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
)

const repairAbout = `Repairs a stopped store's journal; it writes. Without --truncate-after it cuts a torn
final record (the last segment ends inside a record, or with one failing its checksum, and no valid
record follows): it opens the journal as the store does, which keeps a copy of the damaged segment in
quarantine/, cuts the segment back to its last whole record and fsyncs it; the cut record was never
acknowledged. With --truncate-after INDEX it drops every record after INDEX, for damage in the middle of
the journal: it first prints what would be lost (records, index range and revisions per namespace),
then keeps a copy of the segment holding INDEX in quarantine/ and cuts it after record INDEX, moves every
later segment and every checkpoint beyond INDEX into quarantine/, and fsyncs the files and directories.
Acknowledged writes after INDEX are lost, so it asks for confirmation on a terminal and requires --yes
otherwise. The store must not be running.`

func runRepair(args []string, stdout, stderr io.Writer) int {
	c := newCLI("repair", "--dir DIR [--truncate-after INDEX] [--yes] [flags]", repairAbout, []string{
		"kpjournal repair --dir /var/lib/keeppeek",
		"kpjournal repair --dir /var/lib/keeppeek --truncate-after 1199 --yes",
	}, stdout, stderr)
	c.dirFlag()
	after := c.FS.Int64("truncate-after", -1, "drop every record after this journal index (-1: only cut a torn final record)")
	yes := c.FS.Bool("yes", false, "do not ask for confirmation (required when stdin is not a terminal)")
	c.jsonFlag()
	c.limitFlags()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *after < -1 {
		return c.UsageError("--truncate-after %d is negative", *after)
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	// Hold the LOCK while writing, so the store cannot start meanwhile.
	lock, err := disk.LockFile(filepath.Join(c.root(), "LOCK"))
	if err != nil {
		return c.Fail(exitUsage, "%v: stop the media server first", err)
	}
	defer lock.Release()
	chk := c.chk
	r := &repairer{c: c, lim: chk.JournalLimits(), yes: *yes}
	if *after >= 0 {
		return r.truncateAfter(uint64(*after))
	}
	return r.cutTail()
}

type repairer struct {
	c   *cli
	lim journal.Limits
	yes bool
}

// confirm asks before writing: on a terminal it asks, elsewhere it needs --yes.
func (r *repairer) confirm(question string) int {
	if r.yes {
		return -1
	}
	if !isTerminal(os.Stdin) {
		return r.c.Fail(exitUsage, "refusing to change the store without --yes (stdin is not a terminal to ask on)")
	}
	fmt.Fprintf(r.c.Stderr, "%s Type yes to continue: ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return r.c.Fail(exitUsage, "not confirmed; nothing changed")
	}
	return -1
}

// tailCutReport is what repair without --truncate-after plans and does.
type tailCutReport struct {
	Store string `json:"store"`
	// Plan is the torn final record to cut; null when there is none.
	Plan    opt[problem]     `json:"plan"`
	Applied bool             `json:"applied"` // false: refused or not confirmed, nothing changed
	Cut     *journal.TailCut `json:"cut"`     // what was cut; null when nothing was
	// Images that do not load, to move to quarantine/ (names), and where
	// they went once moved.
	PlanCheckpoints  []string    `json:"damaged_checkpoints_to_move"`
	MovedCheckpoints []string    `json:"damaged_checkpoints_moved"`
	Nothing          opt[string] `json:"nothing_to_do"`
	Damage           []problem   `json:"other_damage"`
	Markers          []string    `json:"finished_truncations"`
}

// cutTail cuts a torn final record with journal.Open, the store's own repair.
func (r *repairer) cutTail() int {
	c := r.c
	segs, err := listSegments(c.journalDir())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	rep := tailCutReport{Store: c.root(), Damage: []problem{}, PlanCheckpoints: []string{}, MovedCheckpoints: []string{}}
	floor, _, err := ackFloor(c.root(), c.journalDir())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	var torn *problem
	prog := startProgress(c.Stderr, "scan", journalSize(segs))
	err = walkJournal(segs, r.lim, floor, 1, 0, prog, func(journal.Segment, *item, *journal.Frame) error { return nil }, func(p problem, isTorn bool) error {
		if isTorn {
			torn = &p
		} else {
			rep.Damage = append(rep.Damage, p)
		}
		return nil
	})
	prog.finish()
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if rep.Markers, err = journal.TruncationMarkers(c.journalDir()); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	damagedCkpts, code := r.damagedCheckpoints(segs)
	if code >= 0 {
		return code
	}
	if len(rep.Damage) > 0 {
		first := rep.Damage[0]
		if c.json {
			writeJSON(c.Stdout, rep)
		}
		for _, p := range rep.Damage {
			fmt.Fprintf(c.Stderr, "kpjournal repair: %s\n", p)
		}
		hint := ""
		if first.Index > 1 {
			hint = fmt.Sprintf(" (--truncate-after %d drops everything from the first damaged record on)", first.Index-1)
		}
		return c.Fail(exitProblems, "the journal is damaged before its end, which is not a torn tail: nothing changed. "+
			"Decide what to drop with kpjournal verify and dump, then use --truncate-after%s", hint)
	}
	if torn == nil && len(rep.Markers) == 0 && len(damagedCkpts) == 0 {
		rep.Nothing = some("the journal ends with a whole record and every checkpoint loads: nothing to repair")
		return r.report(rep, exitOK)
	}
	// The plan, then one confirmation, then the changes: a declined or
	// refused repair changes nothing.
	for _, ck := range damagedCkpts {
		rep.PlanCheckpoints = append(rep.PlanCheckpoints, ck.Name())
		if !c.json {
			fmt.Fprintf(c.Stdout, "will move checkpoint %s to quarantine/: it does not load (%v)\n", ck.Name(), ck.Err)
		}
	}
	if torn != nil {
		// The plan goes where the result goes: stdout, or the JSON report.
		rep.Plan = some(*torn)
		if !c.json {
			fmt.Fprintf(c.Stdout, "will cut %s at offset %s (index %s): %s\n", torn.File, offsetText(torn.Offset), indexText(torn.Index), torn.Reason)
		}
	}
	if torn != nil || len(damagedCkpts) > 0 {
		if code := r.confirm("Repair as listed (a torn record was never acknowledged; the store opens without a damaged image)?"); code >= 0 {
			if c.json {
				writeJSON(c.Stdout, rep)
			}
			return code
		}
	}
	// The images' names are evidence of acknowledged records even when
	// their bodies are damaged: judge the tail with them still in place.
	ckFloor, err := recovery.CheckpointFloor(c.root())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if len(damagedCkpts) > 0 {
		moved, err := r.moveAside(damagedCkpts)
		rep.MovedCheckpoints = moved
		if err != nil {
			return c.Fail(exitUsage, "move damaged checkpoints: %v", err)
		}
	}
	j, cut, err := journal.Open(c.journalDir(), journal.Options{Limits: r.lim, QuarantineDir: c.quarantineDir(), Floor: ckFloor})
	if err != nil {
		return c.Fail(exitProblems, "%v; nothing was cut", err)
	}
	if err := j.Close(); err != nil {
		return c.Fail(exitUsage, "close journal: %v", err)
	}
	rep.Cut, rep.Applied = cut, true
	return r.report(rep, exitOK)
}

// damagedCheckpoints lists the images that do not load. Moving them aside
// is a repair only when the store opens without them (another image loads,
// or the journal holds every record from index 1, and no intact image the
// store would start from holds a document the rules refuse); otherwise
// repair refuses, changing nothing, and says what will help.
func (r *repairer) damagedCheckpoints(segs []journal.Segment) ([]*ckpt, int) {
	c := r.c
	ckpts, err := listCheckpoints(c.root())
	if err != nil {
		return nil, c.Fail(exitUsage, "%v", err)
	}
	var damaged []*ckpt
	var base *ckpt
	for i := len(ckpts) - 1; i >= 0; i-- {
		if ckpts[i].load(c.chk) != nil {
			damaged = append(damaged, ckpts[i])
		} else if base == nil {
			base = ckpts[i]
		}
	}
	for _, ck := range damaged {
		if sev, why := ckptSeverity(ck, base, segs); sev == corruption {
			return nil, c.Fail(exitProblems, "checkpoint %s does not load%s; nothing changed", ck.Name(), why)
		}
	}
	return damaged, -1
}

// moveAside moves checkpoint images into quarantine/, durably, and returns
// where they went.
func (r *repairer) moveAside(cks []*ckpt) ([]string, error) {
	q := r.c.quarantineDir()
	if err := os.MkdirAll(q, 0o755); err != nil {
		return nil, err
	}
	var moved []string
	for _, ck := range cks {
		to := filepath.Join(q, fmt.Sprintf("%s.%d.damaged", ck.Name(), time.Now().UnixNano()))
		if err := os.Rename(ck.Path, to); err != nil {
			return moved, err
		}
		moved = append(moved, to)
	}
	if err := disk.SyncDir(q); err != nil {
		return moved, err
	}
	return moved, disk.SyncDir(r.c.root())
}

func (r *repairer) report(rep tailCutReport, code int) int {
	c := r.c
	if c.json {
		if err := writeJSON(c.Stdout, rep); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		return code
	}
	for _, m := range rep.Markers {
		fmt.Fprintf(c.Stdout, "finished an interrupted truncation (%s)\n", m)
	}
	for _, m := range rep.MovedCheckpoints {
		fmt.Fprintf(c.Stdout, "moved a damaged checkpoint to %s\n", m)
	}
	if nothing, ok := rep.Nothing.get(); ok {
		fmt.Fprintln(c.Stdout, nothing)
	}
	if cut := rep.Cut; cut != nil {
		fmt.Fprintf(c.Stdout, "cut segment %s at offset %d: %d bytes of a torn record that would have had index %d (%s)\n",
			cut.Segment, cut.Offset, cut.Bytes, cut.Index, cut.Reason)
		fmt.Fprintf(c.Stdout, "the damaged segment as found is kept at %s\n", cut.SavedAs)
	}
	return code
}

// lossRow is what --truncate-after drops in one namespace.
type lossRow struct {
	Namespace    string `json:"namespace"`
	Records      int    `json:"records"`
	FirstIndex   uint64 `json:"first_index"`
	LastIndex    uint64 `json:"last_index"`
	FromRevision uint64 `json:"from_revision"`
	ToRevision   uint64 `json:"to_revision"`
}

// truncatePlan is what repair --truncate-after plans and, once applied,
// did. Absent values (no record dropped, no segment cut) are null.
type truncatePlan struct {
	Store          string      `json:"store"`
	After          uint64      `json:"after"`
	Applied        bool        `json:"applied"` // false: nothing to drop, or not confirmed
	Records        int         `json:"records_dropped"`
	FirstIndex     opt[uint64] `json:"first_index_dropped"`
	LastIndex      opt[uint64] `json:"last_index_dropped"`
	Damaged        int         `json:"damaged_entries_dropped"`
	Namespaces     []lossRow   `json:"namespaces"`
	Checkpoints    []string    `json:"checkpoints_moved"`
	Segments       []string    `json:"segments_moved"`
	CutSegment     opt[string] `json:"cut_segment"`
	CutOffset      opt[int64]  `json:"cut_offset"`
	Quarantine     []string    `json:"quarantined"`
	segs           []journal.Segment
	cutAt          int   // index into segs of the segment cut (or -1: every segment goes)
	cutSize        int64 // its size after the cut
	createEmptyAt  uint64
	firstDamage    *problem
	found          bool
	lastKnown      uint64
	firstAvailable uint64
}

// truncateAfter drops every record after index after.
func (r *repairer) truncateAfter(after uint64) int {
	c := r.c
	p, code := r.plan(after)
	if code >= 0 {
		return code
	}
	if !c.json {
		r.printPlan(p)
	}
	if p.Records == 0 && p.Damaged == 0 && len(p.Checkpoints) == 0 {
		if c.json {
			writeJSON(c.Stdout, p)
		} else {
			fmt.Fprintf(c.Stdout, "nothing to drop: the journal ends at index %d\n", after)
		}
		return exitOK
	}
	if code := r.confirm(fmt.Sprintf("Drop %d acknowledged records after index %d?", p.Records, after)); code >= 0 {
		if c.json {
			writeJSON(c.Stdout, p)
		}
		return code
	}
	if err := r.apply(p); err != nil {
		return c.Fail(exitUsage, "%v (files already moved are in %s)", err, c.quarantineDir())
	}
	p.Applied = true
	if c.json {
		if err := writeJSON(c.Stdout, p); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		return exitOK
	}
	for _, q := range p.Quarantine {
		fmt.Fprintf(c.Stdout, "kept %s\n", q)
	}
	fmt.Fprintf(c.Stdout, "the journal now ends at index %d; run kpjournal verify to check the result\n", after)
	return exitOK
}

// plan scans the journal and works out what truncating after index after
// drops, refusing what would leave a store that cannot open.
func (r *repairer) plan(after uint64) (*truncatePlan, int) {
	c := r.c
	segs, err := listSegments(c.journalDir())
	if err != nil {
		return nil, c.Fail(exitUsage, "%v", err)
	}
	if len(segs) == 0 {
		return nil, c.Fail(exitUsage, "the journal holds no segment")
	}
	p := &truncatePlan{Store: c.root(), After: after, segs: segs, cutAt: -1, Namespaces: []lossRow{},
		Checkpoints: []string{}, Segments: []string{}, Quarantine: []string{}, firstAvailable: segs[0].Start}
	if after+1 < segs[0].Start {
		return nil, c.Fail(exitUsage, "index %d is before the oldest record available (%d): the journal cannot be cut there", after, segs[0].Start)
	}
	loss := map[string]*lossRow{}
	var expect uint64
	var prev journal.Segment
	i := -1
	var f journal.Frame
	prog := startProgress(c.Stderr, "scan", journalSize(segs))
	defer prog.finish()
	err = scanJournal(segs, r.lim, runtime.GOMAXPROCS(0), nil, func(s *segmentScan) error {
		prog.add(s.seg.Size)
		i++
		if expect != 0 && s.seg.Start != expect && s.seg.Start <= after+1 && p.firstDamage == nil {
			p.firstDamage = &problem{Severity: corruption, File: segFile(prev.Name()), Offset: prev.Size, Index: expect, Reason: "records missing between segments"}
		}
		expect, prev = s.next, s.seg
		di := 0
		for _, it := range s.items {
			for ; di < len(s.damage) && s.damage[di].Offset < it.offset; di++ {
				r.noteDamage(p, s, di)
			}
			switch {
			case it.index != 0 && it.index <= after:
				p.lastKnown = it.index
				if it.index == after {
					p.found, p.cutAt, p.cutSize = true, i, int64(it.to)
				}
			default: // after the cut (an unknown index here means damage before it, refused below)
				s.frame(&it, r.lim, &f)
				row := loss[string(f.Namespace)]
				if row == nil {
					row = &lossRow{Namespace: string(f.Namespace), FirstIndex: it.index, FromRevision: f.Revision}
					loss[row.Namespace] = row
				}
				row.Records++
				row.LastIndex, row.ToRevision = it.index, f.Revision
				p.Records++
				if !p.FirstIndex.ok {
					p.FirstIndex = some(it.index)
				}
				p.LastIndex = some(it.index)
			}
		}
		for ; di < len(s.damage); di++ {
			r.noteDamage(p, s, di)
		}
		return nil
	})
	if err != nil {
		return nil, c.Fail(exitUsage, "%v", err)
	}
	if d := p.firstDamage; d != nil {
		hint := ""
		if d.Index > 0 {
			hint = fmt.Sprintf(": truncate after %d instead", d.Index-1)
		}
		return nil, c.Fail(exitProblems, "damage at index %s (%s, offset %s) lies at or before index %d, so cutting there leaves it in place%s",
			indexText(d.Index), d.File, offsetText(d.Offset), after, hint)
	}
	if !p.found && after+1 != segs[0].Start {
		return nil, c.Fail(exitUsage, "index %d is not a whole record of the journal (its last whole record is %d)", after, p.lastKnown)
	}
	if !p.found {
		p.createEmptyAt = after + 1 // every record goes; the journal restarts empty at after+1
	}
	for k := range segs {
		switch {
		case k == p.cutAt:
			if p.cutSize < segs[k].Size {
				p.CutSegment, p.CutOffset = some(segs[k].Name()), some(p.cutSize)
			}
		case p.cutAt == -1 || k > p.cutAt:
			p.Segments = append(p.Segments, segs[k].Name())
		}
	}
	for _, row := range loss {
		p.Namespaces = append(p.Namespaces, *row)
	}
	sort.Slice(p.Namespaces, func(a, b int) bool { return p.Namespaces[a].Namespace < p.Namespaces[b].Namespace })
	// Checkpoints ahead of the cut would be ahead of the journal; one at
	// or below it that the journal continues must remain, unless the
	// journal starts at 1.
	ckpts, err := listCheckpoints(c.root())
	if err != nil {
		return nil, c.Fail(exitUsage, "%v", err)
	}
	covered := segs[0].Start == 1
	for _, ck := range ckpts {
		if ck.Index > after {
			p.Checkpoints = append(p.Checkpoints, ck.Name())
		} else if ck.Index+1 >= segs[0].Start {
			covered = true
		}
	}
	if !covered {
		return nil, c.Fail(exitUsage, "after the cut no checkpoint at or below index %d would remain that the journal (starting at %d) continues: the store could not open",
			after, segs[0].Start)
	}
	return p, -1
}

func (r *repairer) noteDamage(p *truncatePlan, s *segmentScan, i int) {
	d := s.damage[i]
	known := d.Index != 0 && d.Index <= p.After
	if known || (d.Index == 0 && !p.found) {
		if p.firstDamage == nil {
			p.firstDamage = &problem{Severity: corruption, File: segFile(s.seg.Name()), Offset: d.Offset, Index: d.Index, Reason: d.Reason}
		}
		return
	}
	p.Damaged++
}

func (r *repairer) printPlan(p *truncatePlan) {
	w := r.c.Stdout
	if p.Records > 0 {
		fmt.Fprintf(w, "truncating after index %d drops %d records (indexes %s):\n", p.After, p.Records, indexRange(p.FirstIndex.val, p.LastIndex.val))
		t := newTable(w, "NAMESPACE", "RECORDS", "INDEXES", "REVISIONS")
		for _, n := range p.Namespaces {
			t.row(n.Namespace, n.Records, indexRange(n.FirstIndex, n.LastIndex), fmt.Sprintf("%d..%d", n.FromRevision, n.ToRevision))
		}
		t.flush()
	}
	if p.Damaged > 0 {
		fmt.Fprintf(w, "and %d damaged entries after index %d\n", p.Damaged, p.After)
	}
	if seg, ok := p.CutSegment.get(); ok {
		fmt.Fprintf(w, "segment %s is cut at offset %d (a copy is kept in quarantine/)\n", seg, p.CutOffset.val)
	}
	for _, s := range p.Segments {
		fmt.Fprintf(w, "segment %s moves to quarantine/\n", s)
	}
	for _, ck := range p.Checkpoints {
		fmt.Fprintf(w, "checkpoint %s is ahead of index %d and moves to quarantine/\n", ck, p.After)
	}
}

// apply carries out a plan. Order keeps the store openable at every step a
// crash could interrupt: checkpoints ahead of the cut go first, then whole
// segments from the end backwards (each removal made durable before the
// next), then the cut segment, so the journal is always a prefix of itself.
func (r *repairer) apply(p *truncatePlan) error {
	c := r.c
	q := c.quarantineDir()
	if err := os.MkdirAll(q, 0o755); err != nil {
		return err
	}
	if err := disk.SyncDir(c.root()); err != nil {
		return err
	}
	// The records after the cut are dropped on purpose: lower the
	// acknowledged floor first, so a crash at any later step leaves a
	// journal at or above it, which opens.
	if err := journal.SetFloor(c.journalDir(), p.After); err != nil {
		return err
	}
	stamp := fmt.Sprintf(".%d", time.Now().UnixNano())
	move := func(from, name, why string) error {
		to := filepath.Join(q, name+stamp+why)
		if err := os.Rename(from, to); err != nil {
			return err
		}
		p.Quarantine = append(p.Quarantine, to)
		if err := disk.SyncDir(q); err != nil {
			return err
		}
		return disk.SyncDir(filepath.Dir(from))
	}
	for _, name := range p.Checkpoints {
		if err := move(filepath.Join(c.root(), name), name, ".ahead"); err != nil {
			return err
		}
	}
	for k := len(p.Segments) - 1; k >= 0; k-- {
		name := p.Segments[k]
		if err := move(filepath.Join(c.journalDir(), name), name, ".dropped"); err != nil {
			return err
		}
	}
	if cutSeg, ok := p.CutSegment.get(); ok {
		src := filepath.Join(c.journalDir(), cutSeg)
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		keep := filepath.Join(q, cutSeg+stamp+".before-truncate")
		if err := disk.WriteAtomic(keep, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return err
		}
		p.Quarantine = append(p.Quarantine, keep)
		if err := disk.Truncate(src, p.CutOffset.val); err != nil {
			return err
		}
		if err := disk.SyncDir(c.journalDir()); err != nil {
			return err
		}
	}
	if p.createEmptyAt != 0 {
		if err := journal.CreateEmpty(c.journalDir(), p.createEmptyAt); err != nil {
			return err
		}
	}
	return disk.SyncDir(c.root())
}
