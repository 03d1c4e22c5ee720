package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/keeppeek/statestore/bench/harness"
)

// The network path's workloads, as qualify names them.
const (
	wsCAS                 = "ws_cas"
	wsCASConcurrent       = "ws_cas_concurrent"
	tcpCASFloor           = "tcp_cas_floor"
	etcdCAS               = "etcd_cas"
	etcdGRPCCAS           = "etcd_grpc_cas"
	etcdCASConcurrent     = "etcd_cas_concurrent"
	etcdGRPCCASConcurrent = "etcd_grpc_cas_concurrent"
	natsKVCAS             = "nats_kv_cas"
	natsKVCASConcurrent   = "nats_kv_cas_concurrent"
	// The watch fan-out over the network: 1,024 watchers of one key,
	// each row's samples from a write's send to the last watcher holding
	// its update.
	wsFanout          = "ws_fanout"
	etcdWatchFanout   = "etcd_watch_fanout"
	natsKVWatchFanout = "nats_kv_watch_fanout"
	// networkSuffix marks the rows of qualify's network_serial and
	// network_concurrent; it differs from alternatingSuffix because
	// durable_cas is a side of both targets_serial and network_serial.
	networkSuffix = ".net"
)

// Network is the row name of workload name measured in qualify's
// network_serial or network_concurrent, in rounds alternating with the
// other sides of the network path. The network path's ratios read only
// these rows.
func Network(name string) string { return name + networkSuffix }

// The network path's sides, in table order.
// networkSide is a side of the network path's tables and what it is.
type networkSide struct{ name, what string }

var (
	networkSerial = []networkSide{
		{durableCAS, "the store called in process"},
		{wireCAS, "the wire protocol (dispatcher and framing) over net.Pipe"},
		{pipeCASFloor, "fixed-size request and answer over net.Pipe, no protocol"},
		{tcpCASFloor, "fixed-size request and answer over loopback TCP, no protocol: the floor of ws_cas"},
		{wsCAS, "the typed Go client (client/) over WebSocket on loopback TCP"},
		{etcdGRPCCAS, "embedded etcd through client/v3 over gRPC on loopback TCP"},
		{natsKVCAS, "embedded NATS JetStream KV through nats.go on loopback TCP"},
		{etcdCAS, "the same etcd member through its in-process client"},
	}
	networkConcurrent = []networkSide{
		{durableCASConcurrent, "the store called in process"},
		{wsCASConcurrent, "client/ over WebSocket, one connection per owner"},
		{etcdGRPCCASConcurrent, "etcd over gRPC, one connection per writer"},
		{natsKVCASConcurrent, "NATS JetStream KV, one connection per writer"},
		{etcdCASConcurrent, "etcd through its in-process client"},
	}
	networkFanout = []networkSide{
		{wsFanout, "the store: WatchState watches over WebSocket (wstransport, dispatcher)"},
		{etcdWatchFanout, "embedded etcd: client/v3 watches over gRPC"},
		{natsKVWatchFanout, "embedded NATS JetStream KV: nats.go key watchers"},
	}
)

// The network path's targets (issue 30): ws_cas's p50 against each
// network peer's, ws_cas_concurrent against the better of the two at 127
// writers.
const (
	wsCASPeerBound       = 0.7
	wsCASConcurrentBound = 2.0
)

// networkRow returns the pooled row of name's side in the network
// workloads, under name (a zero row when the run did not measure it).
func networkRow(results []harness.Result, name string) harness.Result {
	r, _ := find(results, Network(name), 0)
	r.Name = name
	return r
}

// NetworkMeasured reports whether results hold any row of the network
// path (qualify prints the section then).
func NetworkMeasured(results []harness.Result) bool {
	for _, r := range results {
		if strings.HasSuffix(r.Name, networkSuffix) {
			return true
		}
	}
	return fanoutMeasured(results)
}

// fanoutMeasured reports whether results hold a row of qualify's
// network_fanout.
func fanoutMeasured(results []harness.Result) bool {
	for _, s := range networkFanout {
		if _, ok := find(results, Network(s.name), 0); ok {
			return true
		}
	}
	return false
}

// quantile returns r's figure at percentile p, or 0 when r has none.
func quantile(r harness.Result, p float64) float64 {
	for _, q := range r.Quantiles {
		if q.P == p {
			return q.Us
		}
	}
	return 0
}

// networkRatio is a's figure over b's as picked by fig, with the figures
// and the spread over single rounds, or "not measured" naming the rows
// missing.
func networkRatio(a, b harness.Result, fig func(harness.RoundStat) float64, unit string) string {
	x, y := fig(harness.RoundStat{P50us: a.P50us, MaxUs: a.MaxUs, OpsPerS: a.OpsPerS}), fig(harness.RoundStat{P50us: b.P50us, MaxUs: b.MaxUs, OpsPerS: b.OpsPerS})
	if x <= 0 || y <= 0 {
		return fmt.Sprintf("not measured (missing %s or %s)", Network(a.Name), Network(b.Name))
	}
	out := fmt.Sprintf("%.2f× (%.0f / %.0f %s)", x/y, x, y, unit)
	if rs := harness.RoundRatios(a, b, fig); len(rs) > 0 {
		out += fmt.Sprintf("; %d rounds: %.2f–%.2f×, median %.2f×", len(rs), rs[0], rs[len(rs)-1], (rs[(len(rs)-1)/2]+rs[len(rs)/2])/2)
	}
	return out
}

// WriteNetworkPath writes the section "The network path": the rows of
// qualify's network_serial and network_concurrent and their ratios, all
// from results; a side the run did not measure is said so, never guessed.
func WriteNetworkPath(w io.Writer, results []harness.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## The network path\n\n")
	if !NetworkMeasured(results) {
		fmt.Fprintf(&b, "Not measured in this run: qualify's `network_serial` and `network_concurrent` measure it.\n\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "What a remote user pays: the same compare-and-set of the 2,193-byte document, each from its call to its durable answer, run by `%s` in alternating rounds of 127 operations in one process (the `*%s` rows), the order rotated every round, so the ratios are the workloads' own and not the disk's drift. ", "network_serial", networkSuffix)
	fmt.Fprintf(&b, "Every side has a store, member or server of its own. ")
	fmt.Fprintf(&b, "Every store syncs an acknowledged write to disk before it answers, so their durability is equal: the journal fdatasyncs each commit; etcd fsyncs its WAL each commit (embed's default, UnsafeNoFsync false); NATS runs JetStream with SyncAlways (the server configuration's `sync: always`; its default syncs every two minutes), so its file store fsyncs the message block after every write and before the publish is acknowledged, and the bucket's single replica leaves nothing to relax that to a sync on flush. ")
	fmt.Fprintf(&b, "The peers are reached as a remote user reaches them: etcd through go.etcd.io/etcd/client/v3 over gRPC, NATS through github.com/nats-io/nats.go (a JetStream KV bucket on file storage, one value per key, the compare-and-set `kv.Update(key, value, lastRevision)`), both over loopback TCP to a server embedded in the same process. ")
	fmt.Fprintf(&b, "`ws_cas` runs a real http.Server on 127.0.0.1 serving wstransport.Handler over the dispatcher, and one client.Client per owner, each with its own connection and bearer token (a principal table); `ws_cas` minus `tcp_cas_floor` is what WebSocket, protobuf and the dispatcher cost over a bare request/answer on the same socket.\n\n")
	if anyNetworkRow(results, networkSerial) {
		writeNetworkSerial(&b, results)
	} else {
		fmt.Fprintf(&b, "`network_serial` was not run: its ratios are not measured.\n\n")
	}
	if anyNetworkRow(results, networkConcurrent) {
		writeNetworkConcurrent(&b, results)
	} else {
		fmt.Fprintf(&b, "`network_concurrent` was not run: its ratios are not measured.\n\n")
	}
	writeNetworkFanout(&b, results)
	fmt.Fprintf(&b, "Targets of the network path (issue 30), on the rows above:\n\n")
	for _, t := range NetworkTargets(results) {
		fmt.Fprintf(&b, "- %s: **%s**, %s\n", t.Name, t.Verdict(), t.Measured)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// anyNetworkRow reports whether results hold a network row of one of
// sides.
func anyNetworkRow(results []harness.Result, sides []networkSide) bool {
	for _, s := range sides {
		if _, ok := find(results, Network(s.name), 0); ok {
			return true
		}
	}
	return false
}

// writeNetworkSerial writes network_serial's table and ratios.
func writeNetworkSerial(b *strings.Builder, results []harness.Result) {
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	ws := networkRow(results, wsCAS)
	fmt.Fprintf(b, "| workload | | p50 µs | p95 µs | p99 µs | max µs | ops/s | ws_cas p50 ÷ its p50 |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range networkSerial {
		r := networkRow(results, s.name)
		ratio := "-"
		if r.P50us > 0 && ws.P50us > 0 {
			ratio = fmt.Sprintf("%.2f×", ws.P50us/r.P50us)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.what, cell(r.P50us), cell(r.P95us), cell(quantile(r, 99)), cell(r.MaxUs), cell(r.OpsPerS), ratio)
	}
	d, floor, etcd, etcdLocal := networkRow(results, durableCAS), networkRow(results, tcpCASFloor), networkRow(results, etcdGRPCCAS), networkRow(results, etcdCAS)
	fmt.Fprintf(b, "\nRatios of the p50s, pooled over the rounds, and their spread over single rounds:\n\n")
	fmt.Fprintf(b, "- ws_cas ÷ durable_cas (the whole network path): %s\n", networkRatio(ws, d, p50, "µs"))
	fmt.Fprintf(b, "- ws_cas ÷ tcp_cas_floor (the layers over the socket): %s", networkRatio(ws, floor, p50, "µs"))
	if ws.P50us > 0 && floor.P50us > 0 {
		fmt.Fprintf(b, "; the difference, %.0f µs, is WebSocket, protobuf and the dispatcher", ws.P50us-floor.P50us)
	}
	fmt.Fprintf(b, "\n- tcp_cas_floor ÷ durable_cas (the socket alone): %s\n", networkRatio(floor, d, p50, "µs"))
	fmt.Fprintf(b, "- ws_cas ÷ etcd_grpc_cas (against the network peer): %s\n", networkRatio(ws, etcd, p50, "µs"))
	fmt.Fprintf(b, "- ws_cas ÷ nats_kv_cas (against the other network peer): %s\n", networkRatio(ws, networkRow(results, natsKVCAS), p50, "µs"))
	fmt.Fprintf(b, "- etcd_grpc_cas ÷ etcd_cas (etcd's own network path): %s\n\n", networkRatio(etcd, etcdLocal, p50, "µs"))
}

// writeNetworkConcurrent writes network_concurrent's table and ratios.
func writeNetworkConcurrent(b *strings.Builder, results []harness.Result) {
	ops := func(r harness.RoundStat) float64 { return r.OpsPerS }
	wsc := networkRow(results, wsCASConcurrent)
	fmt.Fprintf(b, "`%s` runs bursts of %d writers the same way (writer w owns the owners k with k mod %d = w):\n\n", "network_concurrent", TargetWriters, TargetWriters)
	fmt.Fprintf(b, "| workload | | writers | p50 µs | p95 µs | ops/s | ws_cas_concurrent ops/s ÷ its ops/s |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range networkConcurrent {
		r := networkRow(results, s.name)
		ratio := "-"
		if r.OpsPerS > 0 && wsc.OpsPerS > 0 {
			ratio = fmt.Sprintf("%.2f×", wsc.OpsPerS/r.OpsPerS)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.what, cell(float64(r.Writers)), cell(r.P50us), cell(r.P95us), cell(r.OpsPerS), ratio)
	}
	fmt.Fprintf(b, "\n- ws_cas_concurrent ÷ durable_cas_concurrent, ops/s: %s\n", networkRatio(wsc, networkRow(results, durableCASConcurrent), ops, "ops/s"))
	fmt.Fprintf(b, "- ws_cas_concurrent ÷ etcd_grpc_cas_concurrent, ops/s: %s\n", networkRatio(wsc, networkRow(results, etcdGRPCCASConcurrent), ops, "ops/s"))
	fmt.Fprintf(b, "- ws_cas_concurrent ÷ nats_kv_cas_concurrent, ops/s: %s\n\n", networkRatio(wsc, networkRow(results, natsKVCASConcurrent), ops, "ops/s"))
}

// writeNetworkFanout writes network_fanout's table and ratios.
func writeNetworkFanout(b *strings.Builder, results []harness.Result) {
	if !fanoutMeasured(results) {
		fmt.Fprintf(b, "`network_fanout` was not run: the watch fan-out's ratios are not measured.\n\n")
		return
	}
	fmt.Fprintf(b, "The watch fan-out over the network: 1,024 watchers of one key spread over 127 client connections (watcher w on connection w mod 127) and a writer on a connection of its own, compare-and-setting the 2,193-byte document 30 times; each store syncs every write as above. ")
	fmt.Fprintf(b, "One sample per write, from its send to the moment the last of the 1,024 watchers holds its update (the receipt that completes the count); the next write waits for that and for the writer's answer. Every watcher must have received exactly the committed revisions, in commit order, or the row fails. ")
	fmt.Fprintf(b, "The store's watches acknowledge nothing (30 updates stay below the watch's bound of 32), as neither peer's watchers acknowledge. `network_fanout` holds the three at once and alternates their writes, one per store a round, the order rotated every round:\n\n")
	ws := networkRow(results, wsFanout)
	fmt.Fprintf(b, "| workload | | p50 µs | p95 µs | max µs | ws_fanout p50 ÷ its p50 | ws_fanout max ÷ its max |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range networkFanout {
		r := networkRow(results, s.name)
		p50, mx := "-", "-"
		if r.P50us > 0 && ws.P50us > 0 {
			p50 = fmt.Sprintf("%.2f×", ws.P50us/r.P50us)
		}
		if r.MaxUs > 0 && ws.MaxUs > 0 {
			mx = fmt.Sprintf("%.2f×", ws.MaxUs/r.MaxUs)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.what, cell(r.P50us), cell(r.P95us), cell(r.MaxUs), p50, mx)
	}
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	maxLat := func(r harness.RoundStat) float64 { return r.MaxUs }
	fmt.Fprintf(b, "\n")
	for _, peer := range []string{etcdWatchFanout, natsKVWatchFanout} {
		r := networkRow(results, peer)
		fmt.Fprintf(b, "- ws_fanout ÷ %s, p50: %s; max: %s\n", peer, networkRatio(ws, r, p50, "µs"), networkRatio(noRounds(ws), noRounds(r), maxLat, "µs"))
	}
	b.WriteString("\n")
}

// NetworkTargets judges the network path's targets: ws_cas p50 at most
// 0.7× etcd_grpc_cas's and 0.7× nats_kv_cas's, and ws_cas_concurrent at
// 127 writers at least 2× the better peer, on network_serial's and
// network_concurrent's alternating rows; ws_fanout ahead of both fan-out
// peers at p50 and at max, on network_fanout's. A side the run did not measure leaves its
// target not measured.
func NetworkTargets(results []harness.Result) []Target {
	p50 := func(r harness.RoundStat) float64 { return r.P50us }
	maxLat := func(r harness.RoundStat) float64 { return r.MaxUs }
	ops := func(r harness.RoundStat) float64 { return r.OpsPerS }
	ws := networkRow(results, wsCAS)
	var out []Target
	for _, peer := range []string{etcdGRPCCAS, natsKVCAS} {
		out = append(out, networkTarget(fmt.Sprintf("ws_cas p50 ≤ %.1f× %s p50", wsCASPeerBound, peer), ws, networkRow(results, peer), p50, "µs", wsCASPeerBound, true))
	}
	best := networkRow(results, etcdGRPCCASConcurrent)
	if n := networkRow(results, natsKVCASConcurrent); n.OpsPerS > best.OpsPerS || best.OpsPerS == 0 {
		best = n
	}
	out = append(out, networkTarget(fmt.Sprintf("ws_cas_concurrent ≥ %.0f× the better of etcd_grpc_cas_concurrent and nats_kv_cas_concurrent at %d writers (%s)", wsCASConcurrentBound, TargetWriters, best.Name),
		networkRow(results, wsCASConcurrent), best, ops, "ops/s", wsCASConcurrentBound, false))
	fan := func(name string) harness.Result { return networkRow(results, name) }
	for _, peer := range []string{etcdWatchFanout, natsKVWatchFanout} {
		out = append(out, networkTarget("ws_fanout p50 < "+peer+" p50", fan(wsFanout), fan(peer), p50, "µs", 1, true))
		out = append(out, networkTarget("ws_fanout max < "+peer+" max", noRounds(fan(wsFanout)), noRounds(fan(peer)), maxLat, "µs", 1, true))
	}
	return out
}

// networkTarget is ratioTarget on the network path's rows, naming the
// rows it misses as they are named in results.
func networkTarget(name string, a, b harness.Result, fig func(harness.RoundStat) float64, unit string, bound float64, atMost bool) Target {
	t := ratioTarget(name, a, b, fig, unit, bound, atMost)
	if t.Ratio == 0 {
		t.Measured = "missing " + Network(a.Name) + " or " + Network(b.Name)
	}
	return t
}

// noRounds is r without its rounds: a fan-out round is one write, so its
// per-round ratio of maxima is the per-write ratio the p50 line already
// spreads, not a spread of maxima.
func noRounds(r harness.Result) harness.Result {
	r.Rounds = nil
	return r
}
