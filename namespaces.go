package statestore

import (
	"slices"
	"strings"

	"github.com/keeppeek/statestore/materialize"
)

// NamespaceListing is one namespace of Namespaces: its name and counters.
type NamespaceListing struct {
	Name string
	NamespaceInfo
}

// Namespaces lists every namespace the store has seen, settings-backed ones
// included, in name order. A namespace that emptied stays listed with its
// revision, which lives on (the revision never goes backwards). Like
// Namespace it is an operator view and does no authorization: an embedder
// serving it to a client filters it by the client's principal first.
func (s *Store) Namespaces() []NamespaceListing {
	var out []NamespaceListing
	collect := func(v *materialize.View) {
		v.Namespaces(func(name string, n materialize.Namespace) bool {
			out = append(out, NamespaceListing{Name: name, NamespaceInfo: n})
			return true
		})
	}
	collect(s.view.Load())
	if s.settings != nil {
		collect(s.settings.view.Load())
	}
	slices.SortFunc(out, func(a, b NamespaceListing) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MayRead reports whether the namespace policy lets p read and watch
// namespace: an embedder listing Namespaces to a client shows only these.
func (p Principal) MayRead(namespace string) bool {
	return authorize(p, namespace, accessRead) == nil
}
