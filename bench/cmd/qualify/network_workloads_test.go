package main

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

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
		{nameNetworkSerial, net(1, nameDurableCAS, nameWireCAS, namePipeCASFloor, nameTCPCASFloor, nameWSCAS, "etcd_grpc_cas", "etcd_cas")},
		{nameNetworkConcurrent, net(report.TargetWriters, nameDurableCASConcurrent, nameWSCASConcurrent, "etcd_grpc_cas_concurrent", "etcd_cas_concurrent")},
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
