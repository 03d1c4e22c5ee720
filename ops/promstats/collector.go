package promstats

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/stats"
	"github.com/keeppeek/statestore/watch"
)

const (
	namespace = "keeppeek"
	subsystem = "state_store"
	// nanosecond histograms are exported in seconds.
	secondsPerNano = 1e-9
)

// Source returns the stats to export; it is called once per scrape.
type Source func() statestore.Stats

// Collector is a prometheus.Collector exporting a store's Stats. It reads
// the source once per scrape and keeps no state of its own, so it is safe
// for concurrent scrapes and can be registered in any registry.
type Collector struct {
	src        Source
	scalars    []scalar
	labelled   []labelled
	histograms []histogram
	open       *prometheus.Desc
	failed     *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// scalar is one unlabelled counter or gauge.
type scalar struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(*statestore.Stats) float64
}

// labelled is a counter with one label, a series per label value.
type labelled struct {
	desc   *prometheus.Desc
	values func(*statestore.Stats) []labelValue
}

type labelValue struct {
	label string
	value uint64
}

// histogram is a stats histogram exported with its bounds scaled.
type histogram struct {
	desc  *prometheus.Desc
	get   func(*statestore.Stats) stats.Snapshot
	scale float64
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil)
}

// New returns a collector exporting what src returns; see the package
// documentation for the metrics.
func New(src Source) *Collector {
	counter := func(name, help string, v func(*statestore.Stats) float64) scalar {
		return scalar{desc(name, help), prometheus.CounterValue, v}
	}
	gauge := func(name, help string, v func(*statestore.Stats) float64) scalar {
		return scalar{desc(name, help), prometheus.GaugeValue, v}
	}
	c := &Collector{
		src:    src,
		open:   desc("open", "1 while the store is open and serving, 0 once closed or when it failed to open."),
		failed: desc("open_failed_info", "Present (value 1) only when the store failed to open: why, as a class and as the error text.", "reason", "error"),
	}
	c.scalars = []scalar{
		counter("writes_committed_total", "Put and Delete calls committed (fsynced) and answered without error.",
			func(s *statestore.Stats) float64 { return float64(s.WritesCommitted) }),
		counter("journal_writes_total", "Group-commit batches written to the journal.",
			func(s *statestore.Stats) float64 { return float64(s.Journal.Appends) }),
		counter("journal_records_total", "Records written to the journal.",
			func(s *statestore.Stats) float64 { return float64(s.Journal.Records) }),
		counter("journal_bytes_total", "Record frame bytes written to the journal.",
			func(s *statestore.Stats) float64 { return float64(s.Journal.Bytes) }),
		counter("journal_failures_total", "Journal writes and fdatasyncs that failed (each answered STORAGE).",
			func(s *statestore.Stats) float64 { return float64(s.Journal.Failures) }),
		gauge("journal_segments", "Journal segment files on disk.",
			func(s *statestore.Stats) float64 { return float64(s.JournalSegments) }),
		gauge("journal_size_bytes", "Total size of the journal segment files on disk.",
			func(s *statestore.Stats) float64 { return float64(s.JournalDiskBytes) }),
		gauge("journal_reserve_spent", "1 while a full disk has the journal running on its reserve: PUTs are refused, deletes and lease expiries admitted.",
			func(s *statestore.Stats) float64 { return boolValue(s.JournalReserve.Spent) }),
		counter("journal_reserve_releases_total", "Times a full disk made the journal give its reserve up.",
			func(s *statestore.Stats) float64 { return float64(s.JournalReserve.Releases) }),
		gauge("watches_open", "Watches open now.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Open) }),
		gauge("watch_sessions_open", "Sessions (control channels) open now.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Sessions) }),
		counter("watches_added_total", "Watches registered.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Added) }),
		counter("watch_updates_enqueued_total", "Watch updates queued for delivery.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Enqueued) }),
		counter("watch_updates_delivered_total", "Watch updates the session's sink accepted.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Delivered) }),
		counter("watch_updates_dropped_total", "Watch updates that never reached a sink: the watch overflowed, closed or was removed first, or the sink refused them.",
			func(s *statestore.Stats) float64 { return float64(s.Watches.Dropped) }),
		gauge("entries", "Entries in the store.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.Entries) }),
		gauge("value_bytes", "Document bytes in the store, as counted against the total value bytes limit.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.Bytes) }),
		gauge("namespaces", "Namespaces holding at least one entry.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.Namespaces) }),
		gauge("fullest_namespace_entries", "Entries in the fullest namespace, against the entries per namespace limit.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.FullestNamespaceEntries) }),
		gauge("limit_value_bytes", "Ceiling on document bytes in the whole store.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.MaxTotalBytes) }),
		gauge("limit_namespaces", "Ceiling on namespaces holding entries.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.MaxNamespaces) }),
		gauge("limit_namespace_entries", "Ceiling on entries in one namespace.",
			func(s *statestore.Stats) float64 { return float64(s.Quota.MaxEntriesPerNamespace) }),
		counter("checkpoints_total", "Checkpoint images written.",
			func(s *statestore.Stats) float64 { return float64(s.Checkpoints.Written) }),
		counter("checkpoint_failures_total", "Checkpoint images that failed to be written.",
			func(s *statestore.Stats) float64 { return float64(s.Checkpoints.Failed) }),
		gauge("checkpoint_last_index", "Journal index of the last checkpoint image written (0: none yet).",
			func(s *statestore.Stats) float64 { return float64(s.Checkpoints.LastIndex) }),
		gauge("checkpoint_last_timestamp_seconds", "When the last checkpoint image was written, Unix time by the store's clock (0: none yet).",
			func(s *statestore.Stats) float64 {
				if s.Checkpoints.LastTime.IsZero() {
					return 0
				}
				return float64(s.Checkpoints.LastTime.UnixNano()) * secondsPerNano
			}),
	}
	c.labelled = []labelled{
		{desc("writes_refused_total", "Put and Delete calls answered with an error, by result code.", "code"),
			func(s *statestore.Stats) []labelValue { return byCode(s.WritesRefused) }},
		{desc("watch_requests_refused_total", "Watch calls answered with an error, by result code.", "code"),
			func(s *statestore.Stats) []labelValue { return byCode(s.WatchesRefused) }},
		{desc("watch_closures_total", "Watches that ended, by reason: a StateStoreWatchClosed reason, UNWATCH (the client's UnwatchState) or DISCONNECT (its session closed).", "reason"),
			closures},
	}
	c.histograms = []histogram{
		{desc("commit_duration_seconds", "Time from a write entering the commit pipeline to its reply, for committed writes."),
			func(s *statestore.Stats) stats.Snapshot { return s.CommitLatency }, secondsPerNano},
		{desc("fdatasync_duration_seconds", "Time per journal sync (fdatasync, plus a directory fsync after a new segment), failed ones included."),
			func(s *statestore.Stats) stats.Snapshot { return s.SyncLatency }, secondsPerNano},
		{desc("commit_batch_ops", "Operations per group-commit batch."),
			func(s *statestore.Stats) stats.Snapshot { return s.BatchOps }, 1},
		{desc("fdatasync_records", "Journal records made durable per sync."),
			func(s *statestore.Stats) stats.Snapshot { return s.SyncRecords }, 1},
		{desc("watch_snapshot_entries", "Entries per watch snapshot served."),
			func(s *statestore.Stats) stats.Snapshot { return s.SnapshotEntries }, 1},
		{desc("watch_snapshot_bytes", "Estimated encoded bytes per watch snapshot served."),
			func(s *statestore.Stats) stats.Snapshot { return s.SnapshotBytes }, 1},
		{desc("checkpoint_duration_seconds", "Time to write one checkpoint image, failed ones included."),
			func(s *statestore.Stats) stats.Snapshot { return s.Checkpoints.Duration }, secondsPerNano},
	}
	return c
}

// ForStore returns a collector exporting s.Stats.
func ForStore(s *statestore.Store) *Collector { return New(s.Stats) }

// ForOpen returns the collector for the outcome of statestore.Open: the
// store's when openErr is nil, else one that reports the store as not open
// and why (statestore.FailedOpenStats), so a dashboard tells a store that
// never opened from one that is merely idle.
func ForOpen(s *statestore.Store, openErr error) *Collector {
	if openErr != nil || s == nil {
		st := statestore.FailedOpenStats(openErr)
		return New(func() statestore.Stats { return st })
	}
	return ForStore(s)
}

// Describe sends every metric's descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.failed
	for _, m := range c.scalars {
		ch <- m.desc
	}
	for _, m := range c.labelled {
		ch <- m.desc
	}
	for _, m := range c.histograms {
		ch <- m.desc
	}
}

// Collect reads the source once and sends every metric. A store that
// failed to open has nothing to report but that: only open (0) and
// open_failed_info are sent.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src()
	open := 0.0
	if st.State == statestore.StateOpen {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open)
	if st.State == statestore.StateFailed {
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, 1, string(st.Failure), st.FailureMessage)
		return
	}
	for _, m := range c.scalars {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(&st))
	}
	for _, m := range c.labelled {
		for _, lv := range m.values(&st) {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(lv.value), lv.label)
		}
	}
	for _, m := range c.histograms {
		snap := m.get(&st)
		buckets := make(map[float64]uint64, len(snap.Bounds))
		for i, n := range snap.Cumulative() {
			buckets[float64(snap.Bounds[i])*m.scale] = n
		}
		ch <- prometheus.MustNewConstHistogram(m.desc, snap.Count, float64(snap.Sum)*m.scale, buckets)
	}
}

// byCode lists counts by result code name.
func byCode(m map[statestore.Code]uint64) []labelValue {
	out := make([]labelValue, 0, len(m))
	for code, n := range m {
		out = append(out, labelValue{code.String(), n})
	}
	return out
}

// Closure reasons for the client's own endings, beside watch.Reason's.
const (
	reasonUnwatch    = "UNWATCH"
	reasonDisconnect = "DISCONNECT"
)

func closures(s *statestore.Stats) []labelValue {
	out := make([]labelValue, 0, len(watch.Reasons)+2)
	for _, r := range watch.Reasons {
		out = append(out, labelValue{r.String(), s.Watches.Closed[r]})
	}
	return append(out, labelValue{reasonUnwatch, s.Watches.Unwatched}, labelValue{reasonDisconnect, s.Watches.Disconnected})
}

// boolValue is a yes/no gauge's value.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves src's metrics in the Prometheus text format (a registry
// holding only New(src)), so a program can mount /metrics without
// importing client_golang itself.
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(src))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
