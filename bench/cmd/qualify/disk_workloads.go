package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

const (
	nameOpenFullStore   = report.OpenFullStore
	nameReadFiles       = "read_files"
	nameReplayJournal   = "replay_journal"
	nameBackupFullStore = "backup_full_store"

	// fullStoreDocs 2,193-byte documents fill the 64 MiB value ceiling, as
	// in the specification's quota workload.
	fullStoreDocs = 30601
	fullStoreRuns = 5
)

// fillFullStore writes the full store from 64 writers (group commit makes
// this quick) into a store opened with opts.
func fillFullStore(opts statestore.Options) (*statestore.Store, error) {
	s, err := statestore.Open(opts)
	if err != nil {
		return nil, err
	}
	admin := statestore.Principal{ID: "filler", Admin: true}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < fullStoreDocs; i += 64 {
				req := statestore.PutRequest{Namespace: fmt.Sprintf("group/q%03d", i/1024), Key: fmt.Sprintf("k%05d", i), Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(harness.DocBytes, i)}
				if _, err := s.Put(context.Background(), admin, req); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// buildFullStore fills a closed full store in a scratch directory, with a
// checkpoint of it or with only its journal, and returns the options that
// reopen it.
func buildFullStore(env *Env, name string, checkpointed bool) (string, statestore.Options, error) {
	dir, err := env.Scratch(name)
	if err != nil {
		return "", statestore.Options{}, err
	}
	opts := statestore.Options{Dir: dir, CheckpointBytes: -1}
	s, err := fillFullStore(opts)
	if err != nil {
		return "", opts, err
	}
	if checkpointed {
		err = s.Checkpoint()
	}
	return dir, opts, errors.Join(err, s.Close())
}

// readAll reads every file under dir into memory and returns the bytes.
func readAll(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		n += int64(len(b))
		return err
	})
	return n, err
}

// runOpenFullStore times opening a store at the value ceiling from its
// checkpoint, beside reading the same files into memory, in one run.
func runOpenFullStore(env *Env) ([]harness.Result, error) {
	dir, opts, err := buildFullStore(env, nameOpenFullStore, true)
	if err != nil {
		return nil, err
	}
	open, read := harness.NewLatencies(fullStoreRuns), harness.NewLatencies(fullStoreRuns)
	var size, valueBytes int64
	for i := 0; i < fullStoreRuns; i++ {
		start := time.Now()
		if size, err = readAll(filepath.Join(dir, statestore.StoreDirName)); err != nil {
			return nil, err
		}
		took := time.Since(start)
		read.Record(took)
		if err := env.Run.Check(nameReadFiles, -1, i, took); err != nil {
			return nil, err
		}
		start = time.Now()
		s, err := statestore.Open(opts)
		if err != nil {
			return nil, err
		}
		took = time.Since(start)
		open.Record(took)
		if err := env.Run.Check(nameOpenFullStore, -1, i, took); err != nil {
			s.Close()
			return nil, err
		}
		n, b, _ := s.Usage()
		if n != fullStoreDocs {
			s.Close()
			return nil, fmt.Errorf("opened store holds %d entries, want %d", n, fullStoreDocs)
		}
		valueBytes = b
		if i == fullStoreRuns-1 {
			err = refusesNext(s)
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	ro := harness.Result{Name: nameOpenFullStore, Writers: 1, Note: fmt.Sprintf("%d docs (%d value bytes) from a checkpoint, %d runs; the next document was refused at the ceiling", fullStoreDocs, valueBytes, fullStoreRuns),
		Figures: map[string]float64{report.FigEntries: fullStoreDocs, report.FigValueBytes: float64(valueBytes)}}
	open.Fill(&ro)
	rr := harness.Result{Name: nameReadFiles, Writers: 1, Note: fmt.Sprintf("%d bytes of store files", size)}
	read.Fill(&rr)
	ro.Note += fmt.Sprintf("; p50 = %.2fx read_files", ro.P50us/rr.P50us)
	return []harness.Result{ro, rr}, nil
}

// refusesNext checks the quota workload's last step on the full store s:
// one more document is refused with QUOTA_EXCEEDED and changes nothing.
func refusesNext(s *statestore.Store) error {
	n, b, _ := s.Usage()
	admin := statestore.Principal{ID: "filler", Admin: true}
	req := statestore.PutRequest{Namespace: fmt.Sprintf("group/q%03d", fullStoreDocs/1024), Key: fmt.Sprintf("k%05d", fullStoreDocs),
		Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(harness.DocBytes, fullStoreDocs)}
	_, err := s.Put(context.Background(), admin, req)
	if statestore.CodeOf(err) != statestore.QuotaExceeded {
		return fmt.Errorf("a document past the value ceiling: %v, want QUOTA_EXCEEDED", err)
	}
	if n2, b2, _ := s.Usage(); n2 != n || b2 != b {
		return fmt.Errorf("the refused document changed the usage from %d entries, %d bytes to %d, %d", n, b, n2, b2)
	}
	return nil
}

// runReplayJournal times replaying the full store's journal with no
// checkpoint: records per second.
func runReplayJournal(env *Env) ([]harness.Result, error) {
	_, opts, err := buildFullStore(env, nameReplayJournal, false)
	if err != nil {
		return nil, err
	}
	lat := harness.NewLatencies(fullStoreRuns)
	var replayed int
	for i := 0; i < fullStoreRuns; i++ {
		start := time.Now()
		s, err := statestore.Open(opts)
		if err != nil {
			return nil, err
		}
		lat.Record(time.Since(start))
		if err := env.Run.Check(nameReplayJournal, -1, i, time.Since(start)); err != nil {
			s.Close()
			return nil, err
		}
		replayed = s.OpenReport().Replayed
		s.Close()
	}
	r := harness.Result{Name: nameReplayJournal, Writers: 1}
	lat.Fill(&r)
	r.OpsPerS = float64(replayed) / (r.P50us / 1e6)
	r.Note = fmt.Sprintf("%d records, median of %d opens", replayed, fullStoreRuns)
	return []harness.Result{r}, nil
}

// runBackupFullStore times Backup of the full store to a file while eight
// writers keep compare-and-setting.
func runBackupFullStore(env *Env) ([]harness.Result, error) {
	dir, err := env.Scratch(nameBackupFullStore)
	if err != nil {
		return nil, err
	}
	s, err := fillFullStore(statestore.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	admin := statestore.Principal{ID: "writer", Admin: true}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			doc := testdoc.MediaIntent(harness.DocBytes, w)
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("k%05d", w*1024+i%1024)
				req := statestore.PutRequest{Namespace: fmt.Sprintf("group/q%03d", w), Key: key, Schema: schema.MediaIntentV1, Document: doc}
				if _, err := s.Put(context.Background(), admin, req); err == nil {
					writes.Add(1)
				}
			}
		}(w)
	}
	lat := harness.NewLatencies(fullStoreRuns)
	var size int64
	for i := 0; i < fullStoreRuns; i++ {
		path := filepath.Join(dir, fmt.Sprintf("backup-%d.kpb", i))
		start := time.Now()
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := s.Backup(f); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		st, _ := f.Stat()
		size = st.Size()
		f.Close()
		lat.Record(time.Since(start))
		if err := env.Run.Check(nameBackupFullStore, -1, i, time.Since(start)); err != nil {
			stop.Store(true)
			wg.Wait()
			return nil, err
		}
	}
	stop.Store(true)
	wg.Wait()
	r := harness.Result{Name: nameBackupFullStore, Writers: 8, Note: fmt.Sprintf("%d-byte file, fsynced; %d writes committed meanwhile", size, writes.Load())}
	lat.Fill(&r)
	return []harness.Result{r}, nil
}
