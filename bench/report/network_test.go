package report

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/bench/harness"
)

// networkRun is a network_serial and network_concurrent run: ws_cas at
// wsP50 µs, the other serial sides at fixed p50s, and the concurrent sides
// at fixed throughputs, each with two rounds 10% apart.
func networkRun(wsP50 float64) []harness.Result {
	type side struct {
		name string
		fig  float64
	}
	var out []harness.Result
	for _, s := range []side{{durableCAS, 200}, {wireCAS, 220}, {pipeCASFloor, 210}, {tcpCASFloor, 250}, {wsCAS, wsP50}, {etcdGRPCCAS, 600}, {natsKVCAS, 500}, {etcdCAS, 400}} {
		r := withRounds(serialResult(s.name, s.fig, 9000))
		r.Name = Network(s.name)
		r.Quantiles = append(r.Quantiles, harness.Quantile{P: 99, Us: 4 * s.fig})
		out = append(out, r)
	}
	for _, s := range []side{{durableCASConcurrent, 40000}, {wsCASConcurrent, 10000}, {etcdGRPCCASConcurrent, 4000}, {natsKVCASConcurrent, 4500}, {etcdCASConcurrent, 8000}} {
		r := withRounds(concurrentResult(s.name, TargetWriters, s.fig))
		r.Name = Network(s.name)
		out = append(out, r)
	}
	return out
}

// fanoutRows are network_fanout's three rows at p50s ws, etcd and
// nats µs, each max twice its p50.
func fanoutRows(ws, etcd, nats float64) []harness.Result {
	var out []harness.Result
	for _, s := range []struct {
		name string
		p50  float64
	}{{wsFanout, ws}, {etcdWatchFanout, etcd}, {natsKVWatchFanout, nats}} {
		out = append(out, harness.Result{Name: Network(s.name), Writers: 1, P50us: s.p50, P95us: 1.5 * s.p50, MaxUs: 2 * s.p50})
	}
	return out
}

func networkText(t *testing.T, results []harness.Result) string {
	t.Helper()
	var b strings.Builder
	if err := WriteNetworkPath(&b, results); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestNetworkPath: the section gives every side's figures and the ratios
// of the p50s (and of the concurrent throughputs), with their spread over
// the rounds.
func TestNetworkPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		results []harness.Result
		want    []string
		not     []string
	}{
		{"complete", networkRun(300), []string{
			"## The network path",
			"| ws_cas | the typed Go client (client/) over WebSocket on loopback TCP | 300 | 4650 | 1200 | 9000 | 3333 | 1.00× |",
			"| etcd_grpc_cas | embedded etcd through client/v3 over gRPC on loopback TCP | 600 | 4800 | 2400 | 9000 | 1667 | 0.50× |",
			"ws_cas ÷ durable_cas (the whole network path): 1.50× (300 / 200 µs); 2 rounds: 1.50–1.50×, median 1.50×",
			"ws_cas ÷ tcp_cas_floor (the layers over the socket): 1.20× (300 / 250 µs)",
			"the difference, 50 µs, is WebSocket, protobuf and the dispatcher",
			"tcp_cas_floor ÷ durable_cas (the socket alone): 1.25×",
			"ws_cas ÷ etcd_grpc_cas (against the network peer): 0.50×",
			"etcd_grpc_cas ÷ etcd_cas (etcd's own network path): 1.50×",
			"| ws_cas_concurrent | client/ over WebSocket, one connection per owner | 127 | 1000 | - | 10000 | 1.00× |",
			"ws_cas_concurrent ÷ durable_cas_concurrent, ops/s: 0.25× (10000 / 40000 ops/s)",
			"ws_cas_concurrent ÷ etcd_grpc_cas_concurrent, ops/s: 2.50×",
			"| nats_kv_cas | embedded NATS JetStream KV through nats.go on loopback TCP | 500 |",
			"ws_cas ÷ nats_kv_cas (against the other network peer): 0.60× (300 / 500 µs)",
			"ws_cas_concurrent ÷ nats_kv_cas_concurrent, ops/s: 2.22×",
			"NATS runs JetStream with SyncAlways",
			"- ws_cas p50 ≤ 0.7× etcd_grpc_cas p50: **met**, 0.50×",
			"- ws_cas p50 ≤ 0.7× nats_kv_cas p50: **met**, 0.60×",
			"- ws_cas_concurrent ≥ 2× the better of etcd_grpc_cas_concurrent and nats_kv_cas_concurrent at 127 writers (nats_kv_cas_concurrent): **met**, 2.22× (10000 / 4500 ops/s",
			"was not run",
			"`network_fanout` was not run: the watch fan-out's ratios are not measured.",
			"- ws_fanout p50 < etcd_watch_fanout p50: **not measured**, missing ws_fanout.net or etcd_watch_fanout.net",
		}, []string{"not measured (missing"}},
		{"fan-out ahead of etcd, behind NATS", append(networkRun(300), fanoutRows(3000, 4000, 2000)...), []string{
			"| ws_fanout | the store: WatchState watches over WebSocket (wstransport, dispatcher) | 3000 | 4500 | 6000 | 1.00× | 1.00× |",
			"| etcd_watch_fanout | embedded etcd: client/v3 watches over gRPC | 4000 | 6000 | 8000 | 0.75× | 0.75× |",
			"| nats_kv_watch_fanout | embedded NATS JetStream KV: nats.go key watchers | 2000 | 3000 | 4000 | 1.50× | 1.50× |",
			"- ws_fanout p50 < etcd_watch_fanout p50: **met**, 0.75× (3000 / 4000 µs, pooled",
			"- ws_fanout max < etcd_watch_fanout max: **met**, 0.75× (6000 / 8000 µs, pooled",
			"- ws_fanout p50 < nats_kv_watch_fanout p50: **MISSED**, 1.50×",
			"- ws_fanout max < nats_kv_watch_fanout max: **MISSED**, 1.50×",
			"- ws_fanout ÷ etcd_watch_fanout, p50: 0.75× (3000 / 4000 µs); max: 0.75× (6000 / 8000 µs)",
		}, []string{"`network_fanout` was not run"}},
		{"fan-out only", fanoutRows(3000, 4000, 5000), []string{"| ws_fanout |", "- ws_fanout max < nats_kv_watch_fanout max: **met**, 0.60×",
			"`network_serial` was not run", "- ws_cas p50 ≤ 0.7× etcd_grpc_cas p50: **not measured**"}, []string{"Not measured in this run"}},
		{"etcd missing", without(networkRun(300), Network(etcdGRPCCAS)), []string{
			"ws_cas ÷ durable_cas (the whole network path): 1.50×",
			"ws_cas ÷ etcd_grpc_cas (against the network peer): not measured (missing ws_cas.net or etcd_grpc_cas.net)",
			"| etcd_grpc_cas | embedded etcd through client/v3 over gRPC on loopback TCP | - | - | - | - | - | - |",
		}, nil},
		{"serial only", networkRun(300)[:8], []string{"ws_cas ÷ durable_cas (the whole network path): 1.50×",
			"`network_concurrent` was not run: its ratios are not measured."}, []string{"| ws_cas_concurrent |", "network_serial` was not run"}},
		{"concurrent only", networkRun(300)[8:], []string{"ws_cas_concurrent ÷ durable_cas_concurrent, ops/s: 0.25×",
			"`network_serial` was not run: its ratios are not measured."}, []string{"| ws_cas |", "network_concurrent` was not run"}},
		{"nothing measured", nil, []string{"## The network path", "Not measured in this run"}, []string{"ws_cas ÷"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := networkText(t, tc.results)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("section lacks %q:\n%s", w, text)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(text, n) {
					t.Errorf("section has %q:\n%s", n, text)
				}
			}
		})
	}
}

// TestNetworkPathReadsOnlyItsRows: rows measured one after another, or in
// targets_serial's rounds, never give the network path's ratios.
func TestNetworkPathReadsOnlyItsRows(t *testing.T) {
	t.Parallel()
	var results []harness.Result
	for _, r := range networkRun(300) {
		name := strings.TrimSuffix(r.Name, networkSuffix)
		absolute := r
		absolute.Name = name
		results = append(results, absolute, withRounds(absolute))
	}
	if NetworkMeasured(results) {
		t.Fatal("absolute and targets rows taken for the network path's")
	}
	if text := networkText(t, results); strings.Contains(text, "ws_cas ÷") || !strings.Contains(text, "Not measured in this run") {
		t.Fatalf("section from other rows:\n%s", text)
	}
	// One network row (durable_cas's): the others are not filled in from
	// the absolute rows, so no ratio is measured.
	results = append(results, networkRun(300)[0])
	text := networkText(t, results)
	if got := strings.Count(text, "not measured (missing"); got != 6 || !strings.Contains(text, "`network_concurrent` was not run") {
		t.Fatalf("%d serial ratios not measured with one network row, want all 6, and no concurrent ones:\n%s", got, text)
	}
}

// TestNetworkFanoutReadsOnlyItsRows: fan-out rows measured on their own
// (ws_fanout, not ws_fanout.net) never give the fan-out's ratios.
func TestNetworkFanoutReadsOnlyItsRows(t *testing.T) {
	t.Parallel()
	var results []harness.Result
	for _, r := range fanoutRows(3000, 4000, 2000) {
		r.Name = strings.TrimSuffix(r.Name, networkSuffix)
		results = append(results, r)
	}
	results = append(results, networkRun(300)...)
	text := networkText(t, results)
	if !strings.Contains(text, "`network_fanout` was not run") || strings.Contains(text, "| ws_fanout |") ||
		!strings.Contains(text, "- ws_fanout p50 < etcd_watch_fanout p50: **not measured**") {
		t.Fatalf("fan-out judged on rows measured alone:\n%s", text)
	}
}

// without is results less the row named name.
func without(results []harness.Result, name string) []harness.Result {
	var out []harness.Result
	for _, r := range results {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}
