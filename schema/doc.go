// Package schema decides which desired-state documents the state store may
// keep. Every write and every replayed entry goes through [Registry.Validate],
// so the guarantees below hold for everything the store ever holds or serves.
//
// # What Validate guarantees
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
//     (password, secret, token, cookie, access or API key, authorization, ...,
//     also spelt with digits or symbols for letters: passw0rd, s3cr3t, p@$$)
//     and no string, member name or value, carries a PEM block, raw SDP, a
//     base64 data URI, base64 image data, a base64 run of 256 or more
//     characters, base64 or hex in spaced groups, a JSON Web Token, an AWS
//     access key id, an Authorization or Cookie header value, log text or
//     text of more than four lines; no array or object carries binary data
//     spread over its members (see "Binary data and text" below);
//   - decodes to the same values in every conforming JSON reader: no number
//     that is not finite in float64 (1e999, which encoding/json and
//     JSON.parse cannot represent), no lone surrogate escape such as \ud800
//     (encoding/json reads U+FFFD, JavaScript the surrogate), no NUL
//     character (C strings and Postgres text cannot hold one);
//   - names a schema that is registered (names have the form
//     keeppeek.<name>.v<N>, see [CheckName]) and satisfies its validator. For
//     [MediaIntentV1] that means the JSON Schema in media-intent.v1.json plus
//     "a publish intent carries recording_mode", so no stale or zero-value
//     recording mode and no transient identifiers (source-session IDs, RTP
//     MIDs) can be stored; for [MQTTBridgeV1], the JSON Schema in
//     mqtt-bridge.v1.json plus its credential rules (below).
//
// The guard is a heuristic. It errs towards rejecting: a harmless field such
// as "tokens_per_second" is refused because its name contains "token". That
// is deliberate; a state store is the wrong place for secrets, and a rename
// is cheap, whereas a leaked credential replicated to every watcher is not.
//
// # Binary data and text
//
// The specification keeps media bytes, JPEGs, access keys, passwords, raw
// SDP and arbitrary logs out of state documents. Beside the rules for one
// string, the guard refuses these, each with its bound:
//
//   - base64 or hex split over siblings: the strings of an array, the
//     member names of an object, or its string values, that consist only of
//     base64 characters (dots and line breaks allowed between them) and,
//     two or more of them, join into 256 characters or more (the run that
//     is refused in one string), when the joined text is hex (digits and
//     a-f only, each at least an eighth) or mixed like base64 (upper and
//     lower case at least a quarter each, digits at least a sixteenth).
//     Lists of identifiers, labels, UUIDs and camelCase names fail the mix
//     however long they are; a list of random mixed-case tokens of 256
//     characters or more does not, and is refused as base64;
//   - base64 or hex in spaced groups: 256 characters or more in tokens
//     separated by one or two of space, tab, line break, comma, colon and
//     semicolon, the tokens all of one length of two or more (the last may
//     be shorter) or all hex of at most eight digits, at least half unlike
//     the one before (words of prose differ in length, a repeated word is
//     not data);
//   - an array of more than 256 numbers that are all integers from 0 to
//     255: binary data written as numbers;
//   - raw SDP by its lines, whatever the first: two lines or more of the
//     form x= (an SDP type letter) of which one is v=, o= or m=, or any
//     line, alone or not, with a=ice-pwd, a=ice-ufrag, a=fingerprint,
//     a=crypto or a=candidate;
//   - text of more than four lines (maxTextLines), or of two lines or more
//     that start like log records (an ISO date, a clock time, a level such
//     as INFO or [WARN], level= or time=): a short description of a few
//     lines is configuration, a longer text a log or a document.
//
// These are heuristics too: an encoding they do not know gets through, and
// they are written to err towards refusing, as the names are. The guard's
// rules apply per container; a payload spread over many containers, each
// under its bound, is not seen (the document's size bound caps what it can
// hold).
//
// # keeppeek.media-intent.v1
//
// [MediaIntentV1] is the standard orchestration document: an intent to
// publish or subscribe a stable source's stream, never a binding (the worker
// resolves it against current capabilities). Its fields:
//
//	field           type     required                 values
//	role            string   yes                      "publish" or "subscribe"
//	desired         boolean  yes                      true or false
//	source_id       string   yes                      a stable source ID (identifier)
//	media_kind      string   yes                      "video" or "audio"
//	recording_mode  string   yes when role=publish    "inherit", "disabled" or "required"
//	variant_id      string   no                       a logical variant (identifier); absent
//	                                                  on a subscription: automatic selection
//	output_profile  string   no                       identifier
//	priority        integer  no                       0 to 1000
//	parameters      object   no                       service-specific configuration, see below
//
// An identifier is 1 to 128 bytes of [A-Za-z0-9._-], not "." or "..". The
// worker copies recording_mode to StartPublication.recording_mode, which is
// why a publish intent without it is refused here rather than becoming a
// zero-value request. Member names of parameters are namespaced,
// <ns>.<name> with ns of [a-z0-9-] (transcoder.scale, cv.model); their
// values are any JSON the guard accepts. Any other top-level field is
// an "unknown field", so transient source-session IDs and RTP MIDs cannot
// be stored.
//
// The specification's example, kept as testdata/accept/spec-example.json in
// this package's directory (with more accepted and rejected documents
// beside it in testdata/accept and testdata/reject):
//
//	{
//	  "role": "publish",
//	  "desired": true,
//	  "source_id": "front-door",
//	  "media_kind": "video",
//	  "variant_id": "browser-h264-720p",
//	  "output_profile": "browser-h264-720p",
//	  "priority": 100,
//	  "recording_mode": "disabled"
//	}
//
// # keeppeek.mqtt-bridge.v1
//
// [MQTTBridgeV1] is the desired state of one MQTT bridge, kept at key
// "bridge" of its namespace service/mqtt-<bridge>, a namespace class the
// store treats as live configuration: any TTL there is TTL_INVALID (see
// the statestore package, "Live configuration"). Its fields:
//
//	field              type     required  values
//	enabled            boolean  yes       whether the bridge should run
//	broker             object   yes       host, port, tls (all required, nothing else):
//	  host             string             a DNS name or IPv4 address, or an IPv6 address
//	                                      (bare or in brackets); 1 to 253 characters
//	  port             integer            1 to 65535
//	  tls              boolean            connect with TLS
//	client_id          string   no        1 to 64 of [A-Za-z0-9._-]
//	keepalive_seconds  integer  no        5 to 3600
//	mappings           array    yes       0 to 64 mappings, no two equal:
//	  direction        string             "outbound" (local to broker) or "inbound"
//	  local            string             the local topic filter (outbound) or topic (inbound)
//	  remote           string             the broker's topic (outbound) or topic filter (inbound)
//	  qos              integer            0, 1 or 2
//
// A topic filter is levels separated by '/', with '+' only as a whole
// level and '#' only as the whole last one; the side a mapping publishes
// to is a topic name, without wildcards. Topics are 1 to 256 characters,
// without NUL. No object takes a member it does not name.
//
// Credentials stay in the media server's secrets.toml, under the bridge's
// ID, and three rules keep them out of the document, wherever they are put:
// the guard refuses member names like password, secret or token ("looks
// like a credential"); this schema refuses member names like username,
// user or login ("looks like a login") and any string holding a URL with
// userinfo (scheme://user:password@...); and the broker is a host, never a
// URL, so "user:password@broker" is refused as userinfo in the broker
// endpoint. Each refusal says that credentials belong in secrets.toml. The
// example, kept as testdata/mqtt-bridge/front-door.json:
//
//	{
//	  "enabled": true,
//	  "broker": {"host": "broker.home.arpa", "port": 8883, "tls": true},
//	  "client_id": "keeppeek-front-door",
//	  "keepalive_seconds": 30,
//	  "mappings": [
//	    {"direction": "outbound", "local": "keeppeek/events/+/motion", "remote": "home/cameras/motion", "qos": 1},
//	    {"direction": "outbound", "local": "keeppeek/status/#", "remote": "home/keeppeek/status", "qos": 0},
//	    {"direction": "inbound", "local": "keeppeek/commands/ptz", "remote": "home/cameras/front-door/ptz/+", "qos": 2}
//	  ]
//	}
//
// # Errors
//
// Every rejection is an [*Error] that names the offending field as a JSON
// path and matches [ErrInvalid], so callers map all of them to one error code
// (SCHEMA_INVALID) while the message still says which field to fix. The
// path is said once: Error formats "schema <name>: <path>: <reason>", and
// the store's SCHEMA_INVALID carries the path as its field and the reason
// as its message.
//
// # Fast path
//
// Validate has two paths over one JSON reader, a walk over the document's
// bytes that knows the grammar, UTF-8, escapes, the nesting limit and
// duplicate names, and that either builds Go values or, allocating
// nothing, only checks. The full path has it build the values, runs [Guard]
// over them and then the schema's validator (for [MediaIntentV1], its JSON
// Schema's rules written in Go plus a publish rule); it costs tens
// of microseconds and hundreds of allocations, too much for the store's
// write path. So a validator may also be a [RawValidator]: an accept-only
// fast path that answers "accepted" or "not sure". MediaIntentV1 has one,
// which has the walk check the document, applying the guard's own functions
// to every member name and string and the schema's rules, with the very
// pattern functions the Go rules use, to the top-level
// members; it takes a few microseconds.
//
// # Invariants
//
//   - The fast path only ever accepts what the full path accepts, so the
//     guarantees above do not depend on which path ran.
//     Code: mediaIntent.AcceptRaw, walker.topObject, walker.object, walker.str.
//     Tests: FuzzFastPathSound, TestFastPathRejects, TestFastPathNamesEveryLength,
//     TestStrCleanImpliesNoProblem, FuzzGuardFilters.
//   - Anything the fast path is not sure about (every rejection, and rare
//     spellings such as a priority of 1e2) goes through the full path, which
//     alone writes error messages, so they are the same either way.
//     Code: Registry.Validate, validateFull, RawValidator.
//     Tests: TestValidateAnswersAsFullPath, TestRejectsFixtures.
//   - The full path, and for MediaIntentV1 the JSON Schema document in
//     media-intent.v1.json, stays the specification: the fast path's rules
//     are written from it, and it switches itself off if that document
//     changes in anything but annotations, until its rules and
//     mediaIntentFastSpec are brought up to date.
//     Code: newFastPath, canonicalSchema, mediaIntentFastSpec, fastPath.enabledReason.
//     Tests: TestFastPathFollowsSchema, TestFastPathEnabled.
//   - The built-in schemas are checked in Go alone (mediaIntentRules,
//     mqttBridgeRules), keyword for keyword as their embedded JSON Schemas
//     say, with the same errors; this package links no JSON Schema engine
//     (user-defined JSON Schemas are package schema/jsonschema's), and the
//     differential tests there hold both to the same verdicts.
//     Code: mediaIntentRules, mqttBridgeRules, faults.add, builtinFingerprint.
//     Tests: TestRejectsFixtures, TestMQTTBridgeRejects, TestMQTTBridgeAccepts.
//   - An MQTT bridge document holds no credentials: beside the guard's
//     credential names, a member named like a login at any depth, a URL
//     with userinfo in any string and userinfo in the broker host are
//     refused ahead of the JSON Schema, each refusal naming secrets.toml.
//     Code: mqttBridge.Validate, mqttCredentials, loginName, urlUserinfo.
//     Tests: TestMQTTBridgeRejects, TestMQTTBridgeAccepts.
//   - A document Validate accepts decodes with encoding/json into any, and
//     encoding that again gives a document of the same values: no
//     non-finite number, lone surrogate or NUL is ever stored.
//     Code: numberProblem, loneSurrogate, stringProblem, walker.str.
//     Tests: TestAcceptedDecodeEverywhere, FuzzDecodeMatchesEncodingJSON, TestRejectsIssue31Payloads.
//   - Every payload issue 31 found stored is refused with the JSON path of
//     what holds it and a reason naming what was found, and the documents
//     next to each rule stay accepted.
//     Code: arrayProblem, objectProblem, pieceStats.splitProblem, groupedProblem, textProblem,
//     jwtAt, awsKeyIDAt, credentialIn.
//     Tests: TestRejectsIssue31Payloads, TestAcceptsNearMisses, TestAcceptsFixtures, TestPayloadFixturesGenerated.
package schema
