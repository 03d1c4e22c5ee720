// Package serialwork is the specification's serial workload and its process
// figures, shared by qualify and by serialproc, the store-only child that
// qualify's serial_process row runs.
//
// The specification's process figures are of a process running only the
// store's serial workload: 127 owners, 30 rounds of one compare-and-set
// each, on a durable store and on the in-memory baseline in alternating
// rounds, the resident set sampled after each round, then a 300 ms idle
// sample of CPU and resident memory. Whatever else a process links or
// initialises is part of its resident set, so the child that runs [Run]
// imports this package, the root package and nothing of the comparison
// peers; qualify, which links them all, only builds and starts it.
//
// # Invariants
//
//   - Every figure is of this process only (sampled by package procstat)
//     and taken at the specification's stages: at start, after Open,
//     after each round, after the idle sample.
//     Code: Run.
//     Tests: TestRun.
//   - The workload is the specification's: Owners owners with their own
//     document, create-only then compare-and-set on the owner's last
//     revision, both sides in the same rounds, a sample after each round.
//     Code: Run, NewOwners, Owner.CAS.
//     Tests: TestRun.
package serialwork
