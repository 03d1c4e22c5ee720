package main

import (
	"errors"
	"fmt"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
)

// ackFloor is the acknowledged floor of the store in root: the newest
// checkpoint's index raised by the journal's ACKNOWLEDGED marker, exactly
// what Open judges a damaged tail against. A damaged marker is no evidence
// (Open rewrites it) and comes back as markerErr for verify to report.
func ackFloor(root, journalDir string) (floor journal.Floor, markerErr error, err error) {
	fl, err := recovery.CheckpointFloor(root)
	if err != nil {
		return journal.Floor{}, nil, err
	}
	if _, err := journal.ReadFloor(journalDir); errors.Is(err, journal.ErrFloorDamaged) {
		markerErr = err
	}
	floor, err = journal.LoadFloor(journalDir, fl)
	return floor, markerErr, err
}

// prewrittenTail says whether damage i of s is not damage at all: the
// zeros the journal pre-writes ahead of its records, at the end of the last
// segment and above the acknowledged floor, which Open trims without a
// report. Zeros ending a sealed segment, or where acknowledged records
// were, stay damage (torn judges them).
func (s *segmentScan) prewrittenTail(i int, isLast bool, floor journal.Floor) bool {
	d := s.damage[i]
	return d.Prewritten && isLast && d.Index > floor.Index
}

// torn says whether damage i of s is a torn tail that Open would cut
// (journal.JudgeTail decides, for Open and every command alike), and the
// reason to print: the damage, plus why it is not torn when it is not.
func (s *segmentScan) torn(i int, isLast bool, floor journal.Floor, lim journal.Limits) (bool, string) {
	d := s.damage[i]
	if !isLast || !d.Last {
		return false, d.Reason
	}
	if d.Index == 0 {
		return false, d.Reason + "; record indexes are unknown after earlier damage, so this is not a torn tail"
	}
	err := journal.JudgeTail(s.seg.Name(), s.data, d.Offset, d.Index, floor, lim)
	var ce *journal.CorruptError
	if errors.As(err, &ce) {
		return false, d.Reason + "; " + ce.Reason
	}
	if err != nil {
		return false, d.Reason + "; " + err.Error()
	}
	return true, d.Reason
}

// ckptSeverity grades an image ck that does not load the way Open does:
// Open still opens when a newer image loads (base), and past damage when
// an older one loads or the journal holds every record from index 1 (it
// replays from the empty state), so such an image is only REPAIRABLE
// clutter (kpjournal repair moves it aside); otherwise the records before
// the journal's first index exist only in damaged images and Open
// refuses. An intact image holding a document the rules refuse is no
// damage: Open refuses at it unless a newer image loads, so moving it aside
// is no repair. The second result explains the verdict.
func ckptSeverity(ck, base *ckpt, segs []journal.Segment) (string, string) {
	var de *recovery.DocumentError
	if errors.As(ck.Err, &de) {
		if base != nil && base.Index > ck.Index {
			return repairable, fmt.Sprintf("; the store opens from the newer %s (kpjournal repair moves this image to quarantine/)", base.Name())
		}
		return corruption, "; the image is intact, so the store refuses to open rather than fall back from it: " + recovery.MigrationHint
	}
	switch {
	case base != nil && base.Err != nil:
		return repairable, fmt.Sprintf("; the store goes on to the older %s, whose documents it refuses (kpjournal repair moves the damaged image to quarantine/)", base.Name())
	case base != nil:
		return repairable, fmt.Sprintf("; the store opens from the older %s (kpjournal repair moves the damaged image to quarantine/)", base.Name())
	case len(segs) > 0 && segs[0].Start <= 1:
		return repairable, "; the journal holds every record from index 1, so the store replays it from the empty state (kpjournal repair moves the damaged image to quarantine/)"
	case len(segs) == 0:
		return corruption, "; no image loads and the journal holds no records, so every record the image covers exists only in damaged images: restore a backup"
	}
	return corruption, fmt.Sprintf("; no image loads and the journal starts at index %d, so records 1..%d exist only in damaged images: restore a backup", segs[0].Start, segs[0].Start-1)
}
