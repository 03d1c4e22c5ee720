package statestore_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/keeppeek/statestore"
)

// TestErrorMatchesItsCode: an *Error prints its code, field, message and,
// for CONFLICT, the current revision; errors.Is matches it with its code's
// sentinel through any wrapping and with no other; CodeOf reads the code,
// OK for nil and UNAVAILABLE for an error of no code.
func TestErrorMatchesItsCode(t *testing.T) {
	t.Parallel()
	cause := fs.ErrPermission
	tests := []struct {
		err   error
		code  statestore.Code
		text  string
		match error
	}{
		{&statestore.Error{Code: statestore.Conflict, Field: "expected_revision", Message: "expected revision 3", CurrentRevision: 4},
			statestore.Conflict, "CONFLICT: expected_revision: expected revision 3 (current revision 4)", statestore.ErrConflict},
		{fmt.Errorf("wrapped: %w", &statestore.Error{Code: statestore.NotFound, Field: "key", Message: `"k" not found`}),
			statestore.NotFound, `wrapped: NOT_FOUND: key: "k" not found`, statestore.ErrNotFound},
		{&statestore.Error{Code: statestore.Storage, Field: "journal", Message: "disk", Err: cause},
			statestore.Storage, "STORAGE: journal: disk", statestore.ErrStorage},
		{errors.New("plain"), statestore.Unavailable, "plain", nil},
		{nil, statestore.OK, "", nil},
	}
	sentinels := []error{statestore.ErrNotFound, statestore.ErrConflict, statestore.ErrStorage, statestore.ErrUnavailable}
	for _, tc := range tests {
		if got := statestore.CodeOf(tc.err); got != tc.code {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.code)
		}
		if tc.err == nil {
			continue
		}
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("text %q, want %q", got, tc.text)
		}
		for _, s := range sentinels {
			if want := s == tc.match; errors.Is(tc.err, s) != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, s, !want, want)
			}
		}
	}
	if !errors.Is(&statestore.Error{Code: statestore.Storage, Err: cause}, cause) {
		t.Error("the cause is not reachable through errors.Is")
	}
	if got := statestore.Code(99).String(); got != "CODE(99)" {
		t.Errorf("an unknown code prints %q", got)
	}
}
