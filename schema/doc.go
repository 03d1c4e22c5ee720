// Package schema decides which desired-state documents the state store may
// keep. Every write and every replayed entry goes through [Registry.Validate],
// so the guarantees below hold for everything the store ever holds or serves.
//
// A document that Validate accepts under a schema name:
//
//   - is one JSON value and nothing else, encoded as valid UTF-8, and that
//     value is a JSON object;
//   - has no duplicate member names in any object, so the bytes the store
//     keeps mean exactly what was checked (encoding/json would silently keep
//     only the last duplicate, letting a forbidden first value through);
//   - nests objects and arrays at most 32 levels deep;
//   - passed [Guard]: no member name at any depth is named like a credential
//     (password, secret, token, cookie, access or API key, authorization, ...)
//     and no string, member name or value, carries a PEM block, raw SDP, a
//     base64 data URI, base64 image data, a base64 run of 256 or more
//     characters, or an Authorization or Cookie header value;
//   - names a schema that is registered (names have the form
//     keeppeek.<name>.v<N>, see [CheckName]) and satisfies its validator. For
//     [MediaIntentV1] that means the JSON Schema in media-intent.v1.json plus
//     "a publish intent carries recording_mode", so no stale or zero-value
//     recording mode and no transient identifiers (source-session IDs, RTP
//     MIDs) can be stored.
//
// Every rejection is an [*Error] that names the offending field as a JSON
// path and matches [ErrInvalid], so callers map all of them to one error code
// (SCHEMA_INVALID) while the message still says which field to fix.
//
// Validate has two paths. The full path decodes the document into Go
// values, runs [Guard] over them and then the schema's validator (for
// [MediaIntentV1], a JSON Schema run by santhosh-tekuri/jsonschema plus a Go
// rule); it costs tens of microseconds and hundreds of allocations, too
// much for the store's write path. So a validator may also be a
// [RawValidator]: an accept-only fast path that reads the raw bytes once,
// allocating nothing, and answers "accepted" or "not sure". MediaIntentV1
// has one, which checks everything listed above directly on the bytes and
// takes a few microseconds. Invariants:
//
//   - the fast path only ever accepts what the full path accepts (soundness;
//     FuzzFastPathSound holds it to that), so the guarantees above do not
//     depend on which path ran;
//   - anything the fast path is not sure about — every rejection, and rare
//     spellings such as a priority of 1e2 — goes through the full path, which
//     alone writes error messages, so messages are the same either way;
//   - the full path, and for MediaIntentV1 the JSON Schema document in
//     media-intent.v1.json, stays the specification: the fast path's rules
//     are written from it, and it switches itself off if that document
//     changes in anything but annotations, until its rules are brought up to
//     date.
//
// The guard is a heuristic. It errs towards rejecting: a harmless field such
// as "tokens_per_second" is refused because its name contains "token". That
// is deliberate; a state store is the wrong place for secrets, and a rename
// is cheap, whereas a leaked credential replicated to every watcher is not.
package schema
