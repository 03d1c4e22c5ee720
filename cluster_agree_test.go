package statestore_test

import (
	"context"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/schema/jsonschema"
)

// agreeCases are the Options a fourth node differs by, and the limit or
// schema its refusal must name ("" : it agrees).
var agreeCases = []struct {
	name  string
	mod   func(t *testing.T, o *statestore.Options)
	field string
}{
	{"identical", func(*testing.T, *statestore.Options) {}, ""},
	{"limit", func(_ *testing.T, o *statestore.Options) { o.Limits.MaxEntriesPerNamespace = 7 }, "limits.MaxEntriesPerNamespace"},
	{"extra schema", func(t *testing.T, o *statestore.Options) {
		registerSchema(t, o.Schemas, "keeppeek.more.v1", `{"type":"object"}`)
	}, "schema keeppeek.more.v1"},
	{"schema definition", func(t *testing.T, o *statestore.Options) {
		o.Schemas = schema.NewRegistry()
		registerExtra(t, o.Schemas, `{"type":"object","required":["a"]}`)
	}, "schema keeppeek.extra.v1"},
}

func registerExtra(t *testing.T, r *schema.Registry, def string) {
	t.Helper()
	registerSchema(t, r, "keeppeek.extra.v1", def)
}

func registerSchema(t *testing.T, r *schema.Registry, name, def string) {
	t.Helper()
	v, err := jsonschema.NewJSONSchemaValidator(name, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(name, v); err != nil {
		t.Fatal(err)
	}
}

// agreeCluster is a 3-node cluster whose nodes all know keeppeek.extra.v1
// as {"type":"object"}, so a fourth node can differ from it by a schema's
// definition as well as by its presence.
func agreeCluster(t *testing.T) *testCluster {
	return newTestClusterWith(t, 3, nil, []func(*statestore.Options){func(o *statestore.Options) { registerExtra(t, o.Schemas, `{"type":"object"}`) }})
}

// fourth opens node n4 as a joiner on lb, with the cluster's Options
// changed by mod.
func fourth(t *testing.T, c *testCluster, lb *replica.Loopback, mod func(*testing.T, *statestore.Options)) (*statestore.Store, error) {
	opts := statestore.Options{Dir: t.TempDir(), Clock: c.clock, Schemas: schema.NewRegistry()}
	registerExtra(t, opts.Schemas, `{"type":"object"}`)
	mod(t, &opts)
	p4 := statestore.Peer{ID: "n4", RaftAddr: "raft-n4", RPCAddr: "rpc-n4"}
	s, err := statestore.OpenCluster(opts, statestore.ClusterOptions{NodeID: "n4", RaftAddr: p4.RaftAddr, RPCAddr: p4.RPCAddr,
		Peers: append(append([]statestore.Peer(nil), c.peers...), p4), Join: true, Engine: &replica.Raft{Transport: c.net.Transport(p4.RaftAddr), Loopback: lb}})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// TestClusterAgreementAtOpen: a node whose limits or schemas differ from a
// peer's it reaches refuses to open, naming the first difference; an
// identical one opens and joins.
func TestClusterAgreementAtOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range agreeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agreeCluster(t)
			s, err := fourth(t, c, c.lb, tc.mod)
			if tc.field != "" {
				wantCode(t, err, statestore.InvalidArgument, tc.field)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := c.leader()
			if err := l.Cluster().AddVoter(statestore.Peer{ID: "n4", RaftAddr: "raft-n4", RPCAddr: "rpc-n4"}); err != nil {
				t.Fatalf("an identical node's AddVoter: %v", err)
			}
			// The leader's configuration: n4 learns it a heartbeat later.
			if m, _ := l.Cluster().Members(); s == nil || len(m) != 4 {
				t.Fatalf("members after the join: %+v", m)
			}
		})
	}
}

// TestClusterAgreementAtAddVoter: a node that opened where it reached no
// peer (here, a forwarding network of its own) and differs is refused by
// the leader's AddVoter, naming the difference, and stays out of the
// configuration; an identical one is added.
func TestClusterAgreementAtAddVoter(t *testing.T) {
	t.Parallel()
	for _, tc := range agreeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agreeCluster(t)
			own := replica.NewLoopback()
			if _, err := fourth(t, c, own, tc.mod); err != nil {
				t.Fatal(err)
			}
			// The cluster reaches n4's handler; n4 reaches none of theirs.
			c.lb.Register("rpc-n4", func(ctx context.Context, req []byte) ([]byte, error) { return own.Call(ctx, "rpc-n4", req) })
			l := c.leader()
			err := l.Cluster().AddVoter(statestore.Peer{ID: "n4", RaftAddr: "raft-n4", RPCAddr: "rpc-n4"})
			want := 3
			if tc.field != "" {
				wantCode(t, err, statestore.InvalidArgument, tc.field)
			} else if err != nil {
				t.Fatal(err)
			} else {
				want = 4
			}
			if m, _ := l.Cluster().Members(); len(m) != want {
				t.Fatalf("members %+v, want %d", m, want)
			}
		})
	}
}
