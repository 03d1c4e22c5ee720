package journal

import (
	"path/filepath"
	"testing"
)

// TestTailBufferPresized pins that the journal reaches tidwall/wal's tail
// buffer (v1.2.1's layout) and gives it a whole segment's capacity at open
// and after every cycle, so that appending never reallocates it: if a
// tidwall/wal upgrade changes the layout, pre-sizing silently stops, and
// this test says so.
func TestTailBufferPresized(t *testing.T) {
	const seg = 8 << 10
	dir := filepath.Join(t.TempDir(), "journal")
	j, _ := openJournal(t, dir, seg)
	defer func() { j.Close() }()
	check := func(when string) *[]byte {
		t.Helper()
		j.mu.Lock()
		defer j.mu.Unlock()
		p := tailBuffer(j.log)
		if p == nil {
			t.Fatalf("%s: tidwall/wal's tail buffer not found: pre-sizing no longer applies", when)
		}
		if cap(*p) < seg || int64(len(*p)) != j.tailBytes {
			t.Fatalf("%s: tail buffer len %d cap %d, want len %d (the records) and cap >= %d", when, len(*p), cap(*p), j.tailBytes, seg)
		}
		return p
	}
	check("after open")
	before := &(*check("before writes"))[:1][0]
	if _, err := j.Append(records(1, 3)); err != nil {
		t.Fatal(err)
	}
	if after := &(*check("after a write"))[:1][0]; after != before {
		t.Fatal("appending to the pre-sized tail reallocated its buffer")
	}
	start := j.tailStart
	for i := 4; j.tailStart == start; i += 5 {
		if _, err := j.Append(records(i, 5)); err != nil {
			t.Fatal(err)
		}
	}
	check("after a cycle")
	j.Close()
	j, _ = openJournal(t, dir, seg)
	check("after reopening")
}
