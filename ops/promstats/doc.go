// Package promstats exports a state store's operator metrics
// (statestore.Stats) as Prometheus metrics. It is the only package of the
// module that imports github.com/prometheus/client_golang: embedders who do
// not use Prometheus never import it, and the statestore package does not
// depend on it (a test pins that).
//
// Use it with the outcome of statestore.Open, so a store that failed to
// open still shows on the dashboard:
//
//	s, err := statestore.Open(opts)
//	prometheus.MustRegister(promstats.ForOpen(s, err))
//
// # Invariants
//
//  1. The collector keeps no state: each scrape reads statestore.Stats once
//     and turns it into constant metrics, so concurrent scrapes are safe
//     and a scrape never slows the store's commit path (Stats takes no lock
//     that a commit holds for more than bookkeeping).
//     Code: Collector.Collect, Source.
//     Tests: TestCollectReadsStatsOncePerScrape.
//  2. Every metric below is always present for a store that opened (zero
//     until its event happens; labelled counters carry every label value),
//     so rate() and alerts work from the first scrape. A store that failed
//     to open exports only keeppeek_state_store_open (0) and
//     keeppeek_state_store_open_failed_info.
//     Code: Collector.Collect, byCode, closures, ForOpen, statestore.codeCounts.
//     Tests: TestEveryMetricPresentFromTheStart, TestFailedOpenExportsOnlyWhy, TestDocListsEveryMetric.
//
// # Metrics
//
// Metrics (all prefixed keeppeek_state_store_; "s" is seconds):
//
//	open                                gauge      1 open and serving, 0 closed or failed to open
//	open_failed_info{reason,error}      gauge      1, only when Open failed; reason is invalid_options, locked, corrupt, storage or other
//	commit_duration_seconds             histogram  s, write entering the commit pipeline to its reply (committed writes)
//	fdatasync_duration_seconds          histogram  s, per journal sync, failed ones included
//	commit_batch_ops                    histogram  operations per group-commit batch
//	fdatasync_records                   histogram  journal records made durable per sync
//	writes_committed_total              counter    Put and Delete calls committed
//	writes_refused_total{code}          counter    Put and Delete calls refused, by STATE_STORE_ERROR_CODE name (CONFLICT, STORAGE, ...)
//	watch_requests_refused_total{code}  counter    Watch calls refused, by code (WATCH_TOO_BROAD, WATCH_LIMIT, ...)
//	journal_writes_total                counter    group-commit batches written to the journal
//	journal_records_total               counter    records journaled
//	journal_bytes_total                 counter    bytes, record frames journaled
//	journal_failures_total              counter    failed journal writes and fdatasyncs
//	journal_segments                    gauge      segment files on disk
//	journal_size_bytes                  gauge      bytes, segment files on disk
//	journal_reserve_spent               gauge      1 while a full disk has the journal on its reserve (PUTs refused), else 0
//	journal_reserve_releases_total      counter    times a full disk made the journal give its reserve up
//	watches_open                        gauge      watches open
//	watch_sessions_open                 gauge      sessions open
//	watches_added_total                 counter    watches registered
//	watch_closures_total{reason}        counter    watches ended: BUFFER_OVERFLOW, ACK_TIMEOUT, AUTHORIZATION_LOST,
//	                                               SNAPSHOT_DELIVERY_FAILED, STORE_CLOSED, RESTORED, UNAVAILABLE,
//	                                               UNWATCH, DISCONNECT
//	watch_updates_enqueued_total        counter    watch updates queued for delivery
//	watch_updates_delivered_total       counter    watch updates the sink accepted
//	watch_updates_dropped_total         counter    watch updates that never reached a sink
//	watch_snapshot_entries              histogram  entries per watch snapshot
//	watch_snapshot_bytes                histogram  bytes (estimated encoding) per watch snapshot
//	entries                             gauge      entries in the store
//	value_bytes                         gauge      bytes, documents counted against the total value bytes limit
//	namespaces                          gauge      namespaces holding entries
//	fullest_namespace_entries           gauge      entries in the fullest namespace
//	limit_value_bytes                   gauge      bytes, total value bytes ceiling
//	limit_namespaces                    gauge      namespaces ceiling
//	limit_namespace_entries             gauge      entries per namespace ceiling
//	checkpoints_total                   counter    checkpoint images written
//	checkpoint_failures_total           counter    checkpoint images that failed
//	checkpoint_duration_seconds         histogram  s, per checkpoint image, failed ones included
//	checkpoint_last_index               gauge      journal index of the last image (0: none)
//	checkpoint_last_timestamp_seconds   gauge      s, Unix time of the last image by the store's clock (0: none)
package promstats
