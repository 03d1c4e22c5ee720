package harness

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Serial runs op n times in a row on the calling goroutine, timing each call
// on its own, and returns the latency percentiles and the throughput (n
// divided by the wall time from the first call's start to the last call's
// end). The first error
// stops the run and is returned, wrapped with the op index.
func Serial(name string, n int, op func(i int) error) (Result, error) {
	if n <= 0 {
		return Result{}, fmt.Errorf("harness: %s: n must be positive, got %d", name, n)
	}
	lat := NewLatencies(n)
	start := time.Now()
	end := start
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := op(i); err != nil {
			return Result{}, fmt.Errorf("%s: op %d: %w", name, i, err)
		}
		end = time.Now()
		lat.Record(end.Sub(t0))
	}
	elapsed := end.Sub(start)
	r := Result{Name: name, Writers: 1, Note: fmt.Sprintf("n=%d", n)}
	lat.Fill(&r)
	r.OpsPerS = float64(n) / elapsed.Seconds()
	return r, nil
}

// Budget bounds a concurrent run: by a fixed number of operations per writer
// when OpsPerWriter is positive, otherwise by wall-clock Duration.
type Budget struct {
	// OpsPerWriter, when positive, is the number of operations every writer
	// performs; Duration is then ignored.
	OpsPerWriter int
	// Duration is how long writers keep issuing operations when
	// OpsPerWriter is zero. An operation in flight at the deadline is
	// completed and counted.
	Duration time.Duration
}

// String describes the budget, e.g. "2s" or "100 ops/writer".
func (b Budget) String() string {
	if b.OpsPerWriter > 0 {
		return fmt.Sprintf("%d ops/writer", b.OpsPerWriter)
	}
	return b.Duration.String()
}

// RunBudget runs op with the given number of writers under budget b, through
// [Concurrent] or [ConcurrentFor].
func RunBudget(name string, writers int, b Budget, op func(writer, i int) error) (Result, error) {
	r, _, err := runBudget(name, writers, b, op)
	return r, err
}

// runBudget is RunBudget also returning every operation's latency.
func runBudget(name string, writers int, b Budget, op func(writer, i int) error) (Result, *Latencies, error) {
	if b.OpsPerWriter > 0 {
		return concurrent(name, writers, b.OpsPerWriter, 0, op)
	}
	if b.Duration <= 0 {
		return Result{}, nil, fmt.Errorf("harness: %s: duration must be positive, got %v", name, b.Duration)
	}
	return concurrent(name, writers, 0, b.Duration, op)
}

// Concurrent starts writers goroutines that each call op(writer, i) for
// i = 0 .. opsPerWriter-1, released together by a start gate. It reports
// the per-operation latency percentiles over all writers and the overall
// throughput: writers*opsPerWriter divided by the wall time from the gate
// opening to the last operation finishing. The first error stops every
// writer (after its current operation) and is returned.
func Concurrent(name string, writers, opsPerWriter int, op func(writer, i int) error) (Result, error) {
	if opsPerWriter <= 0 {
		return Result{}, fmt.Errorf("harness: %s: opsPerWriter must be positive, got %d", name, opsPerWriter)
	}
	r, _, err := concurrent(name, writers, opsPerWriter, 0, op)
	return r, err
}

// ConcurrentFor is like [Concurrent] but every writer keeps calling op until
// d has elapsed since the start gate opened. Each writer's sample slice is
// pre-sized from a guess and grows by amortised appends if the guess is short.
func ConcurrentFor(name string, writers int, d time.Duration, op func(writer, i int) error) (Result, error) {
	if d <= 0 {
		return Result{}, fmt.Errorf("harness: %s: duration must be positive, got %v", name, d)
	}
	r, _, err := concurrent(name, writers, 0, d, op)
	return r, err
}

func concurrent(name string, writers, opsPerWriter int, d time.Duration, op func(writer, i int) error) (Result, *Latencies, error) {
	if writers <= 0 {
		return Result{}, nil, fmt.Errorf("harness: %s: writers must be positive, got %d", name, writers)
	}
	capacity := opsPerWriter
	if capacity == 0 {
		// Guess: a few thousand operations per second in total, for d.
		capacity = int(d.Seconds()*4096)/writers + 64
	}
	lats := make([]*Latencies, writers)
	for w := range lats {
		lats[w] = NewLatencies(capacity)
	}
	ends := make([]time.Time, writers)

	var (
		failed   atomic.Bool
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
		ready    sync.WaitGroup
		gate     = make(chan struct{})
		start    time.Time
		deadline time.Time
	)
	wg.Add(writers)
	ready.Add(writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			defer wg.Done()
			lat := lats[w]
			ready.Done()
			<-gate
			last := start
			for i := 0; opsPerWriter == 0 || i < opsPerWriter; i++ {
				if failed.Load() {
					break
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: writer %d op %d: %w", name, w, i, err) })
					failed.Store(true)
					break
				}
				last = time.Now()
				lat.Record(last.Sub(t0))
				if opsPerWriter == 0 && !last.Before(deadline) {
					break
				}
			}
			ends[w] = last
		}(w)
	}
	ready.Wait()
	start = time.Now()
	deadline = start.Add(d)
	close(gate) // publishes start and deadline to the writers
	wg.Wait()
	if firstErr != nil {
		return Result{}, nil, firstErr
	}

	end := start
	all := NewLatencies(0)
	total := 0
	for w := range lats {
		total += lats[w].Len()
		if ends[w].After(end) {
			end = ends[w]
		}
	}
	all.d = make([]time.Duration, 0, total)
	for _, l := range lats {
		all.Merge(l)
	}
	r := Result{Name: name, Writers: writers, Note: fmt.Sprintf("n=%d", total)}
	all.Fill(&r)
	if el := end.Sub(start); el > 0 {
		r.OpsPerS = float64(total) / el.Seconds()
	}
	return r, all, nil
}
