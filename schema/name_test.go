package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

func TestCheckName(t *testing.T) {
	t.Parallel()
	good := []string{
		"keeppeek.media-intent.v1", "keeppeek.a.v1", "keeppeek.a.b-c.d9.v12", "keeppeek.0.v9",
		"keeppeek.v1.v2", "keeppeek.-.v1", "keeppeek.observed-status.v1000",
		"keeppeek." + strings.Repeat("a", 128-len("keeppeek..v1")) + ".v1",
	}
	bad := []string{
		"", "keeppeek", "keeppeek.v1", "keeppeek..v1", "keeppeek.a..b.v1", "keeppeek..a.v1",
		"keeppeek.a.v0", "keeppeek.a.v01", "keeppeek.a.v", "keeppeek.a.1", "keeppeek.a.V1",
		"keeppeek.a.v-1", "keeppeek.a.v1x", "keeppeek.a.v1.", "keeppeek.A.v1", "keeppeek.a_b.v1",
		"keeppeek.a b.v1", "keeppeek.ä.v1", "Keeppeek.a.v1", "other.a.v1", ".keeppeek.a.v1",
		"keeppeek.a.v1 ", "keeppeek.a/b.v1",
		"keeppeek." + strings.Repeat("a", 129-len("keeppeek..v1")) + ".v1",
	}
	for _, n := range good {
		if err := schema.CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		err := schema.CheckName(n)
		var e *schema.Error
		if !errors.As(err, &e) || e.Path != "schema" {
			t.Errorf("CheckName(%q) = %v, want *Error at path schema", n, err)
		}
	}
}
