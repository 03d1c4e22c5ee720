package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/uring"
)

// The acknowledged-floor marker. A journal cannot tell from its segment
// files alone whether records existed that are no longer there: an emptied
// or shortened tail segment reads as a shorter journal. So the journal
// keeps, beside its segments, a 16-byte file ACKNOWLEDGED naming an index
// whose records were all acknowledged:
//
//	+--------+--------+----------------------------------------+
//	| offset | size   | field                                  |
//	+--------+--------+----------------------------------------+
//	|   0    |   4    | magic "KPAK"                           |
//	|   4    |   8    | index, little-endian                   |
//	|  12    |   4    | CRC-32C of bytes 0..11                 |
//	+--------+--------+----------------------------------------+
//
// It is overwritten in place (one sector, so a crash leaves the old or the
// new value) and fdatasynced at Open (once the tail is repaired, every
// record present is served, hence acknowledged), at Close, and by the Sync
// that acknowledges the first records of a new segment: one small write
// per segment, off the path of every other commit. The floor only rises.
// Open refuses a journal that ends below it, and JudgeTail never cuts at
// or below it. tidwall/wal ignores the file (its name is not an index).
//
// A marker that fails its checksum is no evidence: it is reported (by
// ReadFloor's error) and rewritten at the next Open.

// FloorFile is the marker's file name inside the journal directory.
const FloorFile = "ACKNOWLEDGED"

const (
	floorMagic = "KPAK"
	floorSize  = 16
)

// ErrFloorDamaged is wrapped by ReadFloor when the marker exists but does
// not hold a valid index.
var ErrFloorDamaged = errors.New("acknowledged-floor marker damaged")

// ReadFloor returns the floor the marker in dir records (zero when there is
// no marker). A damaged marker returns a zero Floor and an error wrapping
// ErrFloorDamaged.
func ReadFloor(dir string) (Floor, error) {
	b, err := os.ReadFile(filepath.Join(dir, FloorFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Floor{}, nil
	}
	if err != nil {
		return Floor{}, &StorageError{Op: "read " + FloorFile, Err: err}
	}
	if len(b) != floorSize || string(b[:4]) != floorMagic ||
		crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:]) {
		return Floor{}, fmt.Errorf("%w: %s holds %d bytes that are not a valid marker", ErrFloorDamaged, FloorFile, len(b))
	}
	return Floor{Index: binary.LittleEndian.Uint64(b[4:]), Source: "marker " + FloorFile}, nil
}

func encodeFloor(index uint64) []byte {
	b := make([]byte, floorSize)
	copy(b, floorMagic)
	binary.LittleEndian.PutUint64(b[4:], index)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

// SetFloor replaces the marker in dir with index, durably. Only tools that
// deliberately drop acknowledged records (kpjournal repair
// --truncate-after) and a restore into an empty directory lower it; the
// journal itself only raises it.
func SetFloor(dir string, index uint64) error {
	if err := disk.WriteAtomic(filepath.Join(dir, FloorFile), func(w io.Writer) error {
		_, err := w.Write(encodeFloor(index))
		return err
	}); err != nil {
		return &StorageError{Op: "write " + FloorFile, Err: err}
	}
	return nil
}

// floorMarker is an open journal's handle on its marker. The file is
// opened (and created) by the first raise, so an Open that is refused
// afterwards has written nothing.
type floorMarker struct {
	fs     disk.FS // the journal's
	dir    string
	f      *os.File
	index  uint64 // the value on disk; 0 when unknown
	noSync bool
	ring   *uring.Ring // for its fdatasync (nil: directly)
}

func newFloorMarker(fsys disk.FS, dir string, noSync bool, ring *uring.Ring) *floorMarker {
	m := &floorMarker{fs: fsys, dir: dir, noSync: noSync, ring: ring}
	if fl, err := ReadFloor(dir); err == nil {
		m.index = fl.Index
	}
	return m
}

// raise records index as acknowledged if it is above the marker's value.
func (m *floorMarker) raise(index uint64) error {
	if m == nil || index <= m.index {
		return nil
	}
	if m.f == nil {
		path := filepath.Join(m.dir, FloorFile)
		_, statErr := os.Stat(path)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return &StorageError{Op: "open " + FloorFile, Err: err}
		}
		m.f = f
		if errors.Is(statErr, fs.ErrNotExist) {
			if err := m.fs.SyncDir(m.dir); err != nil {
				return &StorageError{Op: "create " + FloorFile, Err: err}
			}
		}
		// A damaged marker may be longer than a whole one.
		if err := f.Truncate(floorSize); err != nil {
			return &StorageError{Op: "write " + FloorFile, Err: err}
		}
	}
	if _, err := m.f.WriteAt(encodeFloor(index), 0); err != nil {
		return &StorageError{Op: "write " + FloorFile, Err: err}
	}
	if !m.noSync {
		if err := syncFile(m.f, m.ring, m.fs.Faults.Sync); err != nil {
			return &StorageError{Op: "sync " + FloorFile, Err: err}
		}
	}
	m.index = index
	return nil
}

func (m *floorMarker) close() error {
	if m == nil || m.f == nil {
		return nil
	}
	return m.f.Close()
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

// closeFloor raises the marker to last, the final acknowledged index, and
// closes it.
func (j *Journal) closeFloor(last uint64) error {
	j.floorMu.Lock()
	defer j.floorMu.Unlock()
	var err error
	if j.served && !j.opts.ExternalFloor {
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
