// Package intent holds the Go form of keeppeek.media-intent.v1, the
// specification's orchestration document: a stable source, a media kind,
// an optional variant and output profile, and for publishing the recording
// mode to copy into StartPublication.
//
// # Invariants
//
//  1. Encode and Parse both go through the store's schema registry
//     (schema.Registry.Validate under schema.MediaIntentV1), so a worker can
//     never write a document the store would reject, and never acts on one
//     the store would not have accepted.
//     Code: Encode, Parse, codec.
//     Tests: TestEncodeRejects, TestParseRejects, TestParseSpecificationExample.
//  2. A publish intent whose recording_mode is missing or unknown is a
//     *ValidationError naming "recording_mode", found before any media
//     command: RecordingMode's zero value is never a valid mode, so it can
//     not turn into a zero-value StartPublication.
//     Code: Intent.Check, RecordingMode.Valid.
//     Tests: TestEncodeRejects, TestParseRejects, TestCheckCatchesWhatARegistryMissed.
//  3. Intents name stable identifiers only (source_id, variant_id); the
//     schema rejects every other top-level field, so no transient
//     source-session ID or RTP MID travels in a document.
//     Code: Intent, Parse, schema.MediaIntentV1.
//     Tests: TestParseRejects, statestore.TestScenario7Rejections.
package intent
