package torture

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// events turns one cycle's lines into history operations and acknowledged
// mutations.
type events struct {
	r      *run
	cycle  int
	calls  map[uint64]*porcupine.Operation // issued, not yet answered
	backup string                          // the newest complete backup
}

func newEvents(r *run, cycle int) *events {
	return &events{r: r, cycle: cycle, calls: map[uint64]*porcupine.Operation{}}
}

// clientID gives porcupine's visualization one lane per child operation
// stream; it has no bearing on the check.
func (e *events) clientID() int { return e.cycle + 1 }

// line handles one line the child printed.
func (e *events) line(l string) {
	r := e.r
	ts := r.tick()
	f := strings.Fields(l)
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case evCall:
		op, c, err := parseCall(f[1:])
		if err != nil {
			return // a line cut by the kill
		}
		e.calls[op] = &porcupine.Operation{ClientId: e.clientID(), Input: c, Call: ts, Metadata: origin{Cycle: e.cycle, Op: op}}
	case evReturn:
		op, res, err := parseResult(f[1:])
		o := e.calls[op]
		if err != nil || o == nil {
			return
		}
		delete(e.calls, op)
		o.Output, o.Return = res, ts
		r.record(e.cycle, *o)
		c := o.Input.(call)
		e.committed(casNS, res.Rev)
		switch {
		case c.Kind == opGet:
			r.rep.Reads++
		case res.Code == codeConflict:
			r.rep.Conflicts++
		case res.Code == codeOK:
			r.rep.AcknowledgedWrites++
			e.acked(casNS, c.Key, ackedOp{del: c.Kind == opDel, rev: res.Rev})
		}
	case evLease:
		if len(f) != 4 {
			return
		}
		rev, err1 := strconv.ParseUint(f[2], 10, 64)
		exp, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return
		}
		r.rep.AcknowledgedLeases++
		e.committed(leaseNS, rev)
		e.acked(leaseNS, f[1], ackedOp{rev: rev, expiresMs: exp})
	case evBackup:
		if len(f) == 2 {
			e.backup = f[1]
		}
	case evCkpt:
		r.rep.Checkpoints++
	case evUpdate:
		r.rep.WatchUpdatesChecked++
	case evViolate:
		r.violate("cycle %d: child: %s", e.cycle, strings.Join(f[1:], " "))
	}
}

// committed notes that revision rev of ns is committed: a read or write
// answered with it, or a conflict reported it as current.
func (e *events) committed(ns string, rev uint64) {
	e.r.known[ns] = max(e.r.known[ns], rev)
}

// acked records an acknowledged mutation: it must lie above what the last
// reopen served (revisions never go back), and becomes the key's newest.
func (e *events) acked(ns, key string, op ackedOp) {
	r := e.r
	if op.rev <= r.served[ns] {
		r.violate("cycle %d: %s/%s acknowledged at revision %d, but the reopen before had served %d: revisions went back",
			e.cycle, ns, key, op.rev, r.served[ns])
	}
	if op.rev > r.last[ns][key].rev {
		r.last[ns][key] = op
	}
}

// finish closes the cycle at the kill: every operation still open was cut
// short and may or may not have taken effect before killTs.
func (e *events) finish(killTs int64) {
	// In issue order, so a run's windows do not depend on map order.
	for _, op := range slices.Sorted(maps.Keys(e.calls)) {
		o := e.calls[op]
		o.Output, o.Return = result{Unknown: true}, killTs
		e.r.record(e.cycle, *o)
		e.r.rep.CutShort++
	}
	e.calls = nil
}
