package statestore_test

import (
	"testing"

	"github.com/keeppeek/statestore"
)

// TestExpectForms: the three forms of expected_revision are told apart by
// Revision, and IfRevision(0) is CreateOnly.
func TestExpectForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		x    statestore.Expect
		rev  uint64
		set  bool
	}{
		{"blind", statestore.Expect{}, 0, false},
		{"create-only", statestore.CreateOnly, 0, true},
		{"revision 0 is create-only", statestore.IfRevision(0), 0, true},
		{"revision 7", statestore.IfRevision(7), 7, true},
	} {
		if rev, set := tc.x.Revision(); rev != tc.rev || set != tc.set {
			t.Errorf("%s: Revision() = %d, %v; want %d, %v", tc.name, rev, set, tc.rev, tc.set)
		}
	}
	if statestore.IfRevision(0) != statestore.CreateOnly {
		t.Error("IfRevision(0) differs from CreateOnly")
	}
}
