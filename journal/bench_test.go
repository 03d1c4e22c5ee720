package journal

import (
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
