package harness

import (
	"errors"
	"testing"
	"time"
)

// TestStallCeilingFailsTheRun: in every kind of run, the first operation
// that reaches the ceiling stops it with a *StallError naming the workload,
// the writer and the operation's index. The ceiling is a parameter so
// that the test injects a 60 ms operation against a 15 ms ceiling instead
// of waiting 5 s; the same runs under a ceiling of a minute complete.
func TestStallCeilingFailsTheRun(t *testing.T) {
	t.Parallel()
	const slowAt = 5
	// slow is the injected stall: operation slowAt of writer 0 (or of the
	// serial run) takes 60 ms, every other one nothing.
	slow := func(writer, i int) error {
		if writer == 0 && i == slowAt {
			time.Sleep(60 * time.Millisecond)
		}
		return nil
	}
	tests := []struct {
		name     string
		run      func(Runner) error
		workload string
		writer   int
		op       int
	}{
		{"serial", func(r Runner) error {
			_, err := r.Serial("w", 20, func(i int) error { return slow(0, i) })
			return err
		}, "w", -1, slowAt},
		{"concurrent", func(r Runner) error {
			_, err := r.Concurrent("w", 3, 20, slow)
			return err
		}, "w", 0, slowAt},
		{"concurrent for a time", func(r Runner) error {
			_, err := r.RunBudget("w", 2, Budget{Duration: 200 * time.Millisecond}, slow)
			return err
		}, "w", 0, slowAt},
		{"alternating serial", func(r Runner) error {
			// Side b's ops are counted across its rounds: op 5 is round 1's
			// third (rounds of 3).
			_, err := r.AlternateSerial([]SerialSide{{Name: "a", Op: func(int) error { return nil }}, {Name: "b", Op: func(i int) error { return slow(0, i) }}}, 4, 3)
			return err
		}, "b", -1, slowAt},
		{"alternating concurrent", func(r Runner) error {
			_, err := r.AlternateConcurrent([]ConcurrentSide{{Name: "a", Op: func(int, int) error { return nil }}, {Name: "b", Op: slow}}, 2, 2, Budget{OpsPerWriter: 10})
			return err
		}, "b", 0, slowAt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run(Runner{Ceiling: 15 * time.Millisecond})
			var se *StallError
			if !errors.As(err, &se) || se.Workload != tc.workload || se.Writer != tc.writer || se.Op != tc.op || se.Took < se.Ceiling || se.Ceiling != 15*time.Millisecond {
				t.Fatalf("err %v (%+v), want a stall of %s writer %d op %d", err, se, tc.workload, tc.writer, tc.op)
			}
			if err := tc.run(Runner{Ceiling: time.Minute}); err != nil {
				t.Fatalf("under a ceiling of a minute: %v", err)
			}
		})
	}
}

// TestDefaultStallCeiling: the zero Runner applies the specification's
// 5 s, inclusive (an operation "taking five seconds" fails).
func TestDefaultStallCeiling(t *testing.T) {
	t.Parallel()
	if err := (Runner{}).Check("w", -1, 3, StallCeiling-time.Microsecond); err != nil {
		t.Errorf("just under 5 s: %v", err)
	}
	err := Runner{}.Check("w", 2, 3, StallCeiling)
	var se *StallError
	if !errors.As(err, &se) || se.Ceiling != 5*time.Second {
		t.Fatalf("5 s: %v, want a stall at the 5 s ceiling", err)
	}
	if want := "w: writer 2 op 3 took 5s, at or over the stall ceiling of 5s"; err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
}

// TestAfterRoundFollowsEveryRound: the hook runs once after each round,
// in order, once every side has run its share of the round.
func TestAfterRoundFollowsEveryRound(t *testing.T) {
	t.Parallel()
	var ops []string
	var rounds []int
	r := Runner{AfterRound: func(k int) {
		rounds = append(rounds, k)
		if len(ops) != 2*(k+1)*2 {
			t.Errorf("after round %d: %d ops ran, want %d", k, len(ops), 2*(k+1)*2)
		}
	}}
	side := func(name string) SerialSide {
		return SerialSide{Name: name, Op: func(int) error { ops = append(ops, name); return nil }}
	}
	if _, err := r.AlternateSerial([]SerialSide{side("a"), side("b")}, 3, 2); err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 3 || rounds[0] != 0 || rounds[2] != 2 {
		t.Fatalf("AfterRound saw rounds %v, want [0 1 2]", rounds)
	}
}
