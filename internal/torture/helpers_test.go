package torture

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func put(key, value string, expect int64) call {
	return call{Kind: opPut, Key: key, Expect: expect, Value: value}
}

func get(key string) call { return call{Kind: opGet, Key: key} }

var notFound = result{Code: codeNotFound}

// TestCutLinesAreNoEvidence feeds a cycle's lines the way the parent reads
// them: a put issued but never answered, then lines the kill cut short.
// None counts as acknowledged, the put is only maybe applied, and so the
// reopen may show its key either way without a violation.
func TestCutLinesAreNoEvidence(t *testing.T) {
	t.Parallel()
	k := casKey(0)
	for _, after := range []result{notFound, {Code: codeOK, Rev: 1, Value: "v1"}} {
		r := &run{rep: &Report{Violations: []string{}}, last: map[string]map[string]ackedOp{casNS: {}, leaseNS: {}},
			known: map[string]uint64{}, served: map[string]uint64{}, check: newChecker(0)}
		r.check.Observe(-1, porcupine.Operation{Input: get(k), Output: notFound, Call: r.tick(), Return: r.tick()})
		ev := newEvents(r, 0)
		for _, l := range []string{
			formatCall(1, put(k, "v1", 0)),
			"R 1 o",
			"L " + leaseKey(0) + " 7",
			"C 2 put " + k,
			"B",
		} {
			ev.line(l)
		}
		ev.finish(r.tick())
		if r.rep.AcknowledgedWrites != 0 || r.rep.AcknowledgedLeases != 0 || ev.backup != "" ||
			len(r.last[casNS])+len(r.last[leaseNS]) != 0 || r.known[casNS]+r.known[leaseNS] != 0 {
			t.Fatalf("cut lines taken as evidence: report %+v, acknowledged %v, known %v, backup %q", *r.rep, r.last, r.known, ev.backup)
		}
		if r.rep.CutShort != 1 {
			t.Fatalf("%d operations cut short, want the unanswered put", r.rep.CutShort)
		}
		if v := r.check.Observe(0, porcupine.Operation{Input: get(k), Output: after, Call: r.tick(), Return: r.tick()}); v != "" || len(r.rep.Violations) != 0 {
			t.Fatalf("reopen showing %v: violation %q %v", after, v, r.rep.Violations)
		}
	}
}
