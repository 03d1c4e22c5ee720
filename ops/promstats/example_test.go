package promstats_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/promstats"
	"github.com/keeppeek/statestore/schema"
)

// Register the collector for whatever Open returned, serve /metrics, and
// scrape it over a real HTTP round trip on 127.0.0.1.
func ExampleForOpen() {
	dir, err := os.MkdirTemp("", "promstats-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	s, err := statestore.Open(statestore.Options{Dir: dir})
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.ForOpen(s, err))
	if err != nil {
		fmt.Println("state store not open:", err)
		return
	}
	defer s.Close()

	p := statestore.Principal{ID: "alice"}
	for _, x := range []statestore.Expect{statestore.CreateOnly, statestore.CreateOnly} {
		s.Put(context.Background(), p, statestore.PutRequest{Namespace: "user/alice", Key: "prefs", Schema: schema.MediaIntentV1,
			Document: []byte(`{"role":"subscribe","desired":true,"source_id":"cam-1","media_kind":"video"}`), Expect: x})
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, want := range []string{
			"keeppeek_state_store_open ",
			"keeppeek_state_store_writes_committed_total ",
			`keeppeek_state_store_writes_refused_total{code="CONFLICT"} `,
			"keeppeek_state_store_commit_duration_seconds_count ",
			"keeppeek_state_store_entries ",
		} {
			if strings.HasPrefix(line, want) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// keeppeek_state_store_commit_duration_seconds_count 1
	// keeppeek_state_store_entries 1
	// keeppeek_state_store_open 1
	// keeppeek_state_store_writes_committed_total 1
	// keeppeek_state_store_writes_refused_total{code="CONFLICT"} 1
}
