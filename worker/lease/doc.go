// Package lease is the specification's service-coordination lease: a
// create-only key with a short TTL that decides which of several workers
// acts on an intent. It decides who should act; it reserves nothing in the
// media server, where StartPublication stays the authority.
//
// Protocol (every write is compare-and-set, never blind):
//   - Claim: PutState with expected_revision 0 (create only) and the TTL.
//     A CONFLICT means another worker holds it: stay standby.
//   - Renew: PutState with expected_revision = the revision of our own last
//     write, so it succeeds only on the entry we wrote. A CONFLICT means the
//     lease lapsed (and maybe was claimed by someone else): the holder has
//     lost it and must stop acting. Renew never touches another owner's
//     entry, because no other entry carries our revision.
//   - Release: DeleteState with expected_revision = our revision.
//   - Standby: watch the lease key; when it is absent (deleted, or EXPIREd
//     because its holder stopped renewing) attempt a new Claim. Observe
//     turns what the watch shows into that decision.
//
// Cadence and jitter: a holder renews RenewEvery after its last successful
// write, minus a random part of up to Jitter. The defaults are TTL/3 and
// TTL/10: with a 10 s TTL a renewal is due every 2.3 to 3.3 s, so two
// consecutive renewals can fail (a slow disk, a brief disconnect) before
// the lease lapses, and the jitter keeps many leases taken at once from
// renewing in lockstep against the journal. The schedule reads a
// clock.Clock, so tests drive it with the fake clock.
//
// Bookkeeping (keep.go): what a worker loop does around one lease per
// intent, shared by worker/reconcile and worker/cv so the two cannot drift
// apart: Hold (observe, hand a loss to the loop before anything is
// claimed, claim when free), RenewIfDue, Drop (release when held), each
// returning what happened for the loop to report in its own terms, and
// PutOwned and DeleteOwned, the compare-and-set write and removal of a
// worker's own status entry (create-only, then on its own revision; one of
// its own from before a restart is adopted, anyone else's left alone).
//
// The lease document (keeppeek.worker-lease.v1) names the holder, a worker
// instance ID, because several instances of one service may authenticate
// as the same principal; the entry's owner alone cannot tell them apart.
package lease
