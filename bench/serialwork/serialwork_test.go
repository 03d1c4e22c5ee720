package serialwork

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/bench/harness"
)

// TestRun runs two rounds of the workload in this process and checks its
// figures: both sides with every operation, a resident sample per round,
// the stages in order of when they were taken, the idle sample, and the
// runtime's accounts.
func TestRun(t *testing.T) {
	t.Parallel()
	fig, err := Run(t.TempDir(), 2*Owners, harness.Runner{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range fig.Results {
		names = append(names, r.Name)
		if !strings.Contains(r.Note, "n=254 in 2 rounds") || r.P50us <= 0 {
			t.Errorf("side %+v: want 2 rounds of 127 timed operations", r)
		}
	}
	if !slices.Equal(names, []string{DurableCAS, MemoryCAS}) {
		t.Errorf("sides %v", names)
	}
	if len(fig.RoundRSS) != 2 || fig.StartRSS < 1<<20 || fig.OpenRSS < 1<<20 || fig.IdleRSS < 1<<20 || fig.HWM < max(fig.RoundRSS[0], fig.RoundRSS[1], fig.IdleRSS) {
		t.Errorf("figures %+v: want 2 round samples, resident sizes of at least 1 MiB, VmHWM above every sample", fig)
	}
	if fig.Idle < IdleSample || fig.IdleCPU < 0 {
		t.Errorf("idle sample %v using %v of CPU, want at least %v", fig.Idle, fig.IdleCPU, IdleSample)
	}
	if fig.Runtime["/memory/classes/total:bytes"] == 0 || fig.Runtime["/sched/goroutines:goroutines"] == 0 {
		t.Errorf("runtime accounts %v", fig.Runtime)
	}
}

// TestStoreOnly: the package links the root package and nothing of the
// comparison peers, so the child's resident set is the store's.
func TestStoreOnly(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, peer := range []string{"modernc.org/sqlite", "go.etcd.io/", "go.uber.org/zap", "github.com/prometheus/", "gonum.org/", "bench/report"} {
			if strings.Contains(p, peer) {
				t.Errorf("serialwork depends on %s", p)
			}
		}
	}
}
