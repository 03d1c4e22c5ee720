package harness

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestAlternateSerialRotatesAndPools: every round runs each side's whole
// share before the next side, the order rotated by one each round; each
// side sees its operation indexes once, in order, and its Result pools all
// rounds and keeps one RoundStat per round.
func TestAlternateSerialRotatesAndPools(t *testing.T) {
	t.Parallel()
	const rounds, perRound = 4, 3
	var trace []string
	seen := map[string][]int{}
	var sides []SerialSide
	for _, name := range []string{"a", "b", "c"} {
		sides = append(sides, SerialSide{Name: name, Op: func(i int) error {
			if trace[len(trace)-1] != name {
				t.Errorf("%s's op %d ran without its Enter", name, i)
			}
			seen[name] = append(seen[name], i)
			return nil
		}, Enter: func() { trace = append(trace, name) }})
	}
	out, err := AlternateSerial(sides, rounds, perRound)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"}
	if !slices.Equal(trace, want) {
		t.Errorf("side order %v, want %v", trace, want)
	}
	for i, r := range out {
		name := sides[i].Name
		if r.Name != name || r.Writers != 1 || len(r.Rounds) != rounds || r.OpsPerS <= 0 || len(r.Quantiles) == 0 {
			t.Errorf("%s: result %+v", name, r)
		}
		wantIdx := make([]int, rounds*perRound)
		for k := range wantIdx {
			wantIdx[k] = k
		}
		if !slices.Equal(seen[name], wantIdx) {
			t.Errorf("%s ran ops %v, want %v", name, seen[name], wantIdx)
		}
		if want := fmt.Sprintf("n=%d in %d rounds of %d", rounds*perRound, rounds, perRound); !strings.HasPrefix(r.Note, want) {
			t.Errorf("%s: note %q, want prefix %q", name, r.Note, want)
		}
	}
}

// TestAlternateConcurrentRunsBurstsInTurn: no two sides' bursts overlap
// (each burst's writers*ops operations are one side's, back to back), the
// order rotates each round, and an error stops the run.
func TestAlternateConcurrentRunsBurstsInTurn(t *testing.T) {
	t.Parallel()
	const writers, rounds, ops = 3, 2, 5
	var mu sync.Mutex
	var trace []string // the side of every operation, in the order they ran
	side := func(name string) ConcurrentSide {
		return ConcurrentSide{Name: name, Op: func(w, i int) error {
			mu.Lock()
			trace = append(trace, name)
			mu.Unlock()
			return nil
		}}
	}
	out, err := AlternateConcurrent([]ConcurrentSide{side("x"), side("y")}, writers, rounds, Budget{OpsPerWriter: ops})
	if err != nil {
		t.Fatal(err)
	}
	var bursts []string
	for b := range slices.Chunk(trace, writers*ops) {
		for _, name := range b {
			if name != b[0] {
				t.Fatalf("one burst ran %v", b)
			}
		}
		bursts = append(bursts, b[0])
	}
	if want := []string{"x", "y", "y", "x"}; !slices.Equal(bursts, want) {
		t.Errorf("burst order %v, want %v", bursts, want)
	}
	for _, r := range out {
		if len(r.Rounds) != rounds || r.Writers != writers || r.OpsPerS <= 0 || !strings.HasPrefix(r.Note, fmt.Sprintf("n=%d ", writers*rounds*ops)) {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	boom := errors.New("boom")
	_, err = AlternateConcurrent([]ConcurrentSide{side("z"), {Name: "bad", Op: func(int, int) error { return boom }}}, writers, rounds, Budget{OpsPerWriter: ops})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
}

// TestRoundRatios pairs rounds by position and sorts the ratios.
func TestRoundRatios(t *testing.T) {
	t.Parallel()
	a := Result{Rounds: []RoundStat{{P50us: 300}, {P50us: 100}, {P50us: 50}}}
	b := Result{Rounds: []RoundStat{{P50us: 100}, {P50us: 200}, {P50us: 0}}}
	got := RoundRatios(a, b, func(r RoundStat) float64 { return r.P50us })
	if want := []float64{0.5, 3}; !slices.Equal(got, want) {
		t.Errorf("ratios %v, want %v (a round whose baseline is 0 is left out)", got, want)
	}
}
