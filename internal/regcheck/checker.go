package regcheck

import (
	"cmp"
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

// Origin says where a history operation came from, for messages; it rides
// in porcupine's Metadata, which the check ignores.
type Origin struct {
	Cycle       int    // the round of the run it belongs to (Checker.Unit)
	Op          uint64 // the operation's number within its cycle
	Observation bool   // a definite read closing a window (Checker.Observe sets it)
}

// window is one key's history since its last definite observation.
type window struct {
	start Register // what the observation showed
	// since is the first cycle whose operations the window holds: the
	// cycle after the observation, or earlier cycles too when a read after
	// a reopen failed and so closed nothing.
	since int
	ops   []porcupine.Operation
}

// Checker checks the hot keys' history window by window. A window is
// one key's operations between two definite observations (reads with no
// operation in flight); it is checked from the state the first showed, with
// the second as its last operation, and then dropped, so the checker holds
// at most one window per key whatever the length of the run.
type Checker struct {
	// Unit names a round of the run in messages ("cycle" when empty);
	// Observation names what precedes the observing reads ("reopen" when
	// empty): "the read after cycle 3's reopen".
	Unit, Observation string

	timeout time.Duration // per window; zero means none
	windows map[string]*window
	res     Linearizability
}

// NewChecker returns a checker giving each window's porcupine search at
// most timeout (zero: no bound; a window that runs out is reported as
// timed out, never as a violation).
func NewChecker(timeout time.Duration) *Checker {
	return &Checker{timeout: timeout, windows: map[string]*window{},
		res: Linearizability{Illegal: []string{}, TimedOut: []string{}}}
}

// Add puts an operation answered in the current cycle, or cut short by
// its kill, into its key's window. A key no observation has covered has
// no state to start from: that is a fault of the harness, reported.
func (c *Checker) Add(o porcupine.Operation) error {
	k := o.Input.(Call).Key
	w := c.windows[k]
	if w == nil {
		return fmt.Errorf("operation on key %q, which no read has observed: %s", k, c.describe(o))
	}
	w.ops = append(w.ops, o)
	return nil
}

// Observe closes key's window with o, a read the parent made after
// cycle's kill with nothing in flight: every operation added before it
// returned or was cut short before o was called. It checks the window and
// starts the next from what o showed. It returns a violation, or "".
// A first observation of a key (cycle -1, before any child) only starts
// its window.
func (c *Checker) Observe(cycle int, o porcupine.Operation) string {
	k := o.Input.(Call).Key
	o.Metadata = Origin{Cycle: cycle, Observation: true}
	w := c.windows[k]
	c.windows[k] = &window{start: Observed(o.Output.(Result)), since: cycle + 1}
	if w == nil {
		return ""
	}
	w.ops = append(w.ops, o)
	return c.check(k, w, cycle)
}

// Close checks the windows no observation closed (the store would not
// reopen, or a read after the last reopen failed): their operations are
// checked from their start, with nothing known of the end. It returns the
// violations.
func (c *Checker) Close(cycle int) []string {
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

// Held is how many operations the checker holds: those of the open
// windows only.
func (c *Checker) Held() int {
	n := 0
	for _, w := range c.windows {
		n += len(w.ops)
	}
	return n
}

// Result is the outcome of every window checked so far.
func (c *Checker) Result() Linearizability {
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
func (c *Checker) check(key string, w *window, cycle int) string {
	c.res.Windows++
	c.res.Operations += len(w.ops)
	c.res.LargestWindow = max(c.res.LargestWindow, len(w.ops))
	unit := c.unit()
	name := fmt.Sprintf("%s (%s %d)", key, unit, cycle)
	if w.since < cycle {
		name = fmt.Sprintf("%s (%ss %d-%d)", key, unit, w.since, cycle)
	}
	m := Model(w.start)
	switch porcupine.CheckOperationsTimeout(m, w.ops, c.timeout) {
	case porcupine.Ok:
		return ""
	case porcupine.Unknown:
		c.res.TimedOut = append(c.res.TimedOut, name)
		return ""
	}
	c.res.Illegal = append(c.res.Illegal, name)
	return fmt.Sprintf("%s %d: the history of %s is not linearizable: %s", unit, cycle, name, c.explain(m, w))
}

// unit and observation are the words of messages (Checker.Unit, Checker.Observation).
func (c *Checker) unit() string { return cmp.Or(c.Unit, "cycle") }

func (c *Checker) observation() string { return cmp.Or(c.Observation, "reopen") }

// explain says where the check got stuck: the longest order of the
// window's operations the model accepts, and the operation that must come
// next (the unexplained one that returned first) but cannot. The search
// runs again, recording partial orders, only for a window already found
// illegal.
func (c *Checker) explain(m porcupine.Model, w *window) string {
	_, info := porcupine.CheckOperationsVerbose(m, w.ops, c.timeout)
	var longest []int
	for _, p := range info.PartialLinearizations()[0] {
		if len(p) > len(longest) || len(p) == len(longest) && slices.Compare(p, longest) < 0 {
			longest = p
		}
	}
	in := make([]bool, len(w.ops))
	states := []Register{w.start}
	for _, i := range longest {
		in[i] = true
		var next []Register
		for _, s := range states {
			for _, n := range Step(s, w.ops[i].Input.(Call), w.ops[i].Output.(Result)) {
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
			c.describe(w.ops[longest[len(longest)-1]]), registers(states))
	}
	fmt.Fprintf(&b, "; then nothing explains %s", c.describe(w.ops[stuck]))
	return b.String()
}

// registers renders the states a register may be in.
func registers(states []Register) string {
	s := make([]string, len(states))
	for i, r := range states {
		s[i] = r.String()
	}
	return strings.Join(s, " or ")
}

// describe names a history operation for a message: which cycle and which
// of its operations, or the observing read after one.
func (c *Checker) describe(o porcupine.Operation) string {
	what := fmt.Sprintf("%v -> %v", o.Input.(Call), o.Output.(Result))
	switch org, _ := o.Metadata.(Origin); {
	case org.Observation:
		return fmt.Sprintf("the read after %s %d's %s (%s)", c.unit(), org.Cycle, c.observation(), what)
	case org.Op != 0:
		return fmt.Sprintf("op %d of %s %d (%s)", org.Op, c.unit(), org.Cycle, what)
	}
	return what
}
