package harness

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

func us(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Microsecond
	}
	return out
}

func TestNearestRank(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    float64
		n    int
		want int
	}{
		{50, 1, 1}, {95, 1, 1}, {100, 1, 1},
		{50, 2, 1}, {95, 2, 2},
		{50, 10, 5}, {95, 10, 10}, {90, 10, 9},
		{50, 20, 10}, {95, 20, 19}, {100, 20, 20},
		{50, 100, 50}, {95, 100, 95}, {99, 100, 99},
		{50, 3810, 1905}, {95, 3810, 3620}, // ceil(3619.5)
		{0, 5, 1}, {-1, 5, 1}, {150, 5, 5},
	}
	for _, c := range cases {
		if got := NearestRank(c.p, c.n); got != c.want {
			t.Errorf("NearestRank(%v, %d) = %d, want %d", c.p, c.n, got, c.want)
		}
	}
}

func TestLatenciesPercentiles(t *testing.T) {
	t.Parallel()
	// 1..100 µs shuffled: p50 = 50, p95 = 95, max = 100.
	l := NewLatencies(100)
	for i := 0; i < 100; i++ {
		l.Record(time.Duration((i*37)%100+1) * time.Microsecond)
	}
	if got := l.Percentile(50); got != 50*time.Microsecond {
		t.Errorf("p50 = %v", got)
	}
	if got := l.Percentile(95); got != 95*time.Microsecond {
		t.Errorf("p95 = %v", got)
	}
	if got := l.Max(); got != 100*time.Microsecond {
		t.Errorf("max = %v", got)
	}

	// Classic nearest-rank example: {15, 20, 35, 40, 50}
	// p5 = 15, p30 = 20, p40 = 20, p50 = 35, p100 = 50.
	l = NewLatencies(5)
	for _, d := range us(50, 15, 40, 20, 35) {
		l.Record(d)
	}
	for p, want := range map[float64]int{5: 15, 30: 20, 40: 20, 50: 35, 95: 50, 100: 50} {
		if got := l.Percentile(p); got != time.Duration(want)*time.Microsecond {
			t.Errorf("p%v = %v, want %dµs", p, got, want)
		}
	}

	// Outlier: 19 fast samples and one slow one; p95 of 20 is rank 19.
	l = NewLatencies(20)
	for i := 0; i < 19; i++ {
		l.Record(10 * time.Microsecond)
	}
	l.Record(5 * time.Millisecond)
	var r Result
	l.Fill(&r)
	if r.P50us != 10 || r.P95us != 10 || r.MaxUs != 5000 {
		t.Errorf("Fill = %+v, want p50 10 p95 10 max 5000", r)
	}

	// Recording after a percentile query re-sorts.
	l.Record(time.Microsecond)
	if got := l.Percentile(1); got != time.Microsecond {
		t.Errorf("after re-record p1 = %v", got)
	}

	var empty Latencies
	if empty.Percentile(50) != 0 || empty.Max() != 0 {
		t.Error("empty latencies should report 0")
	}
}

func TestLatenciesRecordDoesNotAllocate(t *testing.T) {
	// Serial: testing.AllocsPerRun reads runtime.MemStats, which counts the
	// allocations of the whole process.
	l := NewLatencies(1000)
	allocs := testing.AllocsPerRun(900, func() { l.Record(time.Microsecond) })
	if allocs != 0 {
		t.Errorf("Record allocates %v times per sample", allocs)
	}
}

func TestMergeAndFractionalMicros(t *testing.T) {
	t.Parallel()
	a, b := NewLatencies(2), NewLatencies(2)
	a.Record(1500 * time.Nanosecond)
	b.Record(2500 * time.Nanosecond)
	a.Merge(b)
	if a.Len() != 2 || Micros(a.Max()) != 2.5 || Micros(a.Percentile(50)) != 1.5 {
		t.Errorf("merged: len %d max %v p50 %v", a.Len(), a.Max(), a.Percentile(50))
	}
}

func TestSerialAndConcurrent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	r, err := Serial("s", 50, func(int) error { calls.Add(1); return nil })
	if err != nil || calls.Load() != 50 || r.Writers != 1 || r.OpsPerS <= 0 || r.Name != "s" {
		t.Fatalf("Serial = %+v, %v (calls %d)", r, err, calls.Load())
	}

	calls.Store(0)
	seen := make([][]bool, 4)
	for w := range seen {
		seen[w] = make([]bool, 25)
	}
	r, err = Concurrent("c", 4, 25, func(w, i int) error {
		calls.Add(1)
		seen[w][i] = true
		return nil
	})
	if err != nil || calls.Load() != 100 || r.Writers != 4 || r.OpsPerS <= 0 || r.Note != "n=100" {
		t.Fatalf("Concurrent = %+v, %v (calls %d)", r, err, calls.Load())
	}
	for w := range seen {
		for i, ok := range seen[w] {
			if !ok {
				t.Errorf("writer %d op %d not run", w, i)
			}
		}
	}

	r, err = ConcurrentFor("d", 3, 30*time.Millisecond, func(int, int) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil || r.OpsPerS <= 0 || r.P50us < 1000 {
		t.Fatalf("ConcurrentFor = %+v, %v", r, err)
	}

	boom := errors.New("boom")
	_, err = Concurrent("e", 4, 1000, func(w, i int) error {
		if w == 2 && i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Concurrent error = %v, want boom", err)
	}
	if _, err := Serial("e", 10, func(i int) error {
		if i == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("Serial error = %v, want boom", err)
	}
}

// TestGroupCommitterAnswersEveryoneOnceAndWritesEveryByte submits a unique,
// self-identifying record from every submitter and checks that each Commit
// returned exactly once, that the committer answered exactly as many
// requests, and that the file holds every record exactly once.
func TestGroupCommitterAnswersEveryoneOnceAndWritesEveryByte(t *testing.T) {
	t.Parallel()
	const (
		writers = 64
		per     = 40
		recSize = 100
	)
	path := filepath.Join(t.TempDir(), "group.log")
	g, err := NewGroupCommitter(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	var returned atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				rec := bytes.Repeat([]byte{'x'}, recSize)
				binary.BigEndian.PutUint32(rec[0:], uint32(w))
				binary.BigEndian.PutUint32(rec[4:], uint32(i))
				if err := g.Commit(rec); err != nil {
					t.Errorf("writer %d op %d: %v", w, i, err)
					return
				}
				returned.Add(1)
			}
		}(w)
	}
	wg.Wait()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	st := g.Stats()
	const total = writers * per
	if returned.Load() != total || st.Ops != total {
		t.Fatalf("returned %d, answered %d, want %d", returned.Load(), st.Ops, total)
	}
	if st.Bytes != total*recSize || st.Batches < 1 || st.Batches > total || st.MaxBatch < 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stats %+v mean batch %.1f", st, st.MeanBatch())

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != total*recSize {
		t.Fatalf("file holds %d bytes, want %d", len(data), total*recSize)
	}
	count := make(map[[2]uint32]int)
	for off := 0; off < len(data); off += recSize {
		rec := data[off : off+recSize]
		key := [2]uint32{binary.BigEndian.Uint32(rec[0:]), binary.BigEndian.Uint32(rec[4:])}
		if key[0] >= writers || key[1] >= per || !bytes.Equal(rec[8:], bytes.Repeat([]byte{'x'}, recSize-8)) {
			t.Fatalf("corrupt record at %d", off)
		}
		count[key]++
	}
	if len(count) != total {
		t.Fatalf("%d distinct records, want %d", len(count), total)
	}
	for k, c := range count {
		if c != 1 {
			t.Fatalf("record %v written %d times", k, c)
		}
	}

	if err := g.Commit([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v, want ErrClosed", err)
	}
	if st2 := g.Stats(); st2.Ops != total {
		t.Fatalf("Commit after Close was answered: %+v", st2)
	}
}

func TestRawBaselines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := RawAppendFdatasync(dir, DefaultPayload, 20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != NameRawAppend || r.Writers != 1 || r.P50us <= 0 || r.P95us < r.P50us || r.MaxUs < r.P95us {
		t.Fatalf("raw append = %+v", r)
	}
	for _, w := range []int{1, 8} {
		r, err = RawGroupFdatasync(dir, DefaultPayload, w, Budget{OpsPerWriter: 5})
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != NameRawGroup || r.Writers != w || r.OpsPerS <= 0 || !strings.HasPrefix(r.Note, "n=") {
			t.Fatalf("raw group w=%d = %+v", w, r)
		}
	}
	r, err = RawGroupFdatasync(dir, 100, 2, Budget{Duration: 20 * time.Millisecond})
	if err != nil || r.OpsPerS <= 0 {
		t.Fatalf("raw group by duration = %+v, %v", r, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("baselines left %d files behind", len(left))
	}
}

func TestPayload(t *testing.T) {
	t.Parallel()
	p := Payload(DefaultPayload)
	if len(p) != 2273 || bytes.IndexByte(p, 0) >= 0 {
		t.Fatalf("payload len %d", len(p))
	}
	if !bytes.Equal(p, Payload(DefaultPayload)) {
		t.Fatal("payload not deterministic")
	}
}

func TestJSONAndTable(t *testing.T) {
	t.Parallel()
	rep := Report{Results: []Result{
		{Name: "raw_append_fdatasync", P50us: 812.25, P95us: 1500, MaxUs: 9000, OpsPerS: 1100, Writers: 1},
		{Name: "x"},
	}}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, rep); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var generic map[string][]map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	first, second := generic["results"][0], generic["results"][1]
	for _, k := range []string{"name", "p50_us", "p95_us", "max_us", "ops_per_s", "writers"} {
		if _, ok := first[k]; !ok {
			t.Errorf("missing key %q in %s", k, b)
		}
	}
	if len(second) != 1 || second["name"] != "x" {
		t.Errorf("zero fields not omitted: %v", second)
	}

	var sb strings.Builder
	if err := WriteTable(&sb, rep.Results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(sb.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "name") || !strings.Contains(lines[1], " 812 ") {
		t.Fatalf("table:\n%s", sb.String())
	}
	// Right-aligned numeric columns end at the same offset.
	runeEnd := func(line, sub string) int { return utf8.RuneCountInString(line[:strings.Index(line, sub)+len(sub)]) }
	if i, j := runeEnd(lines[0], "ops/s"), runeEnd(lines[1], "1100"); i != j {
		t.Errorf("ops/s column misaligned:\n%s", sb.String())
	}
}
