package clusterkill

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestCommandRefusals: a Control line that is not a command the node can
// run is answered with an error naming what is wrong, before it reaches
// the store (nil here: none of these may touch it).
func TestCommandRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line    string
		failing *atomic.Int64
		want    string
	}{
		{"", nil, "want a command"},
		{"remove", nil, "want a command"},
		{"add a b", nil, "want a command"},
		{"failsync 3", nil, "fault hooks are not armed"},
		{"failsync x", new(atomic.Int64), `count "x"`},
		{"failsync -1", new(atomic.Int64), `count "-1"`},
		{"add node-9", nil, `"node-9" is not among the peers`},
		{"shrink 3", nil, `unknown command "shrink"`},
	} {
		err := command(NodeConfig{Peers: []Peer{{ID: "node-0"}}}, nil, tc.failing, tc.line)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("command(%q) = %v, want an error with %q", tc.line, err, tc.want)
		}
	}
	// Armed, failsync sets the count the sync hook draws from.
	var failing atomic.Int64
	if err := command(NodeConfig{}, nil, &failing, "failsync 3"); err != nil || failing.Load() != 3 {
		t.Fatalf("failsync 3 = %v, count %d", err, failing.Load())
	}
}
