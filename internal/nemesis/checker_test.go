package nemesis

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/regcheck"
	"github.com/keeppeek/statestore/watch"
)

// op is one operation of a crafted round; ret -1 means its answer never
// came (the outcome is unknown).
type op struct {
	c         regcheck.Call
	r         regcheck.Result
	call, ret int64
}

func put(key, value string, expect int64) regcheck.Call {
	return regcheck.Call{Kind: regcheck.Put, Key: key, Expect: expect, Value: value}
}
func get(key string) regcheck.Call { return regcheck.Call{Kind: regcheck.Get, Key: key} }
func del(key string, expect int64) regcheck.Call {
	return regcheck.Call{Kind: regcheck.Del, Key: key, Expect: expect}
}
func ok(rev uint64, value string) regcheck.Result {
	return regcheck.Result{Code: regcheck.OK, Rev: rev, Value: value}
}

var (
	absent  = regcheck.Result{Code: regcheck.NotFound}
	unknown = regcheck.Result{Unknown: true}
)

// croundT is one crafted round: its operations and what the observation
// after it showed.
type croundT struct {
	ops []op
	obs regcheck.Result
}

// feedRounds runs crafted rounds on key "k" through the run's own
// recording and observation path (state.record, run.addRound,
// run.closeWindow), as Run does after each quiesce.
func feedRounds(t *testing.T, rounds []croundT) *run {
	t.Helper()
	rep := &Report{Events: map[string]int{}, Unknown: map[string]int{}}
	r := &run{st: newState(rep), rep: rep, check: regcheck.NewChecker(0)}
	r.check.Unit, r.check.Observation = "round", "quiesce"
	r.closeWindow(-1, "k", 0, absent, 1)
	for n, rd := range rounds {
		base := int64(n+1) * 1000
		for i, o := range rd.ops {
			ret := base + o.ret
			if o.ret < 0 {
				ret = math.MaxInt64
			}
			r.st.record(porcupine.Operation{ClientId: i + 1, Input: o.c, Output: o.r, Call: base + o.call, Return: ret,
				Metadata: regcheck.Origin{Cycle: n, Op: uint64(i + 1)}}, "test")
		}
		r.addRound(n, base+500)
		r.closeWindow(n, "k", base+500, rd.obs, base+501)
	}
	return r
}

// TestCheckerFindsStaleReadsAndLostWrites feeds crafted histories through
// the run's checks: a stale read and a lost write are violations (the
// lost write counted as such too), while unknown outcomes may apply or not
// up to the round's observation, and never after it.
func TestCheckerFindsStaleReadsAndLostWrites(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rounds []croundT
		lost   int
		says   string // in a violation; "" for none
	}{
		{"linearizable", []croundT{{[]op{
			{put("k", "a", 0), ok(1, ""), 1, 2},
			{put("k", "b", 1), ok(2, ""), 3, 6},
			{get("k"), ok(2, "b"), 7, 8},
			{put("k", "c", 1), regcheck.Result{Code: regcheck.Conflict, Rev: 2}, 4, 9},
		}, ok(2, "b")}}, 0, ""},
		{"stale read", []croundT{{[]op{
			{put("k", "a", 0), ok(1, ""), 1, 2},
			{put("k", "b", 1), ok(2, ""), 3, 4},
			{get("k"), ok(1, "a"), 5, 6},
		}, ok(2, "b")}}, 0, "nothing explains op 3 of round 0 (get k -> ok a@1)"},
		{"stale read across rounds", []croundT{
			{[]op{{put("k", "a", 0), ok(1, ""), 1, 2}, {put("k", "b", 1), ok(2, ""), 3, 4}}, ok(2, "b")},
			{[]op{{get("k"), ok(1, "a"), 1, 2}}, ok(2, "b")},
		}, 0, "the history of k (round 1) is not linearizable"},
		{"lost write: absent", []croundT{{[]op{{put("k", "a", 0), ok(1, ""), 1, 2}}, absent}}, 1,
			"nothing explains the read after round 0's quiesce (get k -> not found)"},
		{"lost write: an older revision", []croundT{{[]op{
			{put("k", "a", 0), ok(1, ""), 1, 2},
			{put("k", "b", regcheck.Blind), ok(2, ""), 3, 4},
		}, ok(1, "a")}}, 1, "missing an acknowledged write"},
		{"a deleted write is not lost", []croundT{{[]op{
			{put("k", "a", 0), ok(1, ""), 1, 2},
			{del("k", 1), ok(2, ""), 3, 4},
		}, absent}}, 0, ""},
		{"an unknown write applied", []croundT{{[]op{{put("k", "a", 0), unknown, 1, -1}}, ok(1, "a")}}, 0, ""},
		{"an unknown write not applied", []croundT{{[]op{{put("k", "a", 0), unknown, 1, -1}}, absent}}, 0, ""},
		{"an unknown write applied after its round's observation", []croundT{
			{[]op{{put("k", "a", 0), unknown, 1, -1}}, absent},
			{nil, ok(1, "a")},
		}, 0, "nothing explains the read after round 1's quiesce (get k -> ok a@1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := feedRounds(t, tc.rounds)
			msgs := strings.Join(r.st.fails, "\n")
			switch {
			case tc.says == "" && r.rep.violations != 0:
				t.Fatalf("violations in a clean history: %s", msgs)
			case tc.says != "" && !strings.Contains(msgs, tc.says):
				t.Fatalf("violations %q do not say %q", msgs, tc.says)
			case r.rep.Lost != tc.lost:
				t.Fatalf("%d lost writes, want %d (%s)", r.rep.Lost, tc.lost, msgs)
			}
			// Every violation here, a lost write too, is one porcupine finds.
			if lin := r.check.Result(); (lin.Result == "illegal") != (tc.says != "") {
				t.Fatalf("linearizability %+v for %q", lin, tc.says)
			}
		})
	}
}

// TestLeaseRule: an EXPIRE before its lease's deadline, two EXPIREs of one
// lease at different revisions, and one watcher seeing a lease expire
// twice are violations; an EXPIRE at or after the deadline is not.
func TestLeaseRule(t *testing.T) {
	t.Parallel()
	const far = int64(1) << 50 // a deadline no clock reaches
	ev := func(key string, rev uint64) client.WatchEvent {
		return client.WatchEvent{Kind: client.EventUpdate, Update: watch.Expire, Key: key, Revision: rev}
	}
	cases := []struct {
		name     string
		deadline int64
		events   []client.WatchEvent
		second   []client.WatchEvent // seen by a second watcher
		early    int
		says     string
	}{
		{"on time", 1, []client.WatchEvent{ev("lease/1", 5)}, []client.WatchEvent{ev("lease/1", 5)}, 0, ""},
		{"early", far, []client.WatchEvent{ev("lease/1", 5)}, nil, 1, "before its deadline"},
		{"two revisions", 1, []client.WatchEvent{ev("lease/1", 5)}, []client.WatchEvent{ev("lease/1", 7)}, 0, "two EXPIREs"},
		{"twice on one watcher", 1, []client.WatchEvent{ev("lease/1", 5), ev("lease/1", 5)}, nil, 0, "a second EXPIRE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := &Report{Unknown: map[string]int{}}
			s := newState(rep)
			s.leases["lease/1"] = tc.deadline
			for i, evs := range [][]client.WatchEvent{tc.events, tc.second} {
				seen := map[string]bool{}
				for _, e := range evs {
					s.mu.Lock()
					s.expire([]string{"a", "b"}[i], e, seen)
					s.mu.Unlock()
				}
			}
			msgs := strings.Join(s.fails, "\n")
			switch {
			case tc.says == "" && rep.violations != 0:
				t.Fatalf("violations: %s", msgs)
			case tc.says != "" && !strings.Contains(msgs, tc.says):
				t.Fatalf("violations %q do not say %q", msgs, tc.says)
			case rep.EarlyExpiries != tc.early:
				t.Fatalf("%d early expiries, want %d", rep.EarlyExpiries, tc.early)
			}
		})
	}
}

// TestRunRefusesBadConfig: a bad Config is refused before any process
// starts, naming the field.
func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := Config{Dir: dir, Events: 1, Command: testCommand}
	cases := []struct {
		name string
		mod  func(*Config)
		says string
	}{
		{"no events", func(c *Config) { c.Events = 0 }, "Events 0"},
		{"no command", func(c *Config) { c.Command = nil }, "Config.Command"},
		{"negative workers", func(c *Config) { c.Workers = -1 }, "Workers -1"},
		{"unknown fault", func(c *Config) { c.Faults = []string{FaultKill, "meteor"} }, `Faults[1]: unknown fault kind "meteor"`},
		{"no directory", func(c *Config) { c.Dir = dir + "/missing" }, "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tc.mod(&cfg)
			if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Run: %v, want an error saying %q", err, tc.says)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused run left %d files in its directory", len(entries))
	}
}
