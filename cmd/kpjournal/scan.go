package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/keeppeek/statestore/journal"
)

// A segment scan collects what journal.Scanner finds in one segment file,
// going on past damage (journal.SkipDamage), so that verify, stat, dump
// and repair see every problem and every record they can reach.

// item is one valid record found by a scan.
type item struct {
	index    uint64 // journal index; 0 when unknown (after a resync)
	offset   int64  // offset of the entry (its length prefix) in the segment
	from, to int    // the frame's bytes in the segment
}

// segmentScan is what scanning one segment found.
type segmentScan struct {
	seg     journal.Segment
	data    []byte
	items   []item
	damage  []journal.Damage
	records int    // valid records
	next    uint64 // index after the segment's last entry; 0 when unknown
	err     error  // reading the file failed
	// docProblems are PUT documents that failed validation (verify only).
	docProblems []problem
}

// scanData walks data, a segment whose first entry has index start, and
// fills s.items, s.damage, s.records and s.next. visit, if not nil, sees
// each valid record's frame (aliasing data) as it is found.
func (s *segmentScan) scanData(start uint64, lim journal.Limits, visit func(it *item, f *journal.Frame)) {
	s.items, s.damage, s.records, s.next = s.items[:0], s.damage[:0], 0, 0
	sc := journal.NewScanner(s.data, start, lim, journal.SkipDamage)
	for sc.Next() {
		f := sc.Frame()
		if f == nil {
			s.damage = append(s.damage, *sc.Damage())
			continue
		}
		to := int(sc.End())
		s.items = append(s.items, item{index: sc.Index(), offset: sc.Offset(), from: to - len(sc.Raw()), to: to})
		if visit != nil {
			visit(&s.items[len(s.items)-1], f)
		}
	}
	s.records = sc.Records()
	if next, known := sc.NextIndex(); known {
		s.next = next
	}
}

// frame reads the record of it in place, as the scan found it.
func (s *segmentScan) frame(it *item, lim journal.Limits, f *journal.Frame) {
	// The scan parsed these bytes already, so this cannot fail.
	_ = f.Parse(s.data[it.from:it.to], lim)
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
	visit func(worker int, s *segmentScan, it *item, f *journal.Frame), consume func(s *segmentScan) error) error {
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
					var fn func(*item, *journal.Frame)
					if visit != nil {
						fn = func(it *item, f *journal.Frame) { visit(w, s, it, f) }
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
