package journal

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the resident pages of buf[:len(buf)] (mincore).
func residentPages(t *testing.T, buf []byte) (resident, pages int) {
	t.Helper()
	pg := os.Getpagesize()
	n := len(buf) &^ (pg - 1)
	if n == 0 {
		return 0, 0
	}
	vec := make([]byte, n/pg)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// TestTailPagesReleased pins tailpages.go: a store journal's tail buffer is
// a mapping whose written pages go back to the kernel as the tail grows
// (at most about three releaseSteps stay resident: the one being filled,
// and up to two populated ahead), while every record still
// reads back and replays: a Read of a record in the tail, a TruncateFront
// into the tail (which tidwall/wal rewrites from its buffer) and a reopen
// all see the records, not the zeros a released page reads as. A
// CacheSealed journal keeps its tail on the heap, every page resident.
func TestTailPagesReleased(t *testing.T) {
	t.Parallel()
	for _, cacheSealed := range []bool{false, true} {
		t.Run(map[bool]string{false: "store journal", true: "CacheSealed"}[cacheSealed], func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "journal")
			j, _ := openJournalOpts(t, dir, Options{CacheSealed: cacheSealed})
			defer func() { j.Close() }()
			// About 400 KiB in a 1 MiB segment: six release steps, no cycle.
			var recs []*Record
			for i := range 100 {
				recs = append(recs, &Record{Kind: KindPut, Namespace: "ns", Key: "k", Revision: uint64(i + 1), Schema: "s", Owner: "o", Document: make([]byte, 4<<10)})
				for k := range recs[i].Document {
					recs[i].Document[k] = byte(i + k)
				}
				if _, err := j.Append(recs[i : i+1]); err != nil {
					t.Fatal(err)
				}
			}
			if j.tailStart != 1 {
				t.Fatalf("the tail starts at %d: the records cycled a segment", j.tailStart)
			}
			j.wmu.Lock()
			buf := *tailBuffer(j.log)
			owned := j.pages.owns(buf)
			resident, pages := residentPages(t, buf)
			j.wmu.Unlock()
			if cacheSealed {
				if owned || resident != pages {
					t.Fatalf("CacheSealed: tail buffer mapped %v, %d of %d pages resident; want the heap, all resident", owned, resident, pages)
				}
			} else if !owned || resident*os.Getpagesize() > releaseStep+os.Getpagesize() {
				t.Fatalf("tail buffer mapped %v, %d of its %d written pages resident; want a mapping with at most %d bytes of them resident", owned, resident, pages, releaseStep)
			}
			for _, i := range []int{0, 50, 99} {
				got, err := j.Read(uint64(i+1), nil)
				want, _ := recs[i].AppendFrame(nil)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("read %d: %d bytes, %v; want the record's frame (%d bytes)", i+1, len(got), err, len(want))
				}
			}
			// Released again by the next writes, then a truncation into
			// the tail rewrites it from the buffer.
			for i := 100; i < 130; i++ {
				recs = append(recs, &Record{Kind: KindPut, Namespace: "ns", Key: "k", Revision: uint64(i + 1), Schema: "s", Owner: "o", Document: make([]byte, 4<<10)})
				if _, err := j.Append(recs[i : i+1]); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.TruncateFront(41); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append([]*Record{{Kind: KindPut, Namespace: "ns", Key: "k", Revision: 131, Schema: "s", Owner: "o", Document: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
			j.Close()
			j, _ = openJournalOpts(t, dir, Options{CacheSealed: cacheSealed})
			var got []*Record
			if err := j.Replay(j.FirstIndex(), func(idx uint64, r *Record) error {
				got = append(got, r)
				return nil
			}); err != nil {
				t.Fatalf("replay: %v", err)
			}
			if j.FirstIndex() != 41 || len(got) != 91 || !reflect.DeepEqual(got[:90], recs[40:]) {
				t.Fatalf("after TruncateFront(41) and a reopen %d records replay, want records 41-131 as written", len(got))
			}
		})
	}
}
