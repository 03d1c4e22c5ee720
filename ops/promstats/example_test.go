package promstats_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/promstats"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
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

// The invariants' tests live here, beside the examples, while
// collector_test.go's fault hooks are being converted.

// TestCollectReadsStatsOncePerScrape scrapes one collector from many
// goroutines at once: each scrape calls the source exactly once, and the
// race detector sees the collector keep nothing between scrapes.
func TestCollectReadsStatsOncePerScrape(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	var calls atomic.Int64
	reg := registry(t, promstats.New(func() statestore.Stats {
		calls.Add(1)
		return s.Stats()
	}))
	const scrapes = 8
	var wg sync.WaitGroup
	for range scrapes {
		wg.Go(func() {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != scrapes {
		t.Fatalf("%d scrapes called the source %d times, want once each", scrapes, n)
	}
}

// TestEveryMetricPresentFromTheStart scrapes a store nothing happened to:
// every family is there, and the labelled counters carry every label
// value, so rate() and alerts work from the first scrape.
func TestEveryMetricPresentFromTheStart(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	reg := registry(t, promstats.ForStore(s))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, mf := range mfs {
		families[mf.GetName()] = true
	}
	ch := make(chan *prometheus.Desc, 64)
	promstats.ForStore(s).Describe(ch)
	close(ch)
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		n := name.FindStringSubmatch(d.String())[1]
		if !families[n] && n != p+"open_failed_info" {
			t.Errorf("%s is missing from a fresh store's scrape", n)
		}
	}
	got := scrape(t, reg)
	for code := statestore.NotFound; code <= statestore.Unavailable; code++ {
		for _, m := range []string{"writes_refused_total", "watch_requests_refused_total"} {
			if _, ok := got[fmt.Sprintf("%s%s{code=%q}", p, m, code)]; !ok {
				t.Errorf("%s has no series for code %s", m, code)
			}
		}
	}
	reasons := []string{"UNWATCH", "DISCONNECT"}
	for _, r := range watch.Reasons {
		reasons = append(reasons, r.String())
	}
	for _, r := range reasons {
		if _, ok := got[fmt.Sprintf("%swatch_closures_total{reason=%q}", p, r)]; !ok {
			t.Errorf("watch_closures_total has no series for reason %s", r)
		}
	}
}
