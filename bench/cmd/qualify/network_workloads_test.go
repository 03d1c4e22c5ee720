package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// row is a result's identity: its name and writer count.
type row struct {
	name    string
	writers int
}

func (r row) String() string { return fmt.Sprintf("%s/%d", r.name, r.writers) }

// TestNetworkWorkloads runs each workload of the network path, by its
// --only name, for a handful of operations, and checks that it reports
// exactly its rows, in order, each with latencies and a throughput.
func TestNetworkWorkloads(t *testing.T) {
	t.Parallel()
	writers := []int{1, 3}
	// net is the rows of an alternating network workload.
	net := func(writers int, names ...string) []row {
		var out []row
		for _, n := range names {
			out = append(out, row{report.Network(n), writers})
		}
		return out
	}
	tests := []struct {
		workload string
		want     []row
	}{
		{nameWSCAS, []row{{nameWSCAS, 1}}},
		{nameTCPCASFloor, []row{{nameTCPCASFloor, 1}}},
		{nameWSCASConcurrent, []row{{nameWSCASConcurrent, 1}, {nameWSCASConcurrent, 3}}},
		{"etcd_grpc_cas", []row{{"etcd_grpc_cas", 1}}},
		{"etcd_grpc_cas_concurrent", []row{{"etcd_grpc_cas_concurrent", 1}, {"etcd_grpc_cas_concurrent", 3}}},
		{"nats_kv_cas", []row{{"nats_kv_cas", 1}}},
		{"nats_kv_cas_concurrent", []row{{"nats_kv_cas_concurrent", 1}, {"nats_kv_cas_concurrent", 3}}},
		{nameNetworkSerial, net(1, nameDurableCAS, nameWireCAS, namePipeCASFloor, nameTCPCASFloor, nameWSCAS, "etcd_grpc_cas", "nats_kv_cas", "etcd_cas")},
		{nameNetworkConcurrent, net(report.TargetWriters, nameDurableCASConcurrent, nameWSCASConcurrent, "etcd_grpc_cas_concurrent", "nats_kv_cas_concurrent", "etcd_cas_concurrent")},
	}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			t.Parallel()
			selected, err := selectWorkloads([]string{tc.workload})
			if err != nil {
				t.Fatal(err)
			}
			// 5 serial operations; the alternating workloads run one
			// round of 127 (one per owner) or 8 bursts of one each.
			env := &Env{Root: t.TempDir(), Ops: 5, Writers: writers, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload}
			got, err := selected[0].run(env)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d rows %v, want %v", len(got), got, tc.want)
			}
			for i, r := range got {
				if id := (row{r.Name, r.Writers}); id != tc.want[i] {
					t.Errorf("row %d is %v, want %v", i, id, tc.want[i])
				}
				if r.P50us <= 0 || r.P95us < r.P50us || r.MaxUs < r.P95us || r.OpsPerS <= 0 || len(r.Quantiles) == 0 {
					t.Errorf("%s: figures p50 %v p95 %v max %v ops/s %v, %d quantiles", r.Name, r.P50us, r.P95us, r.MaxUs, r.OpsPerS, len(r.Quantiles))
				}
			}
		})
	}
}

// TestFanoutWorkloads runs the three network fan-outs small (16 watchers
// over 4 connections, 3 writes): each must deliver every write to every
// watcher in commit order (fanoutSide.verify checks) and report one row of the
// send-to-last-watcher latencies, its p50 at most its max.
func TestFanoutWorkloads(t *testing.T) {
	t.Parallel()
	small := fanoutSize{watchers: 16, conns: 4, rounds: 3}
	tests := []struct {
		name string
		run  func(*Env, fanoutSize) ([]harness.Result, error)
	}{
		{nameWSFanout, wsFanout},
		{"etcd_watch_fanout", etcdWatchFanout},
		{"nats_kv_watch_fanout", natsWatchFanout},
	}
	t.Run(nameNetworkFanout, func(t *testing.T) {
		t.Parallel()
		env := &Env{Root: t.TempDir(), Ops: 5, Writers: []int{1}, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload}
		got, err := networkFanout(env, small)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{report.Network(nameWSFanout), report.Network("etcd_watch_fanout"), report.Network("nats_kv_watch_fanout")}
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %v", len(got), want)
		}
		for i, r := range got {
			if r.Name != want[i] || len(r.Rounds) != small.rounds || r.P50us <= 0 || r.MaxUs < r.P50us {
				t.Fatalf("row %d: %s with %d rounds, p50 %v max %v; want %s with %d rounds", i, r.Name, len(r.Rounds), r.P50us, r.MaxUs, want[i], small.rounds)
			}
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := selectWorkloads([]string{tc.name}); err != nil {
				t.Fatal(err)
			}
			env := &Env{Root: t.TempDir(), Ops: 5, Writers: []int{1}, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload}
			got, err := tc.run(env, small)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != tc.name || got[0].Writers != 1 {
				t.Fatalf("rows %+v, want one %s row", got, tc.name)
			}
			if r := got[0]; r.P50us <= 0 || r.MaxUs < r.P50us || len(r.Quantiles) == 0 {
				t.Fatalf("%s: p50 %v max %v, %d quantiles", r.Name, r.P50us, r.MaxUs, len(r.Quantiles))
			}
		})
	}
}

// TestFanoutRunRejectsAMissedOrReorderedUpdate: the check that makes the
// fan-out rows mean "every watcher held every update": a watcher that
// missed a write, or got two out of commit order, fails the run.
func TestFanoutRunRejectsAMissedOrReorderedUpdate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		deliver func(p *fanoutProbe, rev uint64)
		want    string
	}{
		{"watcher 0 gets the second write twice, watcher 1 not at all", func(p *fanoutProbe, rev uint64) {
			p.got(0, rev)
			if rev == 2 {
				p.got(0, rev) // the count completes with watcher 1 short
			} else {
				p.got(1, rev)
			}
		}, "watcher 0 received 3 updates, want 2"},
		{"watcher 0 gets a stale revision", func(p *fanoutProbe, rev uint64) {
			p.got(0, rev-rev/2) // 1, then 1 again
			p.got(1, rev)
		}, "watcher 0: update 2 has revision 1, want 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newFanoutProbe(fanoutSize{watchers: 2, conns: 1, rounds: 2})
			var rev uint64
			side := newFanoutSide("test", "", p, func() (uint64, error) {
				rev++
				tc.deliver(p, rev)
				return rev, nil
			})
			err := fanoutAlternate(harness.Runner{Ceiling: time.Minute}, []*fanoutSide{side})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fanoutAlternate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTokenTable: a bearer token runs as its own principal; anything else
// is refused before the upgrade.
func TestTokenTable(t *testing.T) {
	t.Parallel()
	table := tokenTable{"token-a": {ID: "a"}, "token-b": {ID: "b"}}
	tests := []struct {
		name   string
		header string
		want   statestore.Principal
		err    error
	}{
		{"a's token", "Bearer token-a", statestore.Principal{ID: "a"}, nil},
		{"b's token, scheme in any case", "bearer token-b", statestore.Principal{ID: "b"}, nil},
		{"unknown token", "Bearer token-c", statestore.Principal{}, wstransport.ErrBadToken},
		{"another scheme", "Basic token-a", statestore.Principal{}, wstransport.ErrNoToken},
		{"no header", "", statestore.Principal{}, wstransport.ErrNoToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			p, err := table.Authenticate(r)
			if !errors.Is(err, tc.err) || p != tc.want {
				t.Fatalf("Authenticate = %+v, %v; want %+v, %v", p, err, tc.want, tc.err)
			}
		})
	}
}

// TestInProcessFanoutsHoldTheirWatches: watch_fanout and wire_fanout run
// 1,024 watches of one principal, four times the per-principal quota's
// default; each must open them all and finish (they failed WATCH_LIMIT
// when the quota arrived).
func TestInProcessFanoutsHoldTheirWatches(t *testing.T) {
	t.Parallel()
	for _, name := range []string{nameWatchFanout, nameWireFanout, nameWireFanoutDecoded} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			selected, err := selectWorkloads([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			env := &Env{Root: t.TempDir(), Ops: 5, Writers: []int{1}, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload,
				Run: harness.Runner{Ceiling: time.Minute}}
			got, err := selected[0].run(env)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != name || got[0].P50us <= 0 {
				t.Fatalf("rows %+v, want one %s row with latencies", got, name)
			}
		})
	}
}

// TestInProcessFanoutRows: inprocess_fanout, at a small size, yields its
// three alternating rows, each watcher having received every revision in
// commit order (fanoutSide.verify); and the wire side's reader takes the
// watch and revision from a real update's frame.
func TestInProcessFanoutRows(t *testing.T) {
	t.Parallel()
	env := &Env{Root: t.TempDir(), Ops: 5, Writers: []int{1}, Budget: harness.Budget{OpsPerWriter: 2}, Payload: harness.DefaultPayload,
		Run: harness.Runner{Ceiling: time.Minute}}
	got, err := inProcessFanout(env, fanoutSize{watchers: 24, conns: 5, rounds: 4})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
		if r.P50us <= 0 || len(r.Rounds) != 4 {
			t.Fatalf("row %s: p50 %v, %d rounds; want latencies of 4 rounds", r.Name, r.P50us, len(r.Rounds))
		}
	}
	want := []string{report.Alternating(nameWatchFanout), report.Alternating(nameWireFanout), report.Alternating(namePipeFanoutFloor)}
	if !slices.Equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	frame, err := proto.Marshal(&pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{
		WatchId: "w17", WatchSequence: 3, Revision: 42, Entry: &pb.StateEntry{Document: []byte("{}")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if id, rev, ok := updateHeader(frame); !ok || string(id) != "w17" || rev != 42 {
		t.Fatalf("updateHeader = %q, %d, %v; want w17, 42, true", id, rev, ok)
	}
	closed, _ := proto.Marshal(&pb.ServerMessage{Message: &pb.ServerMessage_WatchClosed{WatchClosed: &pb.StateStoreWatchClosed{WatchId: "w1"}}})
	if _, _, ok := updateHeader(closed); ok {
		t.Fatal("updateHeader took a closure for an update")
	}
}
