package torture

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability is the outcome of the history check.
type Linearizability struct {
	Result     string `json:"result"` // "ok", "illegal" or "unknown" (a window's check timed out)
	Operations int    `json:"operations"`
	Keys       int    `json:"keys"`
	Windows    int    `json:"windows"` // key windows checked, each between two observations
	// LargestWindow is the most operations one window held: with one
	// window per key open at a time, what bounds the check's memory.
	LargestWindow int `json:"largest_window"`
	// Illegal and TimedOut name the windows as "key (cycle N)" or
	// "key (cycles M-N)".
	Illegal  []string `json:"illegal_windows"` // windows no linearization explains
	TimedOut []string `json:"timed_out_windows"`
}

// origin says where a history operation came from, for messages; it rides
// in porcupine's Metadata, which the check ignores.
type origin struct {
	Cycle  int
	Op     uint64 // the child's operation number
	Reopen bool   // the parent's read after the cycle's kill and reopen
}

// window is one key's history since its last definite observation.
type window struct {
	start register // what the observation showed
	// since is the first cycle whose operations the window holds: the
	// cycle after the observation, or earlier cycles too when a read after
	// a reopen failed and so closed nothing.
	since int
	ops   []porcupine.Operation
}

// checker checks the hot keys' history window by window. A window is
// one key's operations between two definite observations (reads with no
// operation in flight); it is checked from the state the first showed, with
// the second as its last operation, and then dropped, so the checker holds
// at most one window per key whatever the length of the run.
type checker struct {
	timeout time.Duration // per window; zero means none
	windows map[string]*window
	res     Linearizability
}

func newChecker(timeout time.Duration) *checker {
	return &checker{timeout: timeout, windows: map[string]*window{},
		res: Linearizability{Illegal: []string{}, TimedOut: []string{}}}
}

// add puts an operation answered in the current cycle, or cut short by
// its kill, into its key's window. A key no observation has covered has
// no state to start from: that is a fault of the harness, reported.
func (c *checker) add(o porcupine.Operation) error {
	k := o.Input.(call).Key
	w := c.windows[k]
	if w == nil {
		return fmt.Errorf("operation on key %q, which no read has observed: %s", k, describe(o))
	}
	w.ops = append(w.ops, o)
	return nil
}

// observe closes key's window with o, a read the parent made after
// cycle's kill with nothing in flight: every operation added before it
// returned or was cut short before o was called. It checks the window and
// starts the next from what o showed. It returns a violation, or "".
// A first observation of a key (cycle -1, before any child) only starts
// its window.
func (c *checker) observe(cycle int, o porcupine.Operation) string {
	k := o.Input.(call).Key
	o.Metadata = origin{Cycle: cycle, Reopen: true}
	w := c.windows[k]
	c.windows[k] = &window{start: observed(o.Output.(result)), since: cycle + 1}
	if w == nil {
		return ""
	}
	w.ops = append(w.ops, o)
	return c.check(k, w, cycle)
}

// close checks the windows no observation closed (the store would not
// reopen, or a read after the last reopen failed): their operations are
// checked from their start, with nothing known of the end. It returns the
// violations.
func (c *checker) close(cycle int) []string {
	var v []string
	for _, k := range slices.Sorted(maps.Keys(c.windows)) {
		w := c.windows[k]
		c.windows[k] = &window{start: w.start, since: cycle + 1}
		if len(w.ops) == 0 {
			continue
		}
		if msg := c.check(k, w, cycle); msg != "" {
			v = append(v, msg)
		}
	}
	return v
}

// held is how many operations the checker holds: those of the open
// windows only.
func (c *checker) held() int {
	n := 0
	for _, w := range c.windows {
		n += len(w.ops)
	}
	return n
}

// result is the outcome of every window checked so far.
func (c *checker) result() Linearizability {
	res := c.res
	res.Keys = len(c.windows)
	switch {
	case len(res.Illegal) > 0:
		res.Result = "illegal"
	case len(res.TimedOut) > 0:
		res.Result = "unknown"
	default:
		res.Result = "ok"
	}
	return res
}

// check runs porcupine on one window closed at cycle.
func (c *checker) check(key string, w *window, cycle int) string {
	c.res.Windows++
	c.res.Operations += len(w.ops)
	c.res.LargestWindow = max(c.res.LargestWindow, len(w.ops))
	name := fmt.Sprintf("%s (cycle %d)", key, cycle)
	if w.since < cycle {
		name = fmt.Sprintf("%s (cycles %d-%d)", key, w.since, cycle)
	}
	m := modelFrom(w.start)
	switch porcupine.CheckOperationsTimeout(m, w.ops, c.timeout) {
	case porcupine.Ok:
		return ""
	case porcupine.Unknown:
		c.res.TimedOut = append(c.res.TimedOut, name)
		return ""
	}
	c.res.Illegal = append(c.res.Illegal, name)
	return fmt.Sprintf("cycle %d: the history of %s is not linearizable: %s", cycle, name, explain(m, w, c.timeout))
}

// explain says where the check got stuck: the longest order of the
// window's operations the model accepts, and the operation that must come
// next (the unexplained one that returned first) but cannot. The search
// runs again, recording partial orders, only for a window already found
// illegal.
func explain(m porcupine.Model, w *window, timeout time.Duration) string {
	_, info := porcupine.CheckOperationsVerbose(m, w.ops, timeout)
	var longest []int
	for _, p := range info.PartialLinearizations()[0] {
		if len(p) > len(longest) || len(p) == len(longest) && slices.Compare(p, longest) < 0 {
			longest = p
		}
	}
	in := make([]bool, len(w.ops))
	states := []register{w.start}
	for _, i := range longest {
		in[i] = true
		var next []register
		for _, s := range states {
			for _, n := range step(s, w.ops[i].Input.(call), w.ops[i].Output.(result)) {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	stuck := -1
	for i, o := range w.ops {
		if !in[i] && (stuck < 0 || o.Return < w.ops[stuck].Return) {
			stuck = i
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations from %v", len(w.ops), w.start)
	if len(longest) > 0 {
		fmt.Fprintf(&b, "; at most %d of them can be ordered, ending with %s, leaving %s", len(longest),
			describe(w.ops[longest[len(longest)-1]]), registers(states))
	}
	fmt.Fprintf(&b, "; then nothing explains %s", describe(w.ops[stuck]))
	return b.String()
}

// registers renders the states a register may be in.
func registers(states []register) string {
	s := make([]string, len(states))
	for i, r := range states {
		s[i] = r.String()
	}
	return strings.Join(s, " or ")
}

// describe names a history operation for a message: which cycle and which
// of the child's operations, or the parent's read after a reopen.
func describe(o porcupine.Operation) string {
	what := fmt.Sprintf("%v -> %v", o.Input.(call), o.Output.(result))
	switch org, _ := o.Metadata.(origin); {
	case org.Reopen:
		return fmt.Sprintf("the read after cycle %d's reopen (%s)", org.Cycle, what)
	case org.Op != 0:
		return fmt.Sprintf("op %d of cycle %d (%s)", org.Op, org.Cycle, what)
	}
	return what
}
