package recovery

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/journal"
)

// CheckpointReport says which image a load started from.
type CheckpointReport struct {
	Path  string // "" when no image was used
	Index uint64
	// Skipped lists newer images that failed to load, with why.
	Skipped []error
}

// NoCheckpointError is the refusal to load when every checkpoint image is
// damaged and the journal no longer holds the records before JournalFirst:
// those records exist only in the damaged images.
type NoCheckpointError struct {
	JournalFirst uint64
	Skipped      []error // why each image failed, newest first
}

func (e *NoCheckpointError) Error() string {
	return fmt.Sprintf("no checkpoint loads (%v) and the journal starts at index %d, so records 1..%d exist only in those images: "+
		"restore a backup (kpjournal restore) into an empty directory; kpjournal verify shows each damaged image",
		errors.Join(e.Skipped...), e.JournalFirst, e.JournalFirst-1)
}

// Unwrap returns the failures of the skipped images.
func (e *NoCheckpointError) Unwrap() []error { return e.Skipped }

// CheckpointFloor is the acknowledged floor that the checkpoint images in
// root (a store's Dir/state-store) prove: the newest image's index, read
// from its name (a damaged image still says that its records existed).
// Open and kpjournal judge a damaged journal tail against it.
func CheckpointFloor(root string) (journal.Floor, error) {
	files, err := checkpoint.List(root)
	if err != nil || len(files) == 0 {
		return journal.Floor{}, err
	}
	newest := files[len(files)-1]
	return journal.Floor{Index: newest.Index, Source: "checkpoint " + filepath.Base(newest.Path)}, nil
}

// checkJournalCovers refuses a checkpoint the journal cannot continue: the
// journal (records first..last) must hold every record after the image's
// index and must not end before it.
func checkJournalCovers(first, last, ckptIndex uint64, ckptPath string) error {
	if first > ckptIndex+1 {
		return &journal.CorruptError{Index: ckptIndex + 1, Reason: fmt.Sprintf("checkpoint %s ends at index %d but the journal starts at %d: records %d..%d are missing", filepath.Base(ckptPath), ckptIndex, first, ckptIndex+1, first-1)}
	}
	if last < ckptIndex {
		return &journal.CorruptError{Index: last + 1, Reason: fmt.Sprintf("checkpoint %s is at index %d but the journal ends at %d", filepath.Base(ckptPath), ckptIndex, last)}
	}
	return nil
}
