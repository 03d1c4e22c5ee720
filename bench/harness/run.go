package harness

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// StallCeiling is the specification's stall ceiling: a run in which any
// single measured operation takes this long fails. It is no latency
// target; it tells a stalled store (a lost wake-up, a sync that never
// returns) from a slow one.
const StallCeiling = 5 * time.Second

// Runner runs measurements under a stall ceiling. The package's functions
// ([Serial], [Concurrent], ...) are those of the zero Runner.
type Runner struct {
	// Ceiling is the stall ceiling: an operation that takes at least this
	// long stops the run with a *StallError. 0 means StallCeiling.
	Ceiling time.Duration
	// AfterRound, when set, is called after each round of an alternating
	// run (every side has run its share), untimed, with the round's
	// number: where a workload samples the process between rounds.
	AfterRound func(round int)
}

// StallError is an operation that reached the stall ceiling.
type StallError struct {
	Workload string
	// Writer is the concurrent writer that ran the operation; -1 for a
	// serial run.
	Writer int
	// Op is the operation's index within the workload's run (for a
	// writer, within its own operations).
	Op      int
	Took    time.Duration
	Ceiling time.Duration
}

func (e *StallError) Error() string {
	op := fmt.Sprintf("op %d", e.Op)
	if e.Writer >= 0 {
		op = fmt.Sprintf("writer %d op %d", e.Writer, e.Op)
	}
	return fmt.Sprintf("%s: %s took %v, at or over the stall ceiling of %v", e.Workload, op, e.Took, e.Ceiling)
}

func (r Runner) ceiling() time.Duration {
	if r.Ceiling <= 0 {
		return StallCeiling
	}
	return r.Ceiling
}

// Check returns a *StallError if took, the duration of operation op of
// writer (-1: a serial run) of workload, reached the ceiling, else nil:
// for workloads that time their operations themselves.
func (r Runner) Check(workload string, writer, op int, took time.Duration) error {
	if c := r.ceiling(); took >= c {
		return &StallError{Workload: workload, Writer: writer, Op: op, Took: took, Ceiling: c}
	}
	return nil
}

// Serial is [Runner.Serial] under the default stall ceiling.
func Serial(name string, n int, op func(i int) error) (Result, error) {
	return Runner{}.Serial(name, n, op)
}

// Serial runs op n times in a row on the calling goroutine, timing each call
// on its own, and returns the latency percentiles and the throughput (n
// divided by the wall time from the first call's start to the last call's
// end). The first error, or the first operation to reach the stall
// ceiling, stops the run and is returned, naming the op index.
func (r Runner) Serial(name string, n int, op func(i int) error) (Result, error) {
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
		if err := r.Check(name, -1, i, end.Sub(t0)); err != nil {
			return Result{}, err
		}
	}
	elapsed := end.Sub(start)
	res := Result{Name: name, Writers: 1, Note: fmt.Sprintf("n=%d", n)}
	lat.Fill(&res)
	res.OpsPerS = float64(n) / elapsed.Seconds()
	return res, nil
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

// RunBudget is [Runner.RunBudget] under the default stall ceiling.
func RunBudget(name string, writers int, b Budget, op func(writer, i int) error) (Result, error) {
	return Runner{}.RunBudget(name, writers, b, op)
}

// RunBudget runs op with the given number of writers under budget b, through
// [Runner.Concurrent] or [Runner.ConcurrentFor].
func (r Runner) RunBudget(name string, writers int, b Budget, op func(writer, i int) error) (Result, error) {
	res, _, err := r.runBudget(name, writers, b, op)
	return res, err
}

// runBudget is RunBudget also returning every operation's latency.
func (r Runner) runBudget(name string, writers int, b Budget, op func(writer, i int) error) (Result, *Latencies, error) {
	if b.OpsPerWriter > 0 {
		return r.concurrent(name, writers, b.OpsPerWriter, 0, op)
	}
	if b.Duration <= 0 {
		return Result{}, nil, fmt.Errorf("harness: %s: duration must be positive, got %v", name, b.Duration)
	}
	return r.concurrent(name, writers, 0, b.Duration, op)
}

// Concurrent is [Runner.Concurrent] under the default stall ceiling.
func Concurrent(name string, writers, opsPerWriter int, op func(writer, i int) error) (Result, error) {
	return Runner{}.Concurrent(name, writers, opsPerWriter, op)
}

// Concurrent starts writers goroutines that each call op(writer, i) for
// i = 0 .. opsPerWriter-1, released together by a start gate. It reports
// the per-operation latency percentiles over all writers and the overall
// throughput: writers*opsPerWriter divided by the wall time from the gate
// opening to the last operation finishing. The first error stops every
// writer (after its current operation) and is returned, as does the first
// operation to reach the stall ceiling.
func (r Runner) Concurrent(name string, writers, opsPerWriter int, op func(writer, i int) error) (Result, error) {
	if opsPerWriter <= 0 {
		return Result{}, fmt.Errorf("harness: %s: opsPerWriter must be positive, got %d", name, opsPerWriter)
	}
	res, _, err := r.concurrent(name, writers, opsPerWriter, 0, op)
	return res, err
}

// ConcurrentFor is [Runner.ConcurrentFor] under the default stall ceiling.
func ConcurrentFor(name string, writers int, d time.Duration, op func(writer, i int) error) (Result, error) {
	return Runner{}.ConcurrentFor(name, writers, d, op)
}

// ConcurrentFor is like [Runner.Concurrent] but every writer keeps calling op until
// d has elapsed since the start gate opened. Each writer's sample slice is
// pre-sized from a guess and grows by amortised appends if the guess is short.
func (r Runner) ConcurrentFor(name string, writers int, d time.Duration, op func(writer, i int) error) (Result, error) {
	if d <= 0 {
		return Result{}, fmt.Errorf("harness: %s: duration must be positive, got %v", name, d)
	}
	res, _, err := r.concurrent(name, writers, 0, d, op)
	return res, err
}

func (r Runner) concurrent(name string, writers, opsPerWriter int, d time.Duration, op func(writer, i int) error) (Result, *Latencies, error) {
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
				if err := r.Check(name, w, i, last.Sub(t0)); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					break
				}
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
	res := Result{Name: name, Writers: writers, Note: fmt.Sprintf("n=%d", total)}
	all.Fill(&res)
	if el := end.Sub(start); el > 0 {
		res.OpsPerS = float64(total) / el.Seconds()
	}
	return res, all, nil
}
