package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// procMemory returns a process's resident set (VmRSS) and its peak
// (VmHWM), in bytes, from /proc/PID/status.
func procMemory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", name, value)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak
}

// TestStalledSessionsMemory is issue 31's attack on memory: 100 sessions
// send GetState for a 16 KB document and never read. Under a 16 MiB
// [server] max_queued_bytes the server's peak resident set stays under
// the budget plus 48 MB, and a bystander is answered throughout. It then
// measures what 1,000 idle sessions cost each. Under the race detector
// the memory figures are logged but not held (it multiplies memory).
//
// "Throughout" is held to the attack's own clock, not to a latency guess
// (a 2 s bound on the get failed under -race on a loaded machine, with
// the budget working as it should): the stalled sessions dial with a 4 KiB
// receive buffer, so the server's writes to them block after a few tens
// of kilobytes and what it queued for them stays in the budget, which
// then frees only when the server ends one of them, no sooner than its
// write timeout (wstransport.DefaultWriteTimeout, 10 s) after they start
// sending (together, once all are dialed). Every bystander get asked in
// the first half of that must be answered before it: a bystander that
// waited on the budget is answered only after a stalled session ended
// (with the per-session shares and the exemption broken on purpose: asked
// at 1.6 s and 2.8 s, answered at 10.1 s and 10.2 s).
func TestStalledSessionsMemory(t *testing.T) {
	// Not parallel: the resident set is the whole server's, and another
	// test's load would blur what each session costs.
	dir := t.TempDir()
	ops := newPrincipal(t, "ops", true)
	// The memory limit the configuration sets keeps the collector from
	// letting the heap grow to twice what is live: the budget and 16 MB.
	const budget, limit = 16 << 20, 16<<20 + 16<<20
	// overhead is what the process may hold beyond the budget: the
	// server's own ~10 MB, and the heap's overshoot of the collector's
	// goal during the opening burst, which depends on the CPU the
	// collector gets (VmHWM 42.0-49.4 MB over 20 runs on a loaded 2-core
	// machine at 32 MB of overhead). Unbounded, the queued answers alone
	// would be 100 x 2,000 x 16 KB.
	const overhead = 48 << 20
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops},
		extra: fmt.Sprintf("\n[server]\nmax_queued_bytes = %d\nmemory_limit = %d\nmax_sessions_per_principal = 2000\n", budget, limit)}
	p := startServe(t, sc.write(t, dir), nil)
	pid := p.cmd.Process.Pid
	by := p.mustDial(ops.token)
	by.id = 1
	if r := by.call(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: 1,
		Namespace: "service/big", Key: "k", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(16000, 1)}}}); errCode(r) != 0 {
		t.Fatalf("put: %v", r)
	}
	base, _ := procMemory(t, pid)

	// 100 stalled sessions, each sending up to 2,000 requests (its sends
	// block once the server stops reading it) and reading nothing.
	const stalled, requests = 100, 2000
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range stalled {
		c, err := dialSmallWindow(t, p, ops.token)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			for id := uint64(1); id <= requests; id++ {
				if c.Send(&pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id,
					Namespace: "service/big", Key: "k"}}}) != nil {
					return // the server stopped reading, and the write timed out
				}
			}
		}()
	}
	// The senders start together once all are dialed: the server writes
	// to none before began, so none of its writes can time out before
	// held, whatever the dials cost.
	began := time.Now()
	close(release)
	// Sample every 100 ms for up to 60 times, while no stalled session
	// can have ended, with a bystander's get each time.
	var peakRSS int64
	var slowest time.Duration
	held := began.Add(wstransport.DefaultWriteTimeout)
	answered := 0
	tick := time.NewTicker(100 * time.Millisecond)
	for range 60 {
		<-tick.C
		if time.Until(held) < wstransport.DefaultWriteTimeout/2 {
			break
		}
		rss, _ := procMemory(t, pid)
		peakRSS = max(peakRSS, rss)
		asked := time.Now()
		if r := by.getState("service/big", "k"); r.GetEntry() == nil {
			t.Fatalf("the bystander's get: %v", r)
		}
		slowest = max(slowest, time.Since(asked))
		if at := time.Now(); at.After(held) {
			t.Fatalf("the bystander's get asked %v after the senders started was answered %v after: only once a stalled session could have ended and freed its share",
				asked.Sub(began).Round(time.Millisecond), at.Sub(began).Round(time.Millisecond))
		}
		answered++
	}
	tick.Stop()
	if answered == 0 {
		t.Fatalf("no bystander get was asked within %v of the senders' start", wstransport.DefaultWriteTimeout/2)
	}
	_, hwm := procMemory(t, pid)
	t.Logf("%d stalled sessions, a %d-byte budget: resident %.1f MB before, peak sampled %.1f MB, VmHWM %.1f MB (bound: budget + %d MB = %.1f MB); %d bystander gets answered, the slowest in %v",
		stalled, budget, mb(base), mb(peakRSS), mb(hwm), overhead>>20, mb(budget+overhead), answered, slowest.Round(time.Millisecond))
	if !raceEnabled && hwm > budget+overhead {
		t.Errorf("peak resident %.1f MB exceeds the budget plus %d MB", mb(hwm), overhead>>20)
	}
	wg.Wait()

	// 1,000 idle authenticated sessions: what each costs.
	before, _ := procMemory(t, pid)
	const idle = 1000
	for range idle {
		if _, err := p.dial(ops.token); err != nil {
			t.Fatal(err)
		}
	}
	// A round trip on the bystander after the dials: every handshake is
	// served by then.
	by.getState("service/big", "k")
	after, _ := procMemory(t, pid)
	t.Logf("%d idle sessions: resident %.1f MB -> %.1f MB, %.1f KB each", idle, mb(before), mb(after), float64(after-before)/idle/1024)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// dialSmallWindow opens a WebSocket session as tok's principal over a
// connection whose receive buffer is 4 KiB, so a session that stops
// reading is felt by the server after a few tens of kilobytes, not after
// the kernel's autotuned megabytes.
func dialSmallWindow(t *testing.T, p *proc, tok string) (*wstransport.ClientConn, error) {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return errors.Join(err, serr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	hc := &http.Client{Timeout: guard, Transport: &http.Transport{DialContext: d.DialContext}}
	c, err := wstransport.Dial(ctx, p.start.URL, wstransport.DialOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}, HTTPClient: hc})
	if err == nil {
		t.Cleanup(func() { c.Abort() })
	}
	return c, err
}
