package torture

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// register is one key's state in the model: absent, or present with the
// value id of the write that made it and that write's revision. Rev 0 on a
// present key means the revision is not known yet: a write the kill cut
// short may have taken effect, and its revision is learnt from the next
// read.
type register struct {
	Exists bool
	Value  string
	Rev    uint64
}

// step applies one operation to a register. It returns the states the
// register may be in afterwards, none if the operation's result is
// impossible from s. An operation cut short by a kill may have taken
// effect or not, so it yields both.
func step(s register, c call, r result) []register {
	// Would the write or delete succeed from s? An unknown revision never
	// matches an expected one: whoever expects a revision read it, and a
	// read resolves the unknown.
	matches := func() bool {
		switch {
		case c.Kind == opPut && c.Expect == blind:
			return true
		case c.Expect == 0:
			return !s.Exists
		}
		return s.Exists && s.Rev != 0 && s.Rev == uint64(c.Expect)
	}
	newer := func(rev uint64) bool { return s.Rev == 0 || rev > s.Rev }
	switch c.Kind {
	case opGet:
		switch {
		case r.Unknown:
			return []register{s}
		case !s.Exists:
			if r.Code == codeNotFound {
				return []register{s}
			}
		case r.Code == codeOK && r.Value == s.Value && (s.Rev == 0 || r.Rev == s.Rev):
			return []register{{Exists: true, Value: s.Value, Rev: r.Rev}}
		}
		return nil
	case opPut:
		ok := matches()
		switch {
		case r.Unknown && ok:
			return []register{s, {Exists: true, Value: c.Value}}
		case r.Unknown:
			return []register{s}
		case r.Code == codeOK && ok && newer(r.Rev):
			return []register{{Exists: true, Value: c.Value, Rev: r.Rev}}
		case r.Code == codeConflict && !ok:
			return conflict(s, r.Rev)
		}
		return nil
	}
	// Delete: NOT_FOUND for a missing key comes before the revision check.
	switch {
	case !s.Exists && (r.Unknown || r.Code == codeNotFound):
		return []register{s}
	case !s.Exists:
		return nil
	case r.Unknown && matches():
		return []register{s, {}}
	case r.Unknown:
		return []register{s}
	case r.Code == codeOK && matches() && newer(r.Rev):
		return []register{{}}
	case r.Code == codeConflict && !matches():
		return conflict(s, r.Rev)
	}
	return nil
}

// conflict checks a CONFLICT's current revision against s, learning it
// when s's revision is unknown.
func conflict(s register, current uint64) []register {
	switch {
	case !s.Exists && current == 0:
		return []register{s}
	case s.Exists && s.Rev == 0 && current != 0:
		return []register{{Exists: true, Value: s.Value, Rev: current}}
	case s.Exists && s.Rev == current:
		return []register{s}
	}
	return nil
}

// modelFrom is porcupine's view of one key whose window starts in state
// start: the register a definite observation showed (or the empty one of a
// store not yet written).
func modelFrom(start register) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{start} },
		Step: func(state, input, output any) []any {
			next := step(state.(register), input.(call), output.(result))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(register) == b.(register) },
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%v -> %v", input.(call), output.(result))
		},
		DescribeState: func(state any) string { return state.(register).String() },
	}
	return nm.ToModel()
}

// observed is the register a definite read shows: absent, or present with
// the value and revision it returned.
func observed(r result) register {
	if r.Code == codeOK {
		return register{Exists: true, Value: r.Value, Rev: r.Rev}
	}
	return register{}
}

func (s register) String() string {
	switch {
	case !s.Exists:
		return "absent"
	case s.Rev == 0:
		return fmt.Sprintf("%s at a revision not known yet", s.Value)
	}
	return fmt.Sprintf("%s@%d", s.Value, s.Rev)
}
