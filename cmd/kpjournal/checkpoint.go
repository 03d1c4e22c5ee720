package main

import (
	"fmt"
	"io"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
)

const checkpointAbout = `Writes a checkpoint of a stopped store now; it writes. It opens the store as the media
server does (replaying and validating the journal, cutting a torn final record, purging overdue leases
with journaled EXPIRE records), writes a checkpoint image at the current journal index, keeps the newest
two images and truncates the journal up to the older one, then closes the store. Prints the new
checkpoint and the journal range kept.`

func runCheckpoint(args []string, stdout, stderr io.Writer) int {
	c := newCLI("checkpoint", "--dir DIR [flags]", checkpointAbout, []string{
		"kpjournal checkpoint --dir /var/lib/keeppeek",
	}, stdout, stderr)
	c.dirFlag()
	c.jsonFlag()
	c.limitFlags()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	s, err := statestore.Open(statestore.Options{Dir: c.dir, Limits: c.limits, CheckpointBytes: -1})
	if err != nil {
		return c.Fail(exitProblems, "%v", err)
	}
	open := s.OpenReport()
	err = s.Checkpoint()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	chk := c.chk
	ckpts, err := listCheckpoints(c.root())
	if err != nil || len(ckpts) == 0 {
		return c.Fail(exitUsage, "no checkpoint after writing one: %v", err)
	}
	ck := ckpts[len(ckpts)-1]
	jr, err := journalRange(c.journalDir(), chk.JournalLimits())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	doc := checkpointDoc{Checkpoint: statCheckpoint{Name: ck.Name(), Index: ck.Index, TimeMs: ck.Header.TimeMs, Time: msTime(ck.Header.TimeMs),
		Entries: ck.Header.Entries, Bytes: ck.Header.Bytes, Namespaces: ck.Header.Namespaces, Size: ck.Size},
		Journal: jr, Replayed: open.Replayed, Expired: open.Expired, Kept: []string{}}
	for _, k := range ckpts {
		doc.Kept = append(doc.Kept, k.Name())
	}
	if open.TailCut != nil {
		doc.TailCut = some(open.TailCut.String())
	}
	if c.json {
		if err := writeJSON(stdout, doc); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		return exitOK
	}
	if cut, ok := doc.TailCut.get(); ok {
		fmt.Fprintf(stdout, "opening the store %s\n", cut)
	}
	fmt.Fprintf(stdout, "opened the store: replayed %d records, purged %d overdue leases\n", doc.Replayed, doc.Expired)
	t := newTable(stdout, "CHECKPOINT", "INDEX", "TIME", "ENTRIES", "BYTES", "SIZE")
	t.row(ck.Name(), ck.Index, msTime(ck.Header.TimeMs), ck.Header.Entries, ck.Header.Bytes, ck.Size)
	t.flush()
	fmt.Fprintf(stdout, "journal keeps indexes %s (%d segments); checkpoints on disk: %d\n", indexRange(jr.FirstIndex, jr.LastIndex), jr.Segments, len(ckpts))
	return exitOK
}

type checkpointDoc struct {
	Checkpoint statCheckpoint `json:"checkpoint"`
	Kept       []string       `json:"checkpoints_on_disk"`
	Journal    journalSummary `json:"journal"`
	Replayed   int            `json:"replayed_at_open"`
	Expired    int            `json:"leases_purged_at_open"`
	TailCut    opt[string]    `json:"tail_cut_at_open"` // null: nothing was cut
}

// journalRange reads the journal's extent: the first segment's start and
// the last whole record (scanning only the last segment).
func journalRange(dir string, lim journal.Limits) (journalSummary, error) {
	var js journalSummary
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		return js, err
	}
	js.Segments, js.Bytes = len(segs), journalSize(segs)
	js.FirstIndex = segs[0].Start
	js.LastIndex = segs[len(segs)-1].Start - 1
	err = walkJournal(segs, lim, journal.Floor{}, segs[len(segs)-1].Start, 0, nil, func(_ journal.Segment, it *item, _ *journal.Frame) error {
		js.LastIndex = it.index
		return nil
	}, func(problem, bool) error { return nil })
	js.Records = int(js.LastIndex + 1 - js.FirstIndex)
	return js, err
}
