package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func benchRecord() *Record {
	return &Record{Kind: KindPut, Namespace: "user/owner-001", Key: "intents/front-door-video-browser-h264-720p", Revision: 1,
		Schema: "keeppeek.media-intent.v1", Owner: "owner-001", Document: make([]byte, 2193)}
}

// BenchmarkAppendSync is one durable single-record append: the journal's
// share of a serial compare-and-set.
func BenchmarkAppendSync(b *testing.B) {
	j, _, err := Open(filepath.Join(b.TempDir(), "journal"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	r := benchRecord()
	for b.Loop() {
		r.Revision++
		if _, err := j.Append([]*Record{r}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendNoSync is one single-record append written and never
// synced: the journal's CPU share of a serial compare-and-set without the
// disk, where what the tail buffer costs per record (its pages faulted in
// and released, tailpages.go) shows most.
func BenchmarkAppendNoSync(b *testing.B) {
	j, _, err := Open(filepath.Join(b.TempDir(), "journal"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		r.Revision++
		if _, err := j.Append([]*Record{r}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawAppendFdatasync is the physical floor for the same bytes.
func BenchmarkRawAppendFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	frame, _ := benchRecord().Encode()
	for b.Loop() {
		if _, err := f.Write(frame); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}

// groupRecords is one group commit's worth of the specification's records.
func groupRecords() []*Record {
	recs := make([]*Record, 64)
	for i := range recs {
		recs[i] = benchRecord()
	}
	return recs
}

// BenchmarkWriteGroup is the write step of one group commit of 64 records,
// without the fsync: frames encoded and handed to tidwall/wal, which copies
// them onto its in-memory tail segment (regrowing it) and writes them to
// the file. Compare BenchmarkPlainWriteGroup, the same frames appended to a
// plain file: the difference is what tidwall/wal's tail buffer costs per
// record (journal/doc.go, "tidwall/wal"), in time and in garbage per record.
func BenchmarkWriteGroup(b *testing.B) {
	j, _, err := Open(filepath.Join(b.TempDir(), "journal"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	recs := groupRecords()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := j.Write(recs, j.Written()+1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// BenchmarkPlainWriteGroup appends the frames of the same 64 records to
// plain files with one write(2), starting a new file at the journal's
// segment size: the floor for BenchmarkWriteGroup.
func BenchmarkPlainWriteGroup(b *testing.B) {
	dir := b.TempDir()
	recs := groupRecords()
	var (
		f    *os.File
		size int
		buf  []byte
		n    int
	)
	next := func() {
		if f != nil {
			f.Close()
		}
		var err error
		if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%020d", n))); err != nil {
			b.Fatal(err)
		}
		n++
		size = 0
	}
	next()
	defer func() { f.Close() }()
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, r := range recs {
			var err error
			if buf, err = r.AppendFrame(buf); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if size += len(buf); size >= DefaultSegmentSize {
			next()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
