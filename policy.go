package statestore

import (
	"fmt"
	"strings"
	"time"

	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/quota"
)

// Principal is an authenticated identity, as the media server's session
// layer established it. Authorization is decided from it alone: nothing in
// a namespace's spelling grants anything.
//
// A Principal becomes an administrator only by the embedder setting Admin
// when it builds the value from its own authenticated session (a server
// operator's account, say); no request field and no namespace name can set
// it. The server itself is System(), the only writer of system/.
type Principal struct {
	ID    string // server-issued principal ID; the owner of every entry it writes
	Admin bool   // granted by the embedder, see the package documentation
	// system marks the server itself. It is unexported so that no client
	// request can construct it: only System() returns one.
	system bool
}

// System returns the server's own principal, the only writer of system/.
func System() Principal { return Principal{ID: "keeppeek-server", Admin: true, system: true} }

// IsSystem reports whether p is the server itself.
func (p Principal) IsSystem() bool { return p.system }

type access int

const (
	accessRead access = iota // get, watch
	accessWrite
)

func (a access) String() string {
	if a == accessWrite {
		return "write"
	}
	return "read"
}

// Policy rules, each named as PERMISSION_DENIED quotes it so the caller
// learns which row of the namespace policy refused, not only that one did.
const (
	ruleAuthenticated = "rule: only an authenticated principal (non-empty ID) has any access"
	ruleSystemWrite   = "rule system/: only the server writes"
	ruleSystemRead    = "rule system/: only administrators read"
	ruleAdminOnly     = "rule %s/<id>/: only administrators read and write"
	ruleUserOwner     = "rule user/<owner-id>/: only the owner %q or an administrator reads and writes"
)

// authorize applies the namespace policy (the table in the package
// documentation) to a namespace that has already passed rules.Namespace.
func authorize(p Principal, namespace string, a access) error {
	if !p.system && p.ID == "" {
		return newErr(PermissionDenied, "principal", "unauthenticated principal may not %s namespace %q (%s)", a, namespace, ruleAuthenticated)
	}
	class, owner, _ := strings.Cut(namespace, "/")
	var refused string
	switch class {
	case "system":
		if a == accessWrite && !p.system {
			refused = ruleSystemWrite
		} else if !p.Admin {
			refused = ruleSystemRead
		}
	case "service", "group":
		if !p.Admin {
			refused = fmt.Sprintf(ruleAdminOnly, class)
		}
	case "user":
		if !p.Admin && p.ID != owner {
			refused = fmt.Sprintf(ruleUserOwner, owner)
		}
	default:
		// rules.Namespace admits no other class; fail closed regardless.
		refused = "rule: namespaces outside system/, service/, group/ and user/ are closed"
	}
	if refused != "" {
		return newErr(PermissionDenied, "namespace", "principal %q may not %s namespace %q (%s)", p.ID, a, namespace, refused)
	}
	return nil
}

// MayRead reports whether the namespace policy lets p read and watch
// namespace: an embedder listing Namespaces to a client shows only these.
func (p Principal) MayRead(namespace string) bool {
	return authorize(p, namespace, accessRead) == nil
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

// MQTTNamespacePrefix begins the namespaces of MQTT integration state,
// service/mqtt-<bridge>: live configuration, where every TTL is refused
// (see "Live configuration" in the package documentation).
const MQTTNamespacePrefix = rules.MQTTNamespacePrefix

// MQTTNamespace returns the namespace of the MQTT bridge with ID bridge,
// which holds its keeppeek.mqtt-bridge.v1 document. It is a service/
// namespace like any other for authorization; only leases differ.
func MQTTNamespace(bridge string) string { return MQTTNamespacePrefix + bridge }

// refuseLease answers TTL_INVALID for a TTL on a namespace of live
// configuration, before anything else looks at the TTL: a bridge's
// configuration that lapsed would silently switch the bridge off, which
// is not what anyone writing it meant.
func refuseLease(namespace string, ttl time.Duration) error {
	if ttl == 0 {
		return nil
	}
	if class := rules.LiveConfiguration(namespace); class != "" {
		return newErr(TTLInvalid, "ttl", "namespace %q is %s: live configuration takes no TTL", namespace, class)
	}
	return nil
}
