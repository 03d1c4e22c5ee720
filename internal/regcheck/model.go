package regcheck

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Register is one key's state in the model: absent, or present with the
// value id of the write that made it and that write's revision. Rev 0 on a
// present key means the revision is not known yet: a write whose outcome
// is unknown (cut short by a kill, a timeout, a lost connection) may have taken effect, and its revision is learnt from the next
// read.
type Register struct {
	Exists bool
	Value  string
	Rev    uint64
}

// Step applies one operation to a register. It returns the states the
// register may be in afterwards, none if the operation's result is
// impossible from s. An operation whose outcome is unknown may have
// taken effect or not, so it yields both.
func Step(s Register, c Call, r Result) []Register {
	// Would the write or delete succeed from s? An unknown revision never
	// matches an expected one: whoever expects a revision read it, and a
	// read resolves the unknown.
	matches := func() bool {
		switch {
		case c.Kind == Put && c.Expect == Blind:
			return true
		case c.Expect == 0:
			return !s.Exists
		}
		return s.Exists && s.Rev != 0 && s.Rev == uint64(c.Expect)
	}
	newer := func(rev uint64) bool { return s.Rev == 0 || rev > s.Rev }
	switch c.Kind {
	case Get:
		switch {
		case r.Unknown:
			return []Register{s}
		case !s.Exists:
			if r.Code == NotFound {
				return []Register{s}
			}
		case r.Code == OK && r.Value == s.Value && (s.Rev == 0 || r.Rev == s.Rev):
			return []Register{{Exists: true, Value: s.Value, Rev: r.Rev}}
		}
		return nil
	case Put:
		ok := matches()
		switch {
		case r.Unknown && ok:
			return []Register{s, {Exists: true, Value: c.Value}}
		case r.Unknown:
			return []Register{s}
		case r.Code == OK && ok && newer(r.Rev):
			return []Register{{Exists: true, Value: c.Value, Rev: r.Rev}}
		case r.Code == Conflict && !ok:
			return conflict(s, r.Rev)
		}
		return nil
	}
	// Delete: NOT_FOUND for a missing key comes before the revision check.
	switch {
	case !s.Exists && (r.Unknown || r.Code == NotFound):
		return []Register{s}
	case !s.Exists:
		return nil
	case r.Unknown && matches():
		return []Register{s, {}}
	case r.Unknown:
		return []Register{s}
	case r.Code == OK && matches() && newer(r.Rev):
		return []Register{{}}
	case r.Code == Conflict && !matches():
		return conflict(s, r.Rev)
	}
	return nil
}

// conflict checks a CONFLICT's current revision against s, learning it
// when s's revision is unknown.
func conflict(s Register, current uint64) []Register {
	switch {
	case !s.Exists && current == 0:
		return []Register{s}
	case s.Exists && s.Rev == 0 && current != 0:
		return []Register{{Exists: true, Value: s.Value, Rev: current}}
	case s.Exists && s.Rev == current:
		return []Register{s}
	}
	return nil
}

// Model is porcupine's view of one key whose window starts in state
// start: the register a definite observation showed (or the empty one of a
// store not yet written).
func Model(start Register) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{start} },
		Step: func(state, input, output any) []any {
			next := Step(state.(Register), input.(Call), output.(Result))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(Register) == b.(Register) },
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%v -> %v", input.(Call), output.(Result))
		},
		DescribeState: func(state any) string { return state.(Register).String() },
	}
	return nm.ToModel()
}

// Observed is the register a definite read shows: absent, or present with
// the value and revision it returned.
func Observed(r Result) Register {
	if r.Code == OK {
		return Register{Exists: true, Value: r.Value, Rev: r.Rev}
	}
	return Register{}
}

// String renders the state for messages.
func (s Register) String() string {
	switch {
	case !s.Exists:
		return "absent"
	case s.Rev == 0:
		return fmt.Sprintf("%s at a revision not known yet", s.Value)
	}
	return fmt.Sprintf("%s@%d", s.Value, s.Rev)
}

// Kind is what a history operation does.
type Kind uint8

// The kinds: a read, a write (blind, create-only or compare-and-set), a
// delete at an expected revision.
const (
	Get Kind = iota
	Put
	Del
)

var kindNames = [...]string{Get: "get", Put: "put", Del: "del"}

// String names the kind as histories print it.
func (k Kind) String() string { return kindNames[k] }

// Blind is the expect value of a write without expected_revision.
const Blind = -1

// Call is an operation as issued.
type Call struct {
	Kind   Kind
	Key    string
	Expect int64  // Blind, 0 (create only) or a revision
	Value  string // put only: the document's unique value id
}

// Code is the outcome of a definite return.
type Code uint8

// The codes: success, NOT_FOUND, CONFLICT.
const (
	OK Code = iota
	NotFound
	Conflict
)

// Result is the store's answer. Unknown marks an operation whose answer
// never came (a kill, a timeout, a lost connection): it may or may not
// have taken effect.
type Result struct {
	Unknown bool
	Code    Code
	Rev     uint64 // ok: the entry's revision; conflict: the current revision
	Value   string // a successful read's value id
}

// String renders the call for messages.
func (c Call) String() string {
	switch c.Kind {
	case Get:
		return fmt.Sprintf("get %s", c.Key)
	case Del:
		return fmt.Sprintf("del %s if %d", c.Key, c.Expect)
	}
	if c.Expect == Blind {
		return fmt.Sprintf("put %s=%s", c.Key, c.Value)
	}
	return fmt.Sprintf("put %s=%s if %d", c.Key, c.Value, c.Expect)
}

// String renders the answer for messages.
func (r Result) String() string {
	switch {
	case r.Unknown:
		return "outcome unknown"
	case r.Code == NotFound:
		return "not found"
	case r.Code == Conflict:
		return fmt.Sprintf("conflict at %d", r.Rev)
	case r.Value != "":
		return fmt.Sprintf("ok %s@%d", r.Value, r.Rev)
	}
	return fmt.Sprintf("ok @%d", r.Rev)
}
