package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/schema"
)

// buildJournal writes a valid journal of n records into dir's store
// quickly (big batches, no fsync): a handful of namespaces and keys, so
// revisions climb and keys are replaced, deleted, leased and expired as in
// a real store; every document is a distinct, schema-valid media intent of
// 150 to 200 bytes. Leases end an hour after the build, so none is overdue.
func buildJournal(tb testing.TB, dir string, n int) {
	tb.Helper()
	j, _, err := journal.Open(filepath.Join(dir, statestore.StoreDirName, "journal"), journal.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	nss := []string{"service/transcoder-0", "service/transcoder-1", "service/recorder-0", "user/owner-17",
		"user/owner-42", "group/lobby", "group/stage", "system/config"}
	const keysPerNS = 200
	type keyState struct{ live, leased bool }
	state := make([]keyState, len(nss)*keysPerNS)
	revs := make([]uint64, len(nss))
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UnixMilli()
	batch := make([]*journal.Record, 0, 10000)
	recs := make([]journal.Record, 10000)
	for i := 0; i < n; i++ {
		nsi, ki := rng.IntN(len(nss)), rng.IntN(keysPerNS)
		ks := &state[nsi*keysPerNS+ki]
		revs[nsi]++
		r := &recs[len(batch)]
		*r = journal.Record{Namespace: nss[nsi], Key: fmt.Sprintf("intents/cam-%03d", ki), Revision: revs[nsi], TimeMs: now - int64(n-i)}
		p := rng.Float64()
		switch {
		case ks.live && ks.leased && p < 0.2:
			r.Kind = journal.KindExpire
			*ks = keyState{}
		case ks.live && p < 0.3:
			r.Kind = journal.KindDelete
			*ks = keyState{}
		default:
			r.Kind, r.Schema, r.Owner = journal.KindPut, schema.MediaIntentV1, fmt.Sprintf("coordinator-%d", nsi)
			r.CreatedMs, r.UpdatedMs = r.TimeMs, r.TimeMs
			r.Document = testdoc.MediaIntent(150+rng.IntN(51), i)
			ks.live, ks.leased = true, p > 0.8
			if ks.leased {
				r.ExpiresMs = now + time.Hour.Milliseconds()
			}
		}
		batch = append(batch, r)
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := j.Append(batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := j.Close(); err != nil {
		tb.Fatal(err)
	}
}

// readSegments is the baseline: os.ReadFile of every segment.
func readSegments(tb testing.TB, dir string) int64 {
	segs, err := journal.ListSegments(filepath.Join(dir, statestore.StoreDirName, "journal"))
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		b, err := os.ReadFile(s.Path)
		if err != nil {
			tb.Fatal(err)
		}
		n += int64(len(b))
	}
	return n
}

func verifyDir(tb testing.TB, dir string) {
	var errb bytes.Buffer
	if code := run([]string{"verify", "--dir", dir}, io.Discard, &errb); code != exitOK {
		tb.Fatalf("verify exit %d: %s", code, errb.String())
	}
}

// TestVerifyThroughput measures verify against reading the same files on a
// journal of a million records. It is skipped unless KPJOURNAL_PERF=1;
// KPJOURNAL_PERF_DIR keeps (and reuses) the journal it builds.
//
//	KPJOURNAL_PERF=1 go test -run TestVerifyThroughput -v ./cmd/kpjournal/
func TestVerifyThroughput(t *testing.T) {
	// Serial: a throughput measurement, which other tests' load would skew.
	if os.Getenv("KPJOURNAL_PERF") == "" {
		t.Skip("set KPJOURNAL_PERF=1 to measure verify on a million records")
	}
	const n = 1_000_000
	dir := os.Getenv("KPJOURNAL_PERF_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, statestore.StoreDirName)); err != nil {
		start := time.Now()
		buildJournal(t, dir, n)
		t.Logf("built %d records in %v", n, time.Since(start).Round(time.Millisecond))
	}
	// Interleave the two and keep the best of each, wall clock and CPU
	// time (user + system, all threads): the machine may be shared.
	var size int64
	bestRead, bestVerify := time.Duration(1<<62), time.Duration(1<<62)
	cpuRead, cpuVerify := time.Duration(1<<62), time.Duration(1<<62)
	for range 5 {
		c0, start := cpuTime(t), time.Now()
		size = readSegments(t, dir)
		bestRead, cpuRead = min(bestRead, time.Since(start)), min(cpuRead, cpuTime(t)-c0)
		c0, start = cpuTime(t), time.Now()
		verifyDir(t, dir)
		bestVerify, cpuVerify = min(bestVerify, time.Since(start)), min(cpuVerify, cpuTime(t)-c0)
	}
	mb := float64(size) / 1e6
	t.Logf("read   %d segment bytes: %v (CPU %v), %.0f MB/s, %.0f records/s", size, bestRead.Round(time.Millisecond), cpuRead.Round(time.Millisecond),
		mb/bestRead.Seconds(), n/bestRead.Seconds())
	t.Logf("verify %d records:       %v (CPU %v), %.0f MB/s, %.0f records/s (%.2f of the read speed)", n, bestVerify.Round(time.Millisecond),
		cpuVerify.Round(time.Millisecond), mb/bestVerify.Seconds(), n/bestVerify.Seconds(), bestRead.Seconds()/bestVerify.Seconds())
	// From disk: the page cache dropped before each (needs root), as an
	// operator verifying a store after a restart reads it. From the page
	// cache, reading is a memory copy and verify (CRC, replay and a full
	// schema validation of every document) runs at about 0.15 of it on two
	// cores; from disk it keeps up with the reads.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err == nil {
		coldRead, coldVerify := time.Duration(1<<62), time.Duration(1<<62)
		for range 3 {
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
			start := time.Now()
			readSegments(t, dir)
			coldRead = min(coldRead, time.Since(start))
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
			start = time.Now()
			verifyDir(t, dir)
			coldVerify = min(coldVerify, time.Since(start))
		}
		t.Logf("cold read %v (%.0f MB/s), cold verify %v (%.0f MB/s, %.0f records/s): %.2f of the read speed",
			coldRead.Round(time.Millisecond), mb/coldRead.Seconds(), coldVerify.Round(time.Millisecond), mb/coldVerify.Seconds(),
			n/coldVerify.Seconds(), coldRead.Seconds()/coldVerify.Seconds())
		if coldVerify > 2*coldRead {
			t.Errorf("verify from disk runs at %.2f of the speed of reading the files; the target is at least 0.5", coldRead.Seconds()/coldVerify.Seconds())
		}
		return
	}
	if bestVerify > 2*bestRead {
		t.Errorf("verify runs at %.2f of the speed of reading the files from the page cache; the target is at least 0.5", bestRead.Seconds()/bestVerify.Seconds())
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchJournal(b *testing.B) string {
	dir := b.TempDir()
	buildJournal(b, dir, 100_000)
	return dir
}

// BenchmarkVerify is verify on 100,000 records; compare BenchmarkReadSegments.
func BenchmarkVerify(b *testing.B) {
	dir := benchJournal(b)
	b.SetBytes(readSegments(b, dir))
	for b.Loop() {
		verifyDir(b, dir)
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkReadSegments is the baseline: reading the same files.
func BenchmarkReadSegments(b *testing.B) {
	dir := benchJournal(b)
	b.SetBytes(readSegments(b, dir))
	for b.Loop() {
		readSegments(b, dir)
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
