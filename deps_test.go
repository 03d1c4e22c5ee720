package statestore_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavyPackages are packages whose initialisation or linked size is
// resident in every process embedding the store, and which the root
// package needs none of: the protobuf runtime's registry and the generated
// messages (the snapshot bound is computed by wiresize's arithmetic).
var heavyPackages = []string{
	"google.golang.org/protobuf/reflect/protoregistry",
	"google.golang.org/protobuf/proto",
	"github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1",
	"github.com/keeppeek/statestore/wire",
}

// rootDeps is every package the root package depends on, directly or not
// (go list -deps), itself included.
func rootDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "github.com/keeppeek/statestore").Output()
	if err != nil {
		t.Fatalf("go list -deps github.com/keeppeek/statestore: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/keeppeek/statestore") {
		t.Fatalf("go list -deps did not list the root package: %q", out)
	}
	return deps
}

// TestRootLinksNothingHeavy: the root package does not depend, directly or
// not, on any of heavyPackages.
func TestRootLinksNothingHeavy(t *testing.T) {
	t.Parallel()
	for _, p := range rootDeps(t) {
		if slices.Contains(heavyPackages, p) {
			t.Errorf("the root package depends on %s", p)
		}
	}
}

// TestNoJSONSchemaEngineLinked pins that neither the root package nor
// package schema links the JSON Schema library, whose package init
// compiles meta-schemas in every process that links it (issue 30): the
// built-in schemas are checked in Go, user-defined JSON Schemas live in
// schema/jsonschema.
func TestNoJSONSchemaEngineLinked(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".", "./schema").Output()
	if err != nil {
		t.Fatalf("go list -deps . ./schema: %v", err)
	}
	if !strings.Contains(string(out), "github.com/keeppeek/statestore/schema\n") {
		t.Fatalf("go list did not list package schema: %q", out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/santhosh-tekuri/jsonschema") {
			t.Errorf("the root package or schema depends on %s", p)
		}
	}
}

// TestRootLinksNoReplicationEngine pins that the root package links no
// replication engine and no network stack (issue 30): cluster mode talks
// to package replica/consensus only, and hashicorp/raft with its transports
// (go-msgpack's text/template and net/rpc, go-metrics' net/http, hclog),
// crypto/tls and net come with package replica, which only an embedder of
// cluster mode imports.
func TestRootLinksNoReplicationEngine(t *testing.T) {
	t.Parallel()
	deps := rootDeps(t)
	if !slices.Contains(deps, "github.com/keeppeek/statestore/replica/consensus") {
		t.Fatalf("go list -deps did not list replica/consensus, which cluster mode talks to: %q", deps)
	}
	forbidden := []string{"crypto/tls", "net", "net/http", "net/rpc", "text/template",
		"github.com/keeppeek/statestore/replica", "github.com/keeppeek/statestore/replica/raftlog"}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/hashicorp/") || slices.Contains(forbidden, p) {
			t.Errorf("the root package depends on %s", p)
		}
	}
}
