package regcheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// hop is one operation of a hand-built cycle, with timestamps relative to
// the cycle's start (0 to 99).
type hop struct {
	c         Call
	r         Result
	call, ret int64
}

func at(c Call, r Result, callTs, ret int64) hop { return hop{c, r, callTs, ret} }

// hcycle is one cycle of a hand-built history: the child's operations and
// what the reads after the reopen showed; a key missing from obs is one
// whose read failed.
type hcycle struct {
	ops []hop
	obs map[string]Result
}

// feed runs cycles through a checker the way Run does: an observation of
// every key before the first cycle (the store is new), each cycle's
// operations, then its observations. It returns the checker and the
// violations.
func feed(t *testing.T, keys []string, cycles []hcycle) (*Checker, []string) {
	t.Helper()
	c := NewChecker(0)
	var v []string
	for i, k := range keys {
		c.Observe(-1, porcupine.Operation{Input: get(k), Output: notFound, Call: int64(2 * i), Return: int64(2*i + 1)})
	}
	for n, cy := range cycles {
		base := int64(n+1) * 1000
		for i, o := range cy.ops {
			err := c.Add(porcupine.Operation{Input: o.c, Output: o.r, Call: base + o.call, Return: base + o.ret,
				Metadata: Origin{Cycle: n, Op: uint64(i + 1)}})
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, k := range keys {
			r, ok := cy.obs[k]
			if !ok {
				continue
			}
			ts := base + 500 + int64(2*i)
			if msg := c.Observe(n, porcupine.Operation{Input: get(k), Output: r, Call: ts, Return: ts + 1}); msg != "" {
				v = append(v, msg)
			}
		}
	}
	return c, v
}

// TestCheckerWindows: hand-built histories across restarts, checked window
// by window. A window that no linearization explains fails with a message
// naming the key, the cycle and the operations where the check got stuck.
func TestCheckerWindows(t *testing.T) {
	t.Parallel()
	k := []string{"k"}
	cases := []struct {
		name    string
		keys    []string
		cycles  []hcycle
		windows int
		illegal []string // the windows reported, "" if none
		says    []string // in the violation
	}{
		{"linearizable across restarts", k, []hcycle{
			{[]hop{
				at(put("k", "a", 0), ok(1, ""), 1, 2),
				at(put("k", "b", 1), ok(2, ""), 3, 6),
				at(put("k", "c", 1), conflictAt(2), 4, 7),
				at(put("k", "d", 2), killed, 8, 90), // cut short, kept
			}, map[string]Result{"k": ok(3, "d")}},
			{[]hop{
				at(get("k"), ok(3, "d"), 1, 2),
				at(del("k", 3), ok(4, ""), 3, 4),
				at(put("k", "e", 0), killed, 5, 90), // cut short, lost
			}, map[string]Result{"k": notFound}},
			{[]hop{
				at(put("k", "f", 0), ok(5, ""), 1, 2),
				at(put("k", "g", Blind), ok(6, ""), 3, 4),
			}, map[string]Result{"k": ok(6, "g")}},
		}, 3, nil, nil},
		{"acknowledged write lost across a window boundary", k, []hcycle{
			{[]hop{at(put("k", "a", 0), ok(1, ""), 1, 2)}, map[string]Result{"k": ok(1, "a")}},
			{[]hop{at(put("k", "b", 1), ok(2, ""), 1, 2)}, map[string]Result{"k": ok(1, "a")}},
		}, 2, []string{"k (cycle 1)"}, []string{
			"cycle 1: the history of k (cycle 1) is not linearizable",
			"2 operations from a@1",
			"ending with op 1 of cycle 1 (put k=b if 1 -> ok @2), leaving b@2",
			"nothing explains the read after cycle 1's reopen (get k -> ok a@1)",
		}},
		{"a value goes back after a restart", k, []hcycle{
			{[]hop{
				at(put("k", "a", 0), ok(1, ""), 1, 2),
				at(put("k", "b", 1), ok(2, ""), 3, 4),
			}, map[string]Result{"k": ok(2, "b")}},
			{[]hop{at(get("k"), ok(1, "a"), 1, 2)}, map[string]Result{"k": ok(2, "b")}},
		}, 2, []string{"k (cycle 1)"}, []string{
			"cycle 1: the history of k (cycle 1)",
			"from b@2",
			"nothing explains op 1 of cycle 1 (get k -> ok a@1)",
		}},
		{"stale read within a window", k, []hcycle{
			{[]hop{
				at(put("k", "a", 0), ok(1, ""), 1, 2),
				at(put("k", "b", 1), ok(2, ""), 3, 4),
				at(get("k"), ok(1, "a"), 5, 6),
			}, map[string]Result{"k": ok(2, "b")}},
		}, 1, []string{"k (cycle 0)"}, []string{
			"cycle 0: the history of k (cycle 0)",
			"4 operations from absent",
			"ending with op 2 of cycle 0 (put k=b if 1 -> ok @2), leaving b@2",
			"nothing explains op 3 of cycle 0 (get k -> ok a@1)",
		}},
		{"a write cut short takes effect after the reopen", k, []hcycle{
			{[]hop{at(put("k", "a", 0), killed, 1, 90)}, map[string]Result{"k": notFound}},
			{[]hop{at(get("k"), ok(1, "a"), 1, 2)}, map[string]Result{"k": ok(1, "a")}},
		}, 2, []string{"k (cycle 1)"}, []string{
			"nothing explains op 1 of cycle 1 (get k -> ok a@1)",
		}},
		{"a failed read after a reopen joins two cycles", k, []hcycle{
			{[]hop{at(put("k", "a", 0), killed, 1, 90)}, nil},
			{[]hop{
				at(get("k"), ok(1, "a"), 1, 2),
				at(put("k", "b", 1), ok(2, ""), 3, 4),
			}, map[string]Result{"k": ok(2, "b")}},
		}, 1, nil, nil},
		{"an acknowledged write lost over a failed read", k, []hcycle{
			{[]hop{at(put("k", "a", 0), ok(1, ""), 1, 2)}, nil},
			{[]hop{at(get("k"), notFound, 1, 2)}, map[string]Result{"k": notFound}},
		}, 1, []string{"k (cycles 0-1)"}, []string{
			"cycle 1: the history of k (cycles 0-1)",
			"ending with op 1 of cycle 0 (put k=a if 0 -> ok @1), leaving a@1",
			"nothing explains op 1 of cycle 1 (get k -> not found)",
		}},
		{"keys are checked apart", []string{"j", "k"}, []hcycle{
			{[]hop{
				at(put("j", "a", 0), ok(1, ""), 1, 2),
				at(put("k", "b", 0), ok(2, ""), 3, 4),
			}, map[string]Result{"j": ok(1, "a"), "k": notFound}},
		}, 2, []string{"k (cycle 0)"}, []string{"the history of k (cycle 0)", "op 2 of cycle 0 (put k=b if 0 -> ok @2)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, v := feed(t, tc.keys, tc.cycles)
			res := c.Result()
			if res.Windows != tc.windows || fmt.Sprint(res.Illegal) != fmt.Sprint(append([]string{}, tc.illegal...)) {
				t.Fatalf("%d windows, illegal %q; want %d, %q (violations %q)", res.Windows, res.Illegal, tc.windows, tc.illegal, v)
			}
			if len(v) != len(tc.illegal) {
				t.Fatalf("violations %q, want one per illegal window %q", v, tc.illegal)
			}
			want := "ok"
			if len(tc.illegal) > 0 {
				want = "illegal"
			}
			if res.Result != want {
				t.Fatalf("result %q, want %q", res.Result, want)
			}
			for _, s := range tc.says {
				if !strings.Contains(strings.Join(v, "\n"), s) {
					t.Errorf("violation %q does not say %q", v, s)
				}
			}
		})
	}
}

// TestCheckerClose: windows no observation closed (the store would not
// reopen) are still checked, from their start.
func TestCheckerClose(t *testing.T) {
	t.Parallel()
	c, v := feed(t, []string{"k"}, []hcycle{
		{[]hop{at(put("k", "a", 0), ok(1, ""), 1, 2)}, map[string]Result{"k": ok(1, "a")}},
		{[]hop{
			at(put("k", "b", 1), ok(2, ""), 1, 2),
			at(get("k"), ok(1, "a"), 3, 4),
		}, nil},
	})
	if len(v) != 0 {
		t.Fatalf("violations before close: %q", v)
	}
	v = c.Close(1)
	if len(v) != 1 || !strings.Contains(v[0], "the history of k (cycle 1)") || !strings.Contains(v[0], "op 2 of cycle 1 (get k -> ok a@1)") {
		t.Fatalf("close: %q", v)
	}
	if c.Held() != 0 {
		t.Fatalf("close left %d operations held", c.Held())
	}
	if res := c.Result(); res.Windows != 2 || res.Result != "illegal" {
		t.Fatalf("after close: %+v", res)
	}
}

// TestCheckerHoldsOneWindow: however many cycles run, the checker holds the
// operations of the open windows only, and none once a cycle's reads
// closed them; every operation was still checked.
func TestCheckerHoldsOneWindow(t *testing.T) {
	t.Parallel()
	keys := []string{"j", "k", "l"}
	c := NewChecker(0)
	for i, k := range keys {
		c.Observe(-1, porcupine.Operation{Input: get(k), Output: notFound, Call: int64(i), Return: int64(i)})
	}
	const cycles, perKey = 300, 20
	rev := map[string]uint64{}
	ts := int64(100)
	for n := range cycles {
		for i := range perKey {
			for _, k := range keys {
				o := porcupine.Operation{Input: put(k, fmt.Sprintf("v%d.%d", n, i), Blind), Call: ts, Return: ts + 1}
				rev[k]++
				o.Output = ok(rev[k], "")
				if err := c.Add(o); err != nil {
					t.Fatal(err)
				}
				ts += 2
			}
		}
		if got, want := c.Held(), perKey*len(keys); got != want {
			t.Fatalf("cycle %d: %d operations held before the reads, want this cycle's %d", n, got, want)
		}
		for _, k := range keys {
			r := ok(rev[k], fmt.Sprintf("v%d.%d", n, perKey-1))
			if msg := c.Observe(n, porcupine.Operation{Input: get(k), Output: r, Call: ts, Return: ts + 1}); msg != "" {
				t.Fatal(msg)
			}
			ts += 2
		}
		if c.Held() != 0 {
			t.Fatalf("cycle %d: %d operations held after every window closed", n, c.Held())
		}
	}
	res := c.Result()
	if res.Result != "ok" || res.Windows != cycles*len(keys) || res.Operations != cycles*len(keys)*(perKey+1) ||
		res.Keys != len(keys) || res.LargestWindow != perKey+1 {
		t.Fatalf("result %+v", res)
	}
}

// TestCheckerUnobservedKey: an operation on a key no read has observed has
// no state to start from, and is refused rather than checked from a guess.
func TestCheckerUnobservedKey(t *testing.T) {
	t.Parallel()
	c := NewChecker(0)
	err := c.Add(porcupine.Operation{Input: put("k", "a", 0), Output: ok(1, ""), Call: 1, Return: 2,
		Metadata: Origin{Cycle: 3, Op: 7}})
	if err == nil || !strings.Contains(err.Error(), `key "k", which no read has observed: op 7 of cycle 3`) {
		t.Fatalf("add on an unobserved key: %v", err)
	}
}
