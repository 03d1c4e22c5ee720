package main

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

const statAbout = `Summarizes a stopped store's files without changing anything: each journal segment (file
name, first index, records, size), the journal's first and last index and record count, each checkpoint
(index, time taken, entries, value bytes, file size), the state's totals (entries, value bytes,
namespaces holding entries, overdue leases) from the newest checkpoint that loads plus the journal after
it, and disk use. Damage met on the way is listed (exit code 1); kpjournal verify checks everything.`

func runStat(args []string, stdout, stderr io.Writer) int {
	c := newCLI("stat", "--dir DIR [flags]", statAbout, []string{
		"kpjournal stat --dir /var/lib/keeppeek",
		"kpjournal stat --dir /var/lib/keeppeek --json | jq .totals",
	}, stdout, stderr)
	c.dirFlag()
	c.jsonFlag()
	c.limitFlags()
	config := c.configFlag()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	st, err := collectStat(c, c.chk)
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if *config != "" {
		if st.Settings, err = loadSettings(*config, c.chk, false, false); err != nil {
			st.Problems = append(st.Problems, settingsProblem(*config, err))
		}
	}
	return c.finish(stdout, st, st.print, len(st.Problems))
}

type statSegment struct {
	Name       string `json:"name"`
	FirstIndex uint64 `json:"first_index"`
	Records    int    `json:"records"`
	Size       int64  `json:"size"`
}

type statCheckpoint struct {
	Name       string      `json:"name"`
	Index      uint64      `json:"index"`
	TimeMs     int64       `json:"time_ms"`
	Time       string      `json:"time"`
	Entries    uint32      `json:"entries"`
	Bytes      uint64      `json:"bytes"`
	Namespaces uint32      `json:"namespaces"`
	Size       int64       `json:"size"`
	Error      opt[string] `json:"error"` // why it does not load; null when it does
}

type statTotals struct {
	Entries    int         `json:"entries"`
	Bytes      int64       `json:"bytes"`
	Namespaces int         `json:"namespaces_with_entries"`
	Overdue    int         `json:"overdue_leases"`
	From       string      `json:"from"`       // checkpoint the totals start from, or "journal start"
	Incomplete opt[string] `json:"incomplete"` // why the totals stop short of the journal's end; null when they do not
}

type statDisk struct {
	Journal     int64 `json:"journal"`
	Reserve     int64 `json:"reserve"` // the journal's reserve file: space held back for deletes on a full disk
	Checkpoints int64 `json:"checkpoints"`
	Quarantine  int64 `json:"quarantine"`
	Other       int64 `json:"other"`
	Total       int64 `json:"total"`
}

type statDoc struct {
	Store       string           `json:"store"`
	Segments    []statSegment    `json:"segments"`
	FirstIndex  uint64           `json:"first_index"`
	LastIndex   uint64           `json:"last_index"`
	Records     int              `json:"records"`
	Checkpoints []statCheckpoint `json:"checkpoints"`
	Totals      statTotals       `json:"totals"`
	Disk        statDisk         `json:"disk"`
	Problems    []problem        `json:"problems"`
	Settings    *settingsDoc     `json:"settings,omitempty"` // with --config
}

func collectStat(c *cli, chk *recovery.Checker) (*statDoc, error) {
	d := &statDoc{Store: c.root(), Segments: []statSegment{}, Checkpoints: []statCheckpoint{}, Problems: []problem{}}
	ckpts, err := listCheckpoints(c.root())
	if err != nil {
		return nil, err
	}
	var base *ckpt
	for i := len(ckpts) - 1; i >= 0 && base == nil; i-- {
		if ckpts[i].load(chk); ckpts[i].base() {
			base = ckpts[i]
		}
	}
	for _, ck := range ckpts {
		sc := statCheckpoint{Name: ck.Name(), Index: ck.Index, TimeMs: ck.Header.TimeMs, Time: msTime(ck.Header.TimeMs),
			Entries: ck.Header.Entries, Bytes: ck.Header.Bytes, Namespaces: ck.Header.Namespaces, Size: ck.Size}
		if ck.Err != nil {
			sc.Error = some(ck.Err.Error())
		}
		d.Checkpoints = append(d.Checkpoints, sc)
	}
	segs, err := listSegments(c.journalDir())
	if err != nil {
		return nil, err
	}
	for _, ck := range ckpts {
		if ck.Err != nil {
			sev, why := ckptSeverity(ck, base, segs)
			d.Problems = append(d.Problems, problem{Severity: sev, File: ck.Name(), Offset: ck.Offset, Index: ck.Index, Reason: "checkpoint does not load: " + ck.Err.Error() + why})
		}
	}
	from := uint64(1)
	var baseView *materialize.View
	d.Totals.From = "journal start"
	if base != nil {
		from, baseView, d.Totals.From = base.Index+1, base.View, base.Name()
	}
	rp := newTally(chk, baseView)
	stop := func(why string) {
		if !d.Totals.Incomplete.ok {
			d.Totals.Incomplete = some(why)
		}
	}
	if len(segs) > 0 {
		d.FirstIndex, d.LastIndex = segs[0].Start, segs[0].Start-1
		if segs[0].Start > from {
			stop(fmt.Sprintf("the journal starts at %d, records %d..%d are missing", segs[0].Start, from, segs[0].Start-1))
		}
	}
	lim := chk.JournalLimits()
	floor, _, err := ackFloor(c.root(), c.journalDir())
	if err != nil {
		return nil, err
	}
	prog := startProgress(c.Stderr, "stat", journalSize(segs))
	lastStart := uint64(0)
	if len(segs) > 0 {
		lastStart = segs[len(segs)-1].Start
	}
	var f journal.Frame
	err = scanJournal(segs, lim, runtime.GOMAXPROCS(0), nil, func(s *segmentScan) error {
		prog.add(s.seg.Size)
		d.Segments = append(d.Segments, statSegment{s.seg.Name(), s.seg.Start, s.records, s.seg.Size})
		d.Records += s.records
		for i, dm := range s.damage {
			if s.prewrittenTail(i, s.seg.Start == lastStart, floor) {
				continue
			}
			sev := corruption
			torn, reason := s.torn(i, s.seg.Start == lastStart, floor, lim)
			if torn {
				sev = repairable
			}
			d.Problems = append(d.Problems, problem{Severity: sev, File: segFile(s.seg.Name()), Offset: dm.Offset, Index: dm.Index, Reason: reason})
			if sev == corruption {
				stop(fmt.Sprintf("damage at index %s", indexText(dm.Index)))
			}
		}
		for _, it := range s.items {
			if it.index > d.LastIndex {
				d.LastIndex = it.index
			}
			if d.Totals.Incomplete.ok || (it.index != 0 && it.index < from) {
				continue
			}
			if it.index == 0 {
				stop("record indexes unknown after damage")
				continue
			}
			s.frame(&it, lim, &f)
			if ok, prob := rp.apply(&f); !ok || prob != nil {
				stop(fmt.Sprintf("index %d: %v", it.index, prob))
			}
		}
		return nil
	})
	prog.finish()
	if err != nil {
		return nil, err
	}
	d.Totals.Entries, d.Totals.Bytes, d.Totals.Namespaces = rp.totals()
	d.Totals.Overdue = len(rp.overdue(time.Now().UnixMilli()))
	d.Disk, err = diskUse(c.root())
	return d, err
}

func diskUse(root string) (statDisk, error) {
	var u statDisk
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		n := info.Size()
		switch {
		case rel == filepath.Join("journal", journal.ReserveFile):
			u.Reserve += n
		case strings.HasPrefix(rel, "journal"+string(filepath.Separator)):
			u.Journal += n
		case strings.HasPrefix(rel, "quarantine"+string(filepath.Separator)):
			u.Quarantine += n
		default:
			if _, ok := checkpoint.ParseName(rel); ok {
				u.Checkpoints += n
			} else {
				u.Other += n
			}
		}
		u.Total += n
		return nil
	})
	return u, err
}

func (d *statDoc) print(w io.Writer) error {
	fmt.Fprintf(w, "store %s\n\n", d.Store)
	t := newTable(w, "SEGMENT", "FIRST INDEX", "RECORDS", "SIZE")
	for _, s := range d.Segments {
		t.row(s.Name, s.FirstIndex, s.Records, s.Size)
	}
	t.flush()
	fmt.Fprintf(w, "\njournal: %d segments, indexes %s, %d records\n\n", len(d.Segments), indexRange(d.FirstIndex, d.LastIndex), d.Records)
	t = newTable(w, "CHECKPOINT", "INDEX", "TIME", "ENTRIES", "BYTES", "SIZE", "STATUS")
	for _, c := range d.Checkpoints {
		status := "ok"
		if c.Error.ok {
			status = "DOES NOT LOAD"
		}
		t.row(c.Name, c.Index, c.Time, c.Entries, c.Bytes, c.Size, status)
	}
	if len(d.Checkpoints) == 0 {
		t.row("(none)", "-", "-", "-", "-", "-", "-")
	}
	t.flush()
	tt := d.Totals
	fmt.Fprintf(w, "\ntotals (from %s): %d entries, %d bytes, %d namespaces holding entries, %d overdue leases\n",
		tt.From, tt.Entries, tt.Bytes, tt.Namespaces, tt.Overdue)
	if why, ok := tt.Incomplete.get(); ok {
		fmt.Fprintf(w, "  incomplete: %s\n", why)
	}
	u := d.Disk
	fmt.Fprintf(w, "disk: journal %d, reserve %d, checkpoints %d, quarantine %d, other %d, total %d bytes\n",
		u.Journal, u.Reserve, u.Checkpoints, u.Quarantine, u.Other, u.Total)
	if d.Settings != nil {
		d.Settings.print(w, false)
	}
	if len(d.Problems) > 0 {
		fmt.Fprintf(w, "\n%d problems (kpjournal verify checks everything):\n", len(d.Problems))
		return problemTable(w, d.Problems, 20)
	}
	return nil
}
