package statestore

import "strings"

// Principal is an authenticated identity, as the media server's session
// layer established it. Authorization is decided from it alone: nothing in
// a namespace's spelling grants anything.
type Principal struct {
	ID    string // server-issued principal ID
	Admin bool
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

// authorize applies the namespace policy of DESIGN.md §3 to a namespace that
// has already passed checkNamespace.
func authorize(p Principal, namespace string, a access) error {
	if !p.system && p.ID == "" {
		return newErr(PermissionDenied, "principal", "unauthenticated principal may not %s namespace %q", a, namespace)
	}
	class, owner, _ := strings.Cut(namespace, "/")
	allowed := false
	switch class {
	case "system":
		allowed = p.system || (a == accessRead && p.Admin)
	case "service", "group":
		allowed = p.Admin
	case "user":
		allowed = p.Admin || p.ID == owner
	}
	if !allowed {
		return newErr(PermissionDenied, "namespace", "principal %q may not %s namespace %q", p.ID, a, namespace)
	}
	return nil
}
