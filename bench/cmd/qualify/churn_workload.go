package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

// The specification's churn workload, as the root package's
// TestContinuousChurn runs it: fill and drain churnEntries entries for
// churnCycles cycles on one open, durable store, the disk use sampled
// every churnSampleEvery operations.
const (
	churnEntries     = 256
	churnCycles      = 24
	churnSampleEvery = 16
	// churnCeiling is the specification's regression ceiling for this
	// fixed workload.
	churnCeiling = 5 << 20
)

// diskUse is what the store keeps on disk for its state: the journal's
// segments and the checkpoint images (the specification's database plus
// WAL), as TestContinuousChurn counts it.
func diskUse(root string) (int64, error) {
	segs, err := journal.ListSegments(filepath.Join(root, "journal"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	files, err := checkpoint.List(root)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		st, err := os.Stat(f.Path)
		if err != nil {
			if os.IsNotExist(err) {
				continue // a background checkpoint pruned it since List
			}
			return 0, err
		}
		n += st.Size()
	}
	return n, nil
}

// runContinuousChurn is the specification's churn workload.
func runContinuousChurn(env *Env) ([]harness.Result, error) { return churn(env, churnCycles) }

// churn fills and drains the entries cycles times, timing every put and
// delete (the disk samples untimed), and reports the peak disk use beside
// the ceiling.
func churn(env *Env, cycles int) ([]harness.Result, error) {
	dir, err := env.Scratch(report.ContinuousChurn)
	if err != nil {
		return nil, err
	}
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	root := filepath.Join(dir, statestore.StoreDirName)
	admin := statestore.Principal{ID: "churn", Admin: true}
	ctx := context.Background()
	const ns = "service/churn"
	lat := harness.NewLatencies(cycles * churnEntries * 2)
	var peak int64
	samples, op := 0, 0
	timed := func(f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("op %d: %w", op, err)
		}
		took := time.Since(start)
		lat.Record(took)
		if err := env.Run.Check(report.ContinuousChurn, -1, op, took); err != nil {
			return err
		}
		op++
		if op%churnSampleEvery == 1 {
			u, err := diskUse(root)
			if err != nil {
				return err
			}
			peak, samples = max(peak, u), samples+1
		}
		return nil
	}
	start := time.Now()
	for cycle := range cycles {
		for i := range churnEntries {
			req := statestore.PutRequest{Namespace: ns, Key: fmt.Sprintf("k%03d", i), Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(harness.DocBytes, cycle*churnEntries+i)}
			if err := timed(func() error { _, err := s.Put(ctx, admin, req); return err }); err != nil {
				return nil, err
			}
		}
		for i := range churnEntries {
			req := statestore.DeleteRequest{Namespace: ns, Key: fmt.Sprintf("k%03d", i)}
			if err := timed(func() error { _, err := s.Delete(ctx, admin, req); return err }); err != nil {
				return nil, err
			}
		}
	}
	elapsed := time.Since(start)
	end, err := diskUse(root)
	if err != nil {
		return nil, err
	}
	r := harness.Result{Name: report.ContinuousChurn, Writers: 1, OpsPerS: float64(op) / elapsed.Seconds(),
		Note: fmt.Sprintf("%d entries filled and drained %d times on one open durable store (%d puts and deletes); journal plus checkpoints peaked at %d bytes over %d samples (ceiling %d), %d at the end",
			churnEntries, cycles, op, peak, samples, churnCeiling, end),
		Figures: map[string]float64{report.FigPeakDiskBytes: float64(peak), report.FigEndDiskBytes: float64(end), report.FigDiskCeilingBytes: churnCeiling}}
	lat.Fill(&r)
	return []harness.Result{r}, nil
}
