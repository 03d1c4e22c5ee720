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
// Invariant of the package: a violation is only ever reported from evidence
// (a line the child printed after the store answered, or a read the parent
// made); a line cut by the kill is no evidence.
package torture
