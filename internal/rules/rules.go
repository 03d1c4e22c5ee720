// Package rules holds the identifier rules every namespace, key, key
// prefix and watch_id obeys, and what a PUT must say of itself besides its
// document: the rules that admission applies to a write and that every
// check of stored data (replay, checkpoint images, backups, the settings
// section, kpjournal verify) applies again, so both judge with one code.
// Bounds live in package quota and document rules in package schema.
//
// Every refusal is an *Error naming the field at fault; the store turns it
// into its INVALID_ARGUMENT (or SCHEMA_INVALID) answer with the same field
// and text.
package rules

import (
	"fmt"
	"strings"
)

// Error is a broken rule: the field at fault ("namespace", "key",
// "key_prefix", "watch_id", "schema", "owner") and why.
type Error struct {
	Field  string
	Reason string
	// Schema is set when the rule broken is a registered schema's: the
	// store answers it SCHEMA_INVALID instead of INVALID_ARGUMENT.
	Schema bool
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

func broken(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Segment reports whether s is a valid <id> or key segment: one or more of
// [A-Za-z0-9._-], never "." or "..".
func Segment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !segmentByte(s[i]) {
			return false
		}
	}
	return true
}

func segmentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// path validates a '/'-separated path of segments of at most max bytes.
func path(field, p string, max int) error {
	if p == "" {
		return broken(field, "must not be empty")
	}
	if len(p) > max {
		return broken(field, "%d bytes exceeds the %d-byte limit", len(p), max)
	}
	if p[0] == '/' {
		return broken(field, "%q must not start with '/'", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if !Segment(seg) {
			return broken(field, "%q has an invalid segment %q (segments are [A-Za-z0-9._-]+, not '.' or '..', none empty)", p, seg)
		}
	}
	return nil
}

// Namespace validates a namespace of at most max bytes: "system",
// "system/<id>", "service/<id>", "group/<id>" or "user/<owner-id>".
func Namespace(ns string, max int) error {
	if err := path("namespace", ns, max); err != nil {
		return err
	}
	class, rest, hasRest := strings.Cut(ns, "/")
	switch class {
	case "system":
		if !hasRest || !strings.Contains(rest, "/") {
			return nil
		}
	case "service", "group", "user":
		if hasRest && !strings.Contains(rest, "/") {
			return nil
		}
	default:
		return broken("namespace", "%q is not under system/, service/, group/ or user/", ns)
	}
	return broken("namespace", "%q must be %s/<id>", ns, class)
}

// Key validates a key of at most max bytes.
func Key(key string, max int) error { return path("key", key, max) }

// Prefix validates a watch key prefix of at most max bytes: empty, or
// characters a key may hold (it need not end on a segment boundary).
func Prefix(prefix string, max int) error {
	if len(prefix) > max {
		return broken("key_prefix", "%d bytes exceeds the %d-byte limit", len(prefix), max)
	}
	if prefix == "" {
		return nil
	}
	if prefix[0] == '/' || strings.Contains(prefix, "//") {
		return broken("key_prefix", "%q must not start with '/' or hold an empty segment", prefix)
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !segmentByte(c) && c != '/' {
			return broken("key_prefix", "%q holds the invalid character %q", prefix, c)
		}
	}
	return nil
}

// WatchID validates a watch_id: one key segment, so it is bounded as a key
// is (max bytes). The registry keeps every id for the watch's life, and a
// session's ids come back in every update, so an unbounded id would let
// one client make every message it receives arbitrarily large.
func WatchID(id string, max int) error {
	if len(id) > max {
		return broken("watch_id", "%d bytes exceeds the %d-byte limit", len(id), max)
	}
	if !Segment(id) {
		return broken("watch_id", "%q must be one segment of [A-Za-z0-9._-]+, not '.' or '..'", id)
	}
	return nil
}

// PutMetadata is what a PUT record must say of itself besides its
// identifiers: a schema that registered reports as known, and an owner.
func PutMetadata(registered func(string) bool, schema, owner string) error {
	if !registered(schema) {
		return &Error{Field: "schema", Reason: fmt.Sprintf("%q is not a registered schema", schema), Schema: true}
	}
	if owner == "" {
		return broken("owner", "PUT record without an owner")
	}
	return nil
}

// MQTTNamespacePrefix begins every MQTT integration namespace,
// service/mqtt-<bridge>: a bridge's desired state is live configuration,
// so its namespace takes no lease.
const MQTTNamespacePrefix = "service/mqtt-"

// LiveConfiguration names the namespace class of ns whose entries are live
// configuration rather than leases ("MQTT integration state"), or returns
// "" for a namespace that takes leases. Settings-backed namespaces are
// live configuration too, but which those are is declared in config.toml,
// so their home refuses their leases itself.
func LiveConfiguration(ns string) string {
	if strings.HasPrefix(ns, MQTTNamespacePrefix) {
		return "MQTT integration state (" + MQTTNamespacePrefix + "<bridge>)"
	}
	return ""
}
