package statestore

import (
	"strings"

	"github.com/keeppeek/statestore/quota"
)

// Identifier rules (see the package documentation): an <id> or key segment is one or more of
// [A-Za-z0-9._-], never "." or "..".
func validSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkPath validates a '/'-separated path of segments.
func checkPath(field, p string, max int) error {
	if p == "" {
		return newErr(InvalidArgument, field, "must not be empty")
	}
	if len(p) > max {
		return newErr(InvalidArgument, field, "%d bytes exceeds the %d-byte limit", len(p), max)
	}
	if p[0] == '/' {
		return newErr(InvalidArgument, field, "%q must not start with '/'", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if !validSegment(seg) {
			return newErr(InvalidArgument, field, "%q has an invalid segment %q (segments are [A-Za-z0-9._-]+, not '.' or '..', none empty)", p, seg)
		}
	}
	return nil
}

// checkNamespace validates a namespace: "system", "system/<id>",
// "service/<id>", "group/<id>" or "user/<owner-id>".
func checkNamespace(ns string, max int) error {
	if err := checkPath("namespace", ns, max); err != nil {
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
		return newErr(InvalidArgument, "namespace", "%q is not under system/, service/, group/ or user/", ns)
	}
	return newErr(InvalidArgument, "namespace", "%q must be %s/<id>", ns, class)
}

// checkKey validates a key.
func checkKey(key string, max int) error { return checkPath("key", key, max) }

// checkPrefix validates a watch key prefix: empty, or characters a key may
// hold (it need not end on a segment boundary).
func checkPrefix(prefix string, max int) error {
	if len(prefix) > max {
		return newErr(InvalidArgument, "key_prefix", "%d bytes exceeds the %d-byte limit", len(prefix), max)
	}
	if prefix == "" {
		return nil
	}
	if prefix[0] == '/' || strings.Contains(prefix, "//") {
		return newErr(InvalidArgument, "key_prefix", "%q must not start with '/' or hold an empty segment", prefix)
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return newErr(InvalidArgument, "key_prefix", "%q holds the invalid character %q", prefix, c)
		}
	}
	return nil
}

// checkOwner refuses, before anything reaches the journal, a writing
// principal whose ID cannot be an entry's owner: replay refuses a PUT
// record without an owner or with one over quota.OwnerBytes, so admitting
// it would acknowledge a write after which the store could not reopen.
func checkOwner(id string) error {
	if id == "" {
		return newErr(PermissionDenied, "principal", "a write needs an authenticated principal with an ID (it becomes the entry's owner)")
	}
	if len(id) > quota.OwnerBytes {
		return newErr(InvalidArgument, "principal", "principal ID of %d bytes exceeds the %d-byte owner limit", len(id), quota.OwnerBytes)
	}
	return nil
}

// checkWatchID validates a watch_id: one key segment, so it is bounded as a
// key is (max bytes). The registry keeps every id for the watch's life, and
// a session's ids come back in every update, so an unbounded id would let
// one client make every message it receives arbitrarily large.
func checkWatchID(id string, max int) error {
	if len(id) > max {
		return newErr(InvalidArgument, "watch_id", "%d bytes exceeds the %d-byte limit", len(id), max)
	}
	if !validSegment(id) {
		return newErr(InvalidArgument, "watch_id", "%q must be one segment of [A-Za-z0-9._-]+, not '.' or '..'", id)
	}
	return nil
}
