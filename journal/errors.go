package journal

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error that means the journal's files hold
// something other than a prefix of acknowledged records.
var ErrCorrupt = errors.New("journal corrupt")

// ErrStorage is wrapped by every failed write, sync or recovery: the disk
// refused, and nothing of the failed batch was acknowledged.
var ErrStorage = errors.New("journal storage failure")

// ErrClosed is returned by operations on a closed journal.
var ErrClosed = errors.New("journal closed")

// CorruptError names where the journal stopped making sense.
type CorruptError struct {
	Segment string // file name of the segment; "" when no one segment is at fault
	Offset  int64  // byte offset of the bad entry within the segment; -1 when none applies
	Index   uint64 // journal index the bad entry has (or would have)
	Reason  string
	Err     error // the underlying cause, if any
}

func (e *CorruptError) Error() string {
	switch {
	case e.Segment == "":
		return fmt.Sprintf("journal corrupt at index %d: %s", e.Index, e.Reason)
	case e.Offset < 0:
		return fmt.Sprintf("journal corrupt at index %d (segment %s): %s", e.Index, e.Segment, e.Reason)
	}
	return fmt.Sprintf("journal corrupt at index %d (segment %s, offset %d): %s", e.Index, e.Segment, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt and the cause, so both errors.Is(err,
// ErrCorrupt) and errors.As on the cause work.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

// StorageError reports a failed journal write, sync or recovery.
type StorageError struct {
	Op    string // "append", "sync directory", "recover", "truncate front", ...
	Index uint64 // first journal index of the batch concerned, when known
	Err   error
}

func (e *StorageError) Error() string {
	if e.Index != 0 {
		return fmt.Sprintf("journal %s at index %d: %v", e.Op, e.Index, e.Err)
	}
	return fmt.Sprintf("journal %s: %v", e.Op, e.Err)
}

// Unwrap returns ErrStorage and the cause.
func (e *StorageError) Unwrap() []error { return []error{ErrStorage, e.Err} }

// TailCut reports a torn final record cut off at open. The cut bytes were
// never acknowledged (their fsync never returned), but an operator should
// know they existed: the whole damaged segment is kept at SavedAs.
type TailCut struct {
	Segment string // file name of the last segment
	Offset  int64  // where the segment was cut
	Index   uint64 // journal index the cut entry would have had
	Bytes   int64  // how many bytes were cut
	SavedAs string // copy of the segment as found
	Reason  string
}

func (c *TailCut) String() string {
	return fmt.Sprintf("cut torn tail of segment %s at offset %d (index %d, %d bytes: %s); damaged copy kept at %s",
		c.Segment, c.Offset, c.Index, c.Bytes, c.Reason, c.SavedAs)
}
