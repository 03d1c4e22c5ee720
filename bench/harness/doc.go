// Package harness is the measurement harness of the statestore qualification
// benchmarks, together with the physical baselines the store is judged
// against.
//
// # Measurement
//
// [Serial] and [Concurrent] (and [ConcurrentFor], [RunBudget]) time every
// single operation with the monotonic clock and report nearest-rank
// percentiles ([Latencies]) in microseconds. Timing is the only work the
// harness adds around an operation: samples go into slices sized before the
// run starts, so recording a sample never allocates (duration-bounded runs
// may grow a writer's slice, amortised, never per sample). Concurrent runs
// release all writers through one start gate, so goroutine start-up is not
// timed, and report throughput as the total number of completed operations
// divided by the wall time from the gate opening to the last writer finishing.
// The first operation error stops the run and is returned.
//
// A [Runner] runs them under a stall ceiling (the specification's 5 s,
// [StallCeiling], unless set): the first operation that takes that long
// stops the run with a *[StallError] naming the workload, the writer and
// the operation's index, so a stalled store fails the qualification
// instead of lengthening a tail. Workloads that time operations
// themselves apply the same rule with [Runner.Check].
//
// [AlternateSerial] and [AlternateConcurrent] compare workloads on a disk
// whose speed drifts: every side runs in short rounds, one after another,
// the order rotated each round, and each side's samples are pooled over
// all rounds (with each round's figures kept in Result.Rounds). qualify
// judges its ratio targets on these runs only.
//
// # Baselines
//
// The baselines measure what the hardware and kernel give for the store's
// durability contract, with nothing of the store in them:
//
//   - [RawAppendFdatasync] ("raw_append_fdatasync") appends the payload to a
//     plain file with exactly one write(2) (repeated only for a short write)
//     and then calls fdatasync(2) exactly once, for every operation, serially.
//     No operation returns before its bytes are on stable storage as far as
//     fdatasync promises.
//
//   - [RawGroupFdatasync] ("raw_group_fdatasync") runs W submitters against
//     one [GroupCommitter]: a single goroutine that takes everything queued
//     when it wakes, appends the whole batch with exactly one write(2) and
//     makes it durable with exactly one fdatasync(2), and only then answers
//     every submitter of the batch, each exactly once. A submitter therefore
//     never learns of success before its bytes were synced.
//
//   - [RawOverwriteFdatasync] ("raw_overwrite_fdatasync") and
//     [RawFallocateFdatasync] ("raw_fallocate_fdatasync") are the serial
//     loop with pwrite(2) into space prepared and fsynced before the timed
//     loop: written with zeros, or reserved with fallocate(2). They are the
//     floors of a log that overwrites (the journal's pre-written tail) and
//     of one that fills reserved extents.
//
// All write to a freshly created file (O_CREAT|O_EXCL) in a directory of the
// caller's choosing, which should be on the same filesystem as the store
// under test, and remove it afterwards. The append baselines do not
// preallocate, so every fdatasync also persists the grown file size, as an
// append-only journal does. [GroupCommitter] takes any [Sink]; the bench
// module's walpeer package puts tidwall/wal behind one ("wal_group").
package harness
