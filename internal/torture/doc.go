// Package torture runs a state store through repeated SIGKILLs and checks
// what survives: the engine of `kpjournal torture`.
//
// A cycle starts a child process (the caller says how: kpjournal re-executes
// itself with a hidden role) that opens the store and runs, concurrently,
// compare-and-set writers and deleters on a few hot keys, a lease holder
// that claims and renews TTL leases, a watcher that checks every update it
// receives, explicit checkpoints besides the automatic ones, and online
// backups. The child reports each operation on stdout twice, once before
// it is issued and once after the store answered, so the order of the lines
// the parent reads is an order in real time. The parent SIGKILLs the child
// at a random moment, reopens the store itself and checks, per cycle:
//
//   - Open succeeds;
//   - no Open cut a journal record that was acknowledged: the cut's index
//     lies above the acknowledged floor, the sum over namespaces of the
//     highest revision known committed (each record advances exactly one
//     namespace revision by one, so that many records precede it);
//   - every acknowledged write is present or superseded (a later revision
//     in its namespace explains its absence), and an acknowledged lease
//     whose deadline has not passed is present;
//   - revisions never go back: no namespace revision after a reopen is below
//     one acknowledged or served before, and nothing acknowledged after a
//     reopen is at or below what that reopen served;
//   - the newest reported backup decodes as a valid image;
//   - the watcher saw contiguous sequences and increasing revisions.
//
// Across all cycles the history of the compare-and-set keys (the child's
// reads and writes, an operation cut short by a kill counted as maybe
// applied, and a read of every key at each reopen) must be linearizable
// against a register-with-revisions model, which porcupine checks per key.
//
// The history is checked in windows, so memory is bounded by one cycle's
// operations rather than the run's (a 1,000-cycle run has millions). The
// parent reads every key before the first cycle and after each reopen, with
// no child running: a definite observation. A key's window is its
// operations between two observations; porcupine checks it from the state
// the first showed, with the second as its last operation, and the window
// is dropped. This is exactly the check of the whole history, not a weaker
// one:
//
//   - Every operation of a cycle lies between two observations in real
//     time: the child starts after the parent's reads returned, and its
//     operations return, or are cut short, before the kill, which precedes
//     the next reads. Linearizability respects real-time order, so any
//     linearization of the whole history places each operation inside its
//     window and each observation between windows. In particular an
//     operation the kill cut short may take effect anywhere up to the kill
//     but never after the reopen: its window's closing read bounds it.
//   - An observation fixes the register completely (absent, or one value at
//     one revision), so every linearization passes through that one state
//     there; the whole history is linearizable if and only if every window
//     is from the state observed at its start. Splitting per key is sound
//     because linearizability is local (a history is linearizable if and
//     only if each object's subhistory is).
//   - A read after a reopen that fails observes nothing: the key's window
//     then runs on into the next cycle and is checked whole at the next
//     observation. A run that stops early checks its open windows from
//     their start with no end observed.
//
// A window no linearization explains is a violation naming the key, the
// cycle and the operations where the check got stuck.
//
// # Invariants
//
//  1. A violation is only ever reported from evidence (a line the child
//     printed after the store answered, or a read the parent made); a line
//     cut by the kill is no evidence.
//     Code: events.line, events.finish, parseCall, parseResult, child.line, child.issue, run.observe.
//     Tests: TestCutLinesAreNoEvidence, regcheck.TestCheckerWindows, kpjournal.TestTortureShort.
package torture
