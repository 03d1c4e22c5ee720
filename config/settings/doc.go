// Package settings owns the `[state_store]` section of the media server's
// config.toml: the settings-backed namespaces of the state store, their
// revision counters and their entries, kept where a person can read and
// review them and where they travel inside the configuration ZIP.
//
// The section's layout (written by Render, read by Parse):
//
//	[state_store]
//	# Settings-backed namespaces: live configuration written by the KeepPeek
//	# state store. Declare a namespace here to back it by this file.
//	namespaces = ['group/living-room', 'system/config']
//
//	[state_store.revisions]
//	'group/living-room' = 7
//
//	[[state_store.entries]]
//	namespace = 'group/living-room'
//	key = 'layout'
//	schema = 'keeppeek.media-intent.v1'
//	owner = 'ops'
//	revision = 7
//	created_at_ms = 1750000000000
//	updated_at_ms = 1750000000000
//	document = '{"role":"subscribe","desired":true,"source_id":"cam","media_kind":"video"}'
//
// namespaces declares which namespaces this file backs (an operator adds
// one by hand; the store keeps the list as it found it). revisions holds
// each namespace's revision counter, which outlives the namespace's
// entries exactly as in the journal. Each entry is one complete state
// document with the metadata the store assigned; the document is the JSON
// text as a TOML string.
//
// # Invariants
//
//  1. Splice replaces only the bytes of the state_store tables: from a
//     `[state_store…]` or `[[state_store…]]` header to the last line of
//     content before the next table that is not part of state_store.
//     Every other byte of the file — other tables, arrays of tables, root
//     keys, comments, blank lines, including comments directly above the
//     next table — is left as it was.
//     Code: Splice, locate, trimTail.
//     Tests: TestSpliceGolden, TestSpliceKeepsOutside, statestore.TestSettingsRestOfFileByteIdentical.
//  2. Render then Splice is idempotent: rewriting an unchanged section
//     leaves the file byte-identical.
//     Code: Render, Splice.
//     Tests: TestSpliceGolden.
//  3. File.Replace leaves config.toml either as it was or wholly replaced
//     (temporary file, fsync, rename, directory fsync), keeps the file's
//     permission bits, and returns only once the new file is durable.
//     Code: File.Replace, disk.WriteAtomicPerm.
//     Tests: TestFileReplace, statestore.TestSettingsCrashDuringRewrite, statestore.TestSettingsFailedWrite.
//  4. Parse rejects a section it cannot read back exactly: unknown fields,
//     wrong types, an entry missing a field; errors name the entry
//     (state_store.entries[i]) and the field. The rules of the store
//     (identifiers, schemas, revisions, bounds) are applied by the store,
//     with the same code as journal replay.
//     Code: Parse, EntryError, SyntaxError.
//     Tests: TestParseErrors, statestore.TestSettingsOpenRejectsBadFile.
package settings
