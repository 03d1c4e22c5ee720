// Package cv is the computer-vision worker of the specification's
// "Computer-vision coordination follows the same pattern": an intent
// assigns a model profile to a stable source and stream; the worker
// starts ordinary subscriptions, publishes only validated events, and
// reports health separately. Event truth stays in the event catalog and
// router, never in state entries.
//
// # The intent
//
// A computer-vision intent is an ordinary keeppeek.media-intent.v1
// subscribe intent (package intent) whose namespaced parameters name the
// model profile to run (TargetOf, Target.Intent):
//
//	{"role": "subscribe", "desired": true, "source_id": "front-door",
//	 "media_kind": "video", "variant_id": "camera-main",
//	 "parameters": {"cv.model": "person-detector", "cv.min_confidence": 0.6}}
//
// cv.model is required; cv.min_confidence (0 to 1) drops weaker
// detections before they become events; any other cv.* parameter is
// refused rather than ignored. variant_id may be left out for the
// subscription's automatic selection. Like every intent it names the
// stable source, never a source session.
//
// # The worker
//
// A Worker follows the intents under its namespace's intent prefix with a
// watchcache (the watch discipline of package reconcile: snapshot first,
// updates in sequence, a fresh snapshot after any gap or reconnect). For
// each desired intent whose model profile it runs, it takes the intent's
// lease (package lease; one per source, media kind and model, LeaseKey),
// so two workers never analyse one stream with one model and the catalog
// gets each event once. Then, on every pass, it resolves the source
// against current Capabilities: a session, the stream, the model profile
// advertised for that stream's kind, a ready variant. Only then does it
// send an ordinary Subscribe and start an analysis: the subscription's
// frames run through the Model on a goroutine of their own, and each
// detection becomes a keeppeek.cv-event.v1 Event that is validated (its
// schema and the content guard of package schema) before PublishEvent
// hands it to the catalog. An event that fails is counted, with why, and
// dropped.
//
// A source that reconnects under a new session ends the old subscription
// with it; the worker forgets it and subscribes on the new session. A lost
// lease halts the analysis and unsubscribes in the same pass; a standby
// whose watch shows the lease free claims it. Health (keeppeek.cv-health.v1:
// state, reason, the subscription and variant, frames, events published,
// rejected and refused by the catalog) goes to the worker's own key,
// StatusPrefix + Holder + "/" + the intent's name, written with
// compare-and-set beside the intent and never over it: a change of state
// at once, counters alone at most every HealthEvery.
//
// This is a loop of its own rather than a role of reconcile.Reconciler:
// reconcile leases only publications and its bindings end at the
// command, while an analysis is leased, lives on after its Subscribe with
// frames, a model and counters, and must have stopped before its
// subscription is let go. They share the building blocks instead: watchcache,
// lease, intent, reconcile's Capabilities, Source and SubscribeRequest,
// its command errors and StatusError. The media server side is
// Capabilities and Media here; package mediasim implements both, with
// frames and a simulated event catalog, and SimModel is a deterministic
// model for tests.
//
// # Invariants
//
//  1. Watch discipline is the cache's, and the worker starts or stops
//     nothing while its intent cache does not follow a live watch; an
//     analysis already running goes on meanwhile.
//     Code: Worker.pass, Worker.drain, watchcache.Cache.Synced.
//     Tests: TestReconnectTakesFreshSnapshot.
//  2. An intent names a stable source; its session is resolved from
//     Capabilities on every pass, never stored. A subscription whose
//     session ended, or that the server ended, is forgotten and the intent
//     resolved afresh, so a new source session means a new subscription
//     and an untouched intent.
//     Code: Worker.act, analysis.ended, analysis.run.
//     Tests: TestScenarioSourceSessionReplacedResubscribes.
//  3. No Subscribe before validation: the intent is a subscribe intent
//     with a known cv.model (and no unknown cv.* parameter), the model is
//     one this worker runs, and the source has a session, the stream, the
//     model profile advertised for that stream's kind and a ready variant.
//     What a later advertisement may fix waits; what it cannot is Invalid.
//     Code: TargetOf, decide, Worker.act.
//     Tests: TestDecide, TestTargetOf, TestScenarioSourceSessionReplacedResubscribes, TestIntentLifecycle.
//  4. Only validated events are published: each event built from a
//     detection passes keeppeek.cv-event.v1 and the content guard before
//     PublishEvent; one that does not is never published and is counted,
//     with why, in the health.
//     Code: analysis.analyze, EncodeEvent, eventRegistry.
//     Tests: TestScenarioInvalidEventNeverPublished, TestEventSchema.
//  5. Only the lease holder analyses. Losing the lease halts the analysis
//     and unsubscribes in the same pass; once halted an analysis publishes
//     nothing, and Run halts every analysis before it returns.
//     Code: Worker.holdLease, Worker.loseLease, Worker.endAnalysis, analysis.halt, Worker.haltAll.
//     Tests: TestScenarioLeaseLostStops, TestScenarioStandbyTakesOver.
//  6. Health is reported separately: the worker writes only its leases
//     and its own health entries, under prefixes that may not overlap the
//     intents', with compare-and-set only, so it never overwrites an
//     intent or another writer's entry. A change of state is written at
//     once, counters alone at most every HealthEvery.
//     Code: New, Worker.writeHealth, Worker.ours, Worker.statusKey.
//     Tests: TestNewRejectsConfig, TestHealthNeverOverwritesAnotherWriter,
//     TestScenarioSourceSessionReplacedResubscribes, TestScenarioLeaseLostStops.
//  7. Events are never state entries: the event schema lives only in this
//     package's own registry, RegisterSchemas never adds it, so a store
//     refuses an event document as an unregistered schema.
//     Code: eventRegistry, RegisterSchemas.
//     Tests: TestEventsAreNeverStateEntries, TestRegisterSchemas.
//  8. An intent that stops being desired, or disappears, is stopped:
//     analysis halted, subscription ended, lease released, and for one
//     that disappeared its health deleted.
//     Code: Worker.act, Worker.teardown, Worker.release.
//     Tests: TestIntentLifecycle, TestReconnectTakesFreshSnapshot.
package cv
