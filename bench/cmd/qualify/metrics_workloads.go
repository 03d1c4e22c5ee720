package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/ops/promstats"
)

// Names of the metrics workload's rows.
const (
	nameDurableCASMetrics   = "durable_cas_metrics"
	nameDurableCASUnscraped = "durable_cas_unscraped"
)

// scrapeEvery is how often durable_cas_metrics scrapes: a Prometheus
// server scrapes every 15 s or so, this is 150 times as often.
const scrapeEvery = 100 * time.Millisecond

// runDurableCASMetrics measures what serving Prometheus metrics costs the
// serial durable CAS workload. The store records its metrics on every
// commit whether or not anyone reads them (atomics, no switch), so that
// cost is in every durable_cas row; what an embedder turns on is a
// registry that scrapes them. Two stores each run the durable_cas workload
// (env.Ops compare-and-sets over 127 owners), in alternating rounds of one
// write per owner (harness.AlternateSerial);
// while the scraped store's rounds run, another goroutine scrapes its
// collector through promhttp (Stats, then text encoding) every
// scrapeEvery. Rows: durable_cas_metrics (scraped) and
// durable_cas_unscraped (the same writes, nobody scraping), whose p50
// ratio is in the scraped row's note.
func runDurableCASMetrics(env *Env) ([]harness.Result, error) {
	sides := make([]harness.SerialSide, 2)
	var stores [2]*statestore.Store
	var scraping atomic.Bool
	for i, name := range []string{nameDurableCASUnscraped, nameDurableCASMetrics} {
		s, err := openScratch(env, name, statestore.Options{})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		owners := newOwners(casKeys)
		scrape := i == 1
		stores[i] = s
		sides[i] = harness.SerialSide{Name: name, Op: func(i int) error { return owners[i%casKeys].CAS(s) },
			Enter: func() { scraping.Store(scrape) }}
	}

	reg := prometheus.NewRegistry()
	if err := reg.Register(promstats.ForStore(stores[1])); err != nil {
		return nil, err
	}
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError})
	var (
		scrapes atomic.Int64
		quit    = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if !scraping.Load() {
					continue
				}
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code == http.StatusOK && rec.Body.Len() > 0 {
					scrapes.Add(1)
				}
			}
		}
	}()
	defer func() {
		close(quit)
		wg.Wait()
	}()

	out, err := env.Run.AlternateSerial(sides, casRounds(env), casKeys)
	scraping.Store(false)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Note += fmt.Sprintf(", owners=%d doc=%dB", casKeys, harness.DocBytes)
	}
	m := &out[1]
	if n := scrapes.Load(); n == 0 {
		return out, fmt.Errorf("%s: no scrape completed during the run", nameDurableCASMetrics)
	}
	m.Note += fmt.Sprintf(", %d scrapes every %v, p50 ratio to unscraped %.3fx", scrapes.Load(), scrapeEvery, m.P50us/out[0].P50us)
	return out, nil
}
