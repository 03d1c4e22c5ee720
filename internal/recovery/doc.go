// Package recovery rebuilds a store's state from its files and checks
// stored data the way admission checked the writes that produced it: the
// newest checkpoint image that loads, then every journal record after it,
// each held to the identifier rules (package rules), the bounds (package
// quota), revision continuity, registered schemas and, last, the document
// rules (package schema: the schema's validator and the content guard).
// Open runs Load on the files it has locked; the tools (kpjournal verify,
// replay, stat, repair) and the torture engine run LoadState and the
// Checker on a stopped store's files without taking its lock or changing a
// file. It is internal because only the store and those tools rebuild
// state; an embedder opens the store.
//
// Documents are validated on every processor (a docPool) while the replay
// goes on, since validating one costs about what decoding and applying it
// does. A document that fails is a *DocumentError. The store's package
// comment ("Stored documents") says why a build refuses its own files when
// it has tightened a rule the entries were stored under, and what the
// operator does then (MigrationHint).
//
// # Invariants
//
//  1. Stored data passes the rules written data passed: identifiers,
//     schema names, owners, revisions and bounds first, then the document
//     against its schema and the content guard, for every replayed record
//     and every entry of the image it starts from or of a backup. Open,
//     LoadState (kpjournal replay) and kpjournal verify apply these same
//     checks, so they cannot disagree.
//     Code: Checker.Check, Checker.LoadImage, Checker.DecodeBackup, Load.
//     Tests: TestLoadReportsTheFirstFailureAsCheckDoes, TestLoadImageNamesTheFirstForbiddenEntry,
//     TestLoadStateMatchesOpen, statestore.TestReplayRejects, kpjournal.TestVerifyReportsForbiddenDocumentsAsOpenRefuses.
//  2. Which document is reported does not depend on scheduling: the first
//     record, or the first entry in key order, that a check one by one
//     would refuse, located at its segment and offset.
//     Code: docPool.fail, docPool.before, locate.
//     Tests: TestFirstFailureWhateverFinishesFirst, TestLoadReportsTheFirstFailureAsCheckDoes,
//     TestLoadImageNamesTheFirstForbiddenEntry.
//  3. An intact image holding a document the rules refuse ends the load
//     there: unlike damage, it is no reason to fall back to an older image.
//     Code: Source.loadCheckpoint.
//     Tests: statestore.TestOpenRefusesForbiddenDocuments, statestore.TestTightenedSchemaRefusesOldEntriesUntilMigrated.
//  4. No stored entry of live configuration (rules.LiveConfiguration: an
//     MQTT bridge's namespace) carries a lease, since admission refuses
//     every TTL there: a journal record, a checkpoint image's or a
//     backup's entry with one is a *LeaseError naming the entry, the
//     journal index or image, and the rule, checked with the other
//     metadata before any document; kpjournal verify reports the same.
//     Code: Checker.CheckLease, leaseRule, Checker.checkState, Checker.CheckView, inImage.
//     Tests: TestLeasedLiveConfigurationRefused, statestore.TestReplayRejects,
//     kpjournal.TestVerifySemanticProblemsInHandWrittenJournal.
package recovery
