package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/keeppeek/statestore/journal"
)

// A segment scan walks one segment file entry by entry without stopping at
// the first problem: an entry whose frame is damaged but whose length prefix
// still leads to a valid entry (a flipped byte in the payload) is one
// damaged record and the walk goes on with exact indexes; an entry that
// cannot be delimited (a damaged length prefix, zero-filled bytes, a cut)
// makes the walk search forward, byte by byte, for the next valid frame and
// resume there, with indexes unknown for the rest of that segment.

// item is one valid record found by a scan.
type item struct {
	index    uint64 // journal index; 0 when unknown (after a resync)
	offset   int64  // offset of the entry (its length prefix) in the segment
	from, to int    // the frame's bytes in the segment
}

// damage is one entry a scan could not read.
type damage struct {
	index  uint64 // journal index of the (first) damaged record; 0 when unknown
	offset int64
	reason string
	// last: no valid frame follows in this segment. In the last segment
	// that makes it a torn tail, which repair can cut.
	last bool
	// prewritten: nothing but zeros from this entry boundary to the end
	// of the segment, which is how the journal's pre-written space reads
	// (see prewrittenTail).
	prewritten bool
}

// segmentScan is what scanning one segment found.
type segmentScan struct {
	seg     journal.Segment
	data    []byte
	items   []item
	damage  []damage
	records int    // valid records
	next    uint64 // index after the segment's last entry; 0 when unknown
	err     error  // reading the file failed
	// docProblems are PUT documents that failed validation (verify only).
	docProblems []problem
}

// scanData walks data, a segment whose first entry has index start, and
// fills s.items, s.damage, s.records and s.next. visit, if not nil, sees
// each valid record's parsed frame (aliasing data) as it is found.
func (s *segmentScan) scanData(start uint64, lim journal.Limits, visit func(it *item, f *frame)) {
	data := s.data
	s.items, s.damage, s.records, s.next = s.items[:0], s.damage[:0], 0, 0
	var f frame
	idx, known := start, true
	at := func() uint64 {
		if known {
			return idx
		}
		return 0
	}
	off := 0
	for off < len(data) {
		b, size, reason := frameAt(data, off)
		if b != nil {
			if parseFrame(b, lim, &f) {
				s.items = append(s.items, item{index: at(), offset: int64(off), from: off + size - len(b), to: off + size})
				if visit != nil {
					visit(&s.items[len(s.items)-1], &f)
				}
				s.records++
				idx++
				off += size
				continue
			}
			// Delimited but invalid. If the entry after it is whole, the
			// length prefix was right: one damaged record, still aligned.
			end := off + size
			if end == len(data) || validFrameAt(data, end, lim, &f) {
				s.damage = append(s.damage, damage{index: at(), offset: int64(off), reason: frameReason(b, lim), last: end == len(data)})
				idx++
				off = end
				continue
			}
			reason = frameReason(b, lim)
		}
		d := damage{index: at(), offset: int64(off), reason: reason}
		if journal.PrewrittenFrom(data, int64(off)) {
			d.last, d.prewritten = true, true
			d.reason = fmt.Sprintf("%d zero bytes after the last record (the journal's pre-written space)", len(data)-off)
			s.damage = append(s.damage, d)
			break
		}
		next := nextValidFrame(data, off+1, lim)
		if next < 0 {
			d.last = true
			if len(data)-off > 1 {
				d.reason += fmt.Sprintf("; no valid record in the %d bytes to the end of the segment", len(data)-off)
			}
			s.damage = append(s.damage, d)
			return
		}
		d.reason += fmt.Sprintf("; next valid record at offset %d (%d bytes skipped, indexes after it unknown)", next, next-off)
		s.damage = append(s.damage, d)
		known = false
		off = next
	}
	if known {
		s.next = idx
	}
}

// readSegment reads seg into buf (grown as needed) and returns it.
func readSegment(seg journal.Segment, buf []byte) ([]byte, error) {
	f, err := os.Open(seg.Path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return buf, err
	}
	n := int(fi.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f, buf); err != nil {
		return buf, fmt.Errorf("read %s: %w", seg.Path, err)
	}
	return buf, nil
}

// scanJournal scans segs with workers goroutines and hands each scan to
// consume in segment order, on the calling goroutine. visit, if not nil,
// sees every valid record on the worker that scans it (verify checks
// documents there). At most a few segments are in memory at once; a scan's
// buffers are reused after consume returns, so consume must not keep them.
// An error from consume stops the walk and is returned.
func scanJournal(segs []journal.Segment, lim journal.Limits, workers int,
	visit func(worker int, s *segmentScan, it *item, f *frame), consume func(s *segmentScan) error) error {
	if workers < 1 {
		workers = 1
	}
	type slot struct {
		s    *segmentScan
		done chan struct{}
	}
	window := 2 * workers
	slots := make([]slot, len(segs))
	for i := range slots {
		slots[i].done = make(chan struct{})
	}
	free := make(chan *segmentScan, window)
	for range window {
		free <- &segmentScan{}
	}
	next := make(chan int)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var s *segmentScan
				select {
				case s = <-free:
				case <-stop:
					return
				}
				s.seg, s.err, s.docProblems = segs[i], nil, s.docProblems[:0]
				s.data, s.err = readSegment(segs[i], s.data)
				if s.err == nil {
					var fn func(*item, *frame)
					if visit != nil {
						fn = func(it *item, f *frame) { visit(w, s, it, f) }
					}
					s.scanData(segs[i].Start, lim, fn)
				}
				slots[i].s = s
				close(slots[i].done)
			}
		}()
	}
	// Hand out segment numbers in order, never more than window ahead of
	// the consumer, so memory stays bounded by the window.
	ahead := make(chan struct{}, window)
	go func() {
		defer close(next)
		for i := range segs {
			select {
			case ahead <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	var err error
	for i := range slots {
		<-slots[i].done
		s := slots[i].s
		if s.err != nil {
			err = fmt.Errorf("segment %s: %w", s.seg.Name(), s.err)
		} else {
			err = consume(s)
		}
		free <- s
		<-ahead
		if err != nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	return err
}
