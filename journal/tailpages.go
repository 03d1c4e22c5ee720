package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Releasing the tail's bytes. tidwall/wal appends every entry to its tail
// buffer (tidwall.go) and writes the new bytes from there; it reads the
// buffer again only to serve a Read or a TruncateFront of a record in it.
// A store journal makes neither on the commit path, so once a write has
// returned, the tail's bytes need not stay in memory: there they were a
// segment (1 MiB) of live heap per journal, which the collector's goal
// then doubled. Unless Options.CacheSealed (a raft log, whose leader reads
// recent records), the journal gives the tail a buffer of its own outside
// the Go heap (an anonymous mapping of tailCapacity bytes) and hands the
// pages below the tail's last page back to the kernel as the tail grows
// (madvise MADV_DONTNEED, in steps of releaseStep), so a tail holds a few
// pages resident instead of its size. The pages ahead of the tail are
// faulted in a step at a time with one call (MADV_POPULATE_WRITE) rather
// than one fault per page as the appends reach them: faulting page by page
// measured about 1.5 µs more per 2 KB record (BenchmarkAppendNoSync:
// 6.1-8.8 µs against 5.5-6.4 µs on the heap buffer; populated a step at a
// time, 5.2-5.9 µs).
//
// A released page reads as zeros, so before anything may read the buffer
// (Read, TruncateFront) restoreTailLocked reads the released part back from
// the segment file, which holds the same bytes at the same offsets (the
// buffer mirrors the file from its start: tidwall/wal writes each appended
// entry at the file's end, and the journal's pre-written zeros lie beyond
// what the buffer holds), and drops the sealed segments' copies, which may
// still name the buffer (dropSealed), so tidwall/wal reloads them from
// their files.

// releaseStep is the least span of whole pages released at once: one
// madvise per 64 KiB journaled keeps the cost off the commit path, and a
// tail holds at most about that much resident.
const releaseStep = 64 << 10

// tailPages is the journal's off-heap tail buffers and how much of the
// current tail's buffer is released. Under wmu.
type tailPages struct {
	regions  [][]byte // the mappings, unmapped at Close
	base     *byte    // the start of the buffer the current tail was given
	released int      // bytes from base whose pages are released
	// populated is how far from base the pages were faulted in ahead of
	// the tail (MADV_POPULATE_WRITE); noPopulate is set once the kernel
	// refuses it (before Linux 5.14), and the tail's writes fault them.
	populated  int
	noPopulate bool
}

// mapBuffer returns an empty buffer of capacity n outside the Go heap, or
// one on the heap when the mapping is refused.
func (tp *tailPages) mapBuffer(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, 0, n)
	}
	tp.regions = append(tp.regions, b)
	return b[:0]
}

// owns reports whether b starts one of the mappings.
func (tp *tailPages) owns(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	at := unsafe.SliceData(b[:1])
	for _, r := range tp.regions {
		if unsafe.SliceData(r[:1]) == at {
			return true
		}
	}
	return false
}

// adopt makes buf, just given to the tail, the buffer released from: a
// mapping, none of it released yet (a reused one held an earlier tail's
// bytes, which the copy into it replaced). A heap buffer is never
// released from.
func (tp *tailPages) adopt(buf []byte) {
	tp.base, tp.released, tp.populated = nil, 0, 0
	if tp.owns(buf) {
		tp.base = unsafe.SliceData(buf[:1])
	}
}

// release hands back the whole pages of buf below its last page, if buf
// is the adopted buffer and they span at least releaseStep bytes. Every
// byte below len(buf) has been written to the tail file.
func (tp *tailPages) release(buf []byte) {
	if tp.base == nil || cap(buf) == 0 || unsafe.SliceData(buf[:1]) != tp.base {
		return
	}
	pg := os.Getpagesize()
	end := len(buf) &^ (pg - 1)
	if end-tp.released >= releaseStep && unix.Madvise(buf[tp.released:end], unix.MADV_DONTNEED) == nil {
		tp.released = end
	}
	// Fault the next pages in with one call instead of one fault per page
	// as appends reach them (a fault costs about a microsecond, more in a
	// virtual machine: more than half a fault per 2 KB record).
	if tp.noPopulate || tp.populated >= len(buf)+releaseStep/2 {
		return
	}
	from := max(tp.populated, end)
	to := min(len(buf)+2*releaseStep, cap(buf)) &^ (pg - 1)
	if to <= from {
		return
	}
	if err := unix.Madvise(buf[from:to], madvPopulateWrite); err != nil {
		tp.noPopulate = true
		return
	}
	tp.populated = to
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the range
// in, writable, keeping what it holds.
const madvPopulateWrite = 23

// unmap unmaps every mapping. Only Close calls it, after tidwall/wal's Log
// is closed: nothing reads or writes a tail buffer after that.
func (tp *tailPages) unmap() {
	for _, r := range tp.regions {
		unix.Munmap(r)
	}
	tp.regions, tp.base, tp.released = nil, nil, 0
}

// restoreTailLocked makes the Log's buffers hold the records again before
// tidwall/wal reads them: the sealed segments' copies are dropped (a Read
// or TruncateFront of one reloads its file) and the tail buffer's released
// part is read back from the tail file. The caller holds wmu.
func (j *Journal) restoreTailLocked() error {
	if j.opts.CacheSealed || j.log == nil {
		return nil
	}
	dropSealed(j.log)
	p := tailBuffer(j.log)
	tp := &j.pages
	if p == nil || tp.released == 0 || cap(*p) == 0 || unsafe.SliceData((*p)[:1]) != tp.base {
		return nil
	}
	path := filepath.Join(j.dir, j.tailName())
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("restore the tail buffer from %s: %w", path, err)
	}
	defer f.Close()
	if n, err := f.ReadAt((*p)[:tp.released], 0); err != nil {
		return fmt.Errorf("restore the tail buffer from %s: %d of %d bytes: %w", path, n, tp.released, err)
	}
	tp.released = 0
	return nil
}
