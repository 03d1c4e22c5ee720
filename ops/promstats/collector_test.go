package promstats_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/ops/promstats"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

var (
	ctx   = context.Background()
	alice = statestore.Principal{ID: "alice"}
)

const doc = `{"role":"subscribe","desired":true,"source_id":"cam-1","media_kind":"video"}`

func openStore(t *testing.T) *statestore.Store {
	t.Helper()
	s, _ := openFaultyStore(t)
	return s
}

// openFaultyStore is openStore giving the store fault seams of its own,
// which it returns.
func openFaultyStore(t *testing.T) (*statestore.Store, *fault.Hooks) {
	t.Helper()
	faults := &fault.Hooks{}
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), CheckpointBytes: -1, Clock: clock.NewFake(clock.Real{}.Now()), Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, faults
}

func put(s *statestore.Store, key string, x statestore.Expect) error {
	_, err := s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: key, Schema: schema.MediaIntentV1, Document: []byte(doc), Expect: x})
	return err
}

// scrape gathers reg and returns every sample as "name{label="v",...}"
// -> value; a histogram gives name_count, name_sum and name_bucket{le=...}.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			key := func(suffix string, extra ...string) string {
				l := append(append([]string(nil), labels...), extra...)
				if len(l) == 0 {
					return mf.GetName() + suffix
				}
				return mf.GetName() + suffix + "{" + strings.Join(l, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[key("_count")] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%q", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

func registry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

const p = "keeppeek_state_store_"

// TestExportedMetricsMove drives the store and checks that the exported
// series move with it: commits, refusals by code, watch closures,
// checkpoints, open state.
func TestExportedMetricsMove(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	reg := registry(t, promstats.ForStore(s))
	before := scrape(t, reg)
	if before[p+"open"] != 1 || before[p+"writes_committed_total"] != 0 || before[p+`writes_refused_total{code="CONFLICT"}`] != 0 {
		t.Fatalf("fresh store: open %v committed %v", before[p+"open"], before[p+"writes_committed_total"])
	}
	if err := put(s, "k", statestore.CreateOnly); err != nil {
		t.Fatal(err)
	}
	if err := put(s, "k", statestore.CreateOnly); statestore.CodeOf(err) != statestore.Conflict {
		t.Fatalf("second create-only: %v", err)
	}
	sess, err := s.OpenSession(alice, discard{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(ctx, sess, statestore.WatchRequest{WatchID: "w", Namespace: "user/alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unwatch(sess, "w"); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, reg)
	moved := map[string]float64{
		p + "writes_committed_total":                         1,
		p + `writes_refused_total{code="CONFLICT"}`:          1,
		p + "commit_duration_seconds_count":                  1,
		p + "fdatasync_duration_seconds_count":               1,
		p + "commit_batch_ops_count":                         2, // the refused write had a batch of its own
		p + "journal_records_total":                          1,
		p + "watches_added_total":                            1,
		p + `watch_closures_total{reason="UNWATCH"}`:         1,
		p + "watch_snapshot_entries_count":                   1,
		p + "watch_snapshot_entries_sum":                     1,
		p + "checkpoints_total":                              1,
		p + "checkpoint_last_index":                          1,
		p + "checkpoint_duration_seconds_count":              1,
		p + "entries":                                        1,
		p + "value_bytes":                                    float64(len(doc)),
		p + "namespaces":                                     1,
		p + `writes_refused_total{code="STORAGE"}`:           0,
		p + `watch_closures_total{reason="BUFFER_OVERFLOW"}`: 0,
	}
	for name, delta := range moved {
		got, ok := after[name]
		if !ok {
			t.Errorf("%s not exported", name)
			continue
		}
		if got-before[name] != delta {
			t.Errorf("%s moved %v -> %v, want +%v", name, before[name], got, delta)
		}
	}
	// Latency buckets are in seconds: a commit on any disk takes more than
	// a nanosecond and less than ten seconds.
	if after[p+`commit_duration_seconds_bucket{le="10"}`] != 1 || after[p+`commit_duration_seconds_bucket{le="1e-09"}`] != 0 {
		t.Errorf("commit buckets not in seconds: %v", after[p+`commit_duration_seconds_bucket{le="10"}`])
	}
	if after[p+"limit_value_bytes"] != float64(s.Limits().MaxTotalBytes) {
		t.Errorf("limit_value_bytes %v", after[p+"limit_value_bytes"])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed := scrape(t, reg)
	if closed[p+"open"] != 0 || closed[p+"writes_committed_total"] != 1 {
		t.Fatalf("closed store: open %v committed %v", closed[p+"open"], closed[p+"writes_committed_total"])
	}
}

// TestReserveGaugeFollowsFullDisk: a write that meets a full disk (its
// fdatasync answering ENOSPC) makes the journal give its reserve up, which
// the gauge and the counter show; the next PUT, finding room again, writes
// the reserve back and the gauge returns to 0.
func TestReserveGaugeFollowsFullDisk(t *testing.T) {
	t.Parallel()
	s, faults := openFaultyStore(t)
	reg := registry(t, promstats.ForStore(s))
	if m := scrape(t, reg); m[p+"journal_reserve_spent"] != 0 || m[p+"journal_reserve_releases_total"] != 0 {
		t.Fatalf("fresh store: spent %v, releases %v", m[p+"journal_reserve_spent"], m[p+"journal_reserve_releases_total"])
	}
	restore := faults.SetSync(func(string) error { return syscall.ENOSPC })
	err := put(s, "k", statestore.Expect{})
	restore()
	if statestore.CodeOf(err) != statestore.Storage {
		t.Fatalf("put on a full disk: %v", err)
	}
	if m := scrape(t, reg); m[p+"journal_reserve_spent"] != 1 || m[p+"journal_reserve_releases_total"] != 1 {
		t.Fatalf("after the full disk: spent %v, releases %v", m[p+"journal_reserve_spent"], m[p+"journal_reserve_releases_total"])
	}
	if err := put(s, "k", statestore.Expect{}); err != nil {
		t.Fatalf("put once the disk has room: %v", err)
	}
	if m := scrape(t, reg); m[p+"journal_reserve_spent"] != 0 || m[p+"journal_reserve_releases_total"] != 1 {
		t.Fatalf("after space came back: spent %v, releases %v", m[p+"journal_reserve_spent"], m[p+"journal_reserve_releases_total"])
	}
}

type discard struct{}

func (discard) Deliver(watch.Message) error { return nil }

// TestFailedOpenExportsOnlyWhy: a store that did not open is "not open"
// with the failure class and text, and nothing that would pass for an idle
// store.
func TestFailedOpenExportsOnlyWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := statestore.Open(statestore.Options{Dir: dir})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a locked store succeeded")
	}
	got := scrape(t, registry(t, promstats.ForOpen(second, err)))
	want := map[string]float64{
		p + "open": 0,
		p + fmt.Sprintf(`open_failed_info{error=%q,reason="locked"}`, err.Error()): 1,
	}
	if len(got) != len(want) {
		t.Fatalf("exported %v, want only %v", keys(got), keys(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v (got %v)", k, got[k], v, keys(got))
		}
	}
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestLint runs Prometheus' own linter over the exported metrics: names,
// units, suffixes and help text follow its conventions.
func TestLint(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	if err := put(s, "k", statestore.Expect{}); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(promstats.ForStore(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s", pr.Metric, pr.Text)
	}
}

// TestDocListsEveryMetric keeps the package documentation's metric list
// and the collector in step.
func TestDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	promstats.New(func() statestore.Stats { return statestore.Stats{} }).Describe(ch)
	close(ch)
	name := regexp.MustCompile(`fqName: "` + p + `([a-z_]+)"`)
	n := 0
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor %s has no %s name", d, p)
		}
		n++
		if !regexp.MustCompile(`(?m)^//\t` + m[1] + `[ {]`).Match(src) {
			t.Errorf("%s is not in the package doc's metric list", m[1])
		}
	}
	if n < 30 {
		t.Fatalf("only %d descriptors", n)
	}
}

// TestRootDoesNotImportPrometheus pins that embedders who do not use
// Prometheus do not build it: the statestore package must not depend on
// client_golang.
func TestRootDoesNotImportPrometheus(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/keeppeek/statestore").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "github.com/keeppeek/statestore/internal/stats") {
		t.Fatalf("go list output does not look like the store's dependencies:\n%s", deps)
	}
	for _, dep := range strings.Fields(deps) {
		if strings.HasPrefix(dep, "github.com/prometheus/") || dep == "github.com/keeppeek/statestore/ops/promstats" {
			t.Errorf("the statestore package depends on %s", dep)
		}
	}
}

// BenchmarkScrape is one scrape of a store holding 127 entries in 127
// namespaces: Stats (which lists the journal directory and walks the
// namespace counters) and the text encoding, as promhttp serves it.
func BenchmarkScrape(b *testing.B) {
	s, err := statestore.Open(statestore.Options{Dir: b.TempDir(), CheckpointBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 127 {
		p := statestore.Principal{ID: fmt.Sprintf("owner-%03d", i)}
		if _, err := s.Put(ctx, p, statestore.PutRequest{Namespace: "user/" + p.ID, Key: "k", Schema: schema.MediaIntentV1, Document: []byte(doc)}); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.ForStore(s))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("scrape: %d", rec.Code)
		}
	}
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
