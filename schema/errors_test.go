package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

// mustReject checks that err is an *Error naming path and giving a reason
// containing reason, and that it matches ErrInvalid.
func mustReject(t *testing.T, err error, path, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection at %s", path)
	}
	var e *schema.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *schema.Error", err, err)
	}
	if !errors.Is(err, schema.ErrInvalid) {
		t.Errorf("error %v does not match ErrInvalid", err)
	}
	if e.Path != path {
		t.Errorf("path = %q, want %q (error: %v)", e.Path, path, err)
	}
	if !strings.Contains(e.Reason, reason) {
		t.Errorf("reason = %q, want it to contain %q", e.Reason, reason)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("message %q does not name %s", err, path)
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	err := schema.NewRegistry().Validate(schema.MediaIntentV1, readFixture(t, "reject/publish-without-recording-mode.json"))
	const want = "schema keeppeek.media-intent.v1: $.recording_mode: publish intent requires recording_mode"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
