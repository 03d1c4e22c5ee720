// Package statestore is KeepPeek's durable coordination plane: small,
// schema-checked desired-state documents under namespaced keys, with
// revisioned get, put and delete, compare-and-set, TTL leases and namespace
// authorization, on an event-sourced engine.
//
// The engine (see DESIGN.md §1):
//
//	call -> admission (policy, identifiers, schema, quota, CAS)   this package
//	     -> journal/   segmented write-ahead journal, the sole revision authority
//	     -> materialize/  copy-on-write B-tree view, published after the fsync
//	     -> reply
//
// Invariants this package keeps (each pinned by tests):
//   - Commit before apply: no reply and no visible change before the journal
//     batch holding a mutation is fsynced. A failed write or fsync answers
//     STORAGE to every call of its batch, and of every batch admitted on top
//     of it, and changes nothing in memory; batches already synced are
//     always published. (Admission of the next batches runs while a sync
//     is in flight; see commit.go.)
//   - Each namespace has a dense revision counter: every committed PUT,
//     DELETE or EXPIRE advances it by exactly one; it is kept when the
//     namespace empties and survives restart. Entry.Revision is the
//     namespace revision of the entry's last PUT.
//   - Open replays exactly the acknowledged state, refusing (with the journal
//     index and reason) anything no admitted write could have produced.
//   - Authorization is decided from the authenticated Principal only, and the
//     owner of a written entry is always the calling principal.
//   - Admission happens before the journal: a rejected write reserves
//     nothing, and a full store fails the write instead of evicting.
//   - Once Close has begun, every call that can fail answers UNAVAILABLE
//     and touches no file: another handle may own the directory by then.
//     Close releases the LOCK only after a Restore or Checkpoint in flight
//     has finished.
//   - The journal after the newest checkpoint is bounded by the checkpoint
//     threshold however often the store restarts: the trigger counts the
//     records Open replays, and fires right after Open when they are over.
//
// Every error the store returns is an *Error carrying a Code, usable with
// errors.Is against the Err* sentinels.
package statestore
