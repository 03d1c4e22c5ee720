// Package regcheck is the linearizability check shared by the torture
// engines (internal/torture's crash loop, internal/nemesis's cluster under
// faults): a porcupine model of one key as a register with revisions
// (compare-and-set, blind and create-only writes, deletes at an expected
// revision, reads), and a Checker that checks a history one key window at
// a time.
//
// A window is one key's operations between two definite observations:
// reads made while no operation on the key was in flight. Its first
// observation fixes the register completely (absent, or one value at one
// revision), so the whole history is linearizable if and only if every
// window is, from the state observed at its start with the closing read
// as its last operation; linearizability is local, so keys are checked
// apart. The checker therefore holds at most one window per key, however
// long the run. An operation whose answer never came is Unknown: the
// model lets it take effect or not, anywhere between its call and the
// window's closing read, which the caller makes only once nothing can
// still apply it.
//
// # Invariants
//
//  1. A window is reported illegal only when porcupine found no
//     linearization of it from its opening state; a search that ran out of
//     time is reported as timed out, never as a violation, and an Unknown
//     outcome is always allowed both ways.
//     Code: Step, Model, Checker.check, Checker.Observe.
//     Tests: TestStep, TestCheckerWindows, TestCheckerClose.
//  2. The checker holds only the open windows' operations: an observation
//     checks and drops its key's window.
//     Code: Checker.Observe, Checker.Close, Checker.Held.
//     Tests: TestCheckerHoldsOneWindow.
package regcheck
