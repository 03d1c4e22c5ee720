package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// floodConns is the attack of issue 31: unauthenticated connections that
// send one request for a static path, read the answer and idle.
const floodConns = 2000

// floodOutcome is what one flooding connection saw.
type floodOutcome struct {
	status   int  // the HTTP status answered, 0 for none
	refusal  bool // a 503 body naming server.max_connections
	closed   bool // the server closed it afterwards
	lifetime time.Duration
}

// flood opens one connection to addr, asks for /healthz, calls answered,
// and waits for the server to close the connection, for at most wait.
func flood(addr string, wait time.Duration, answered func()) floodOutcome {
	var o floodOutcome
	defer answered() // also when there was no answer
	begin := time.Now()
	c, err := net.DialTimeout("tcp", addr, guard)
	if err != nil {
		return o
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return o
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return o
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.status = resp.StatusCode
	o.refusal = resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "server.max_connections")
	answered()
	// Idle until the server closes the connection.
	_, err = r.ReadByte()
	o.closed = errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
	o.lifetime = time.Since(begin)
	return o
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

// newestCheckpoint returns the journal index of the newest checkpoint file
// under dir, 0 if none.
func newestCheckpoint(t *testing.T, dir string) uint64 {
	t.Helper()
	var newest uint64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil {
			if i, ok := checkpoint.ParseName(d.Name()); ok && i > newest {
				newest = i
			}
		}
		return nil
	})
	return newest
}

// TestConnectionFloodNeverFailsACommit runs kpstate serve under a
// 1,024-descriptor limit (prlimit sets RLIMIT_NOFILE for the child alone)
// and floods it with 2,000 idle unauthenticated connections while a
// bystander session makes 12 KB compare-and-set writes, enough for
// background checkpoints, so the store opens files throughout. The cap
// derived from the limit holds: connections over it are answered 503
// naming server.max_connections, every accepted one is closed by the
// idle timeout, and every commit succeeds, none with STORAGE.
func TestConnectionFloodNeverFailsACommit(t *testing.T) {
	// Not parallel: 2,000 connections and a stream of fsyncs are the
	// machine's whole load, and the other tests' timing guards should not
	// share it.
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prlimit (util-linux) is needed")
		}
		t.Skip("prlimit (util-linux) is not installed")
	}
	dir := t.TempDir()
	ops := newPrincipal(t, "ops", true)
	const idle = 4 * time.Second
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops},
		extra: "\n[server]\nidle_timeout = \"" + idle.String() + "\"\n"}
	file := sc.write(t, dir)
	p := startServeCmd(t, exec.Command(prlimit, "--nofile=1024:1024", kpstateBin, "serve", "--json", "--config", file), nil)
	budget, _ := p.waitLog("connection budget")
	if budget["rlimit_nofile"] != float64(1024) {
		t.Fatalf("the server runs with RLIMIT_NOFILE %v, want 1024: %v", budget["rlimit_nofile"], budget)
	}
	capN := int(budget["max_connections"].(float64))
	t.Logf("under RLIMIT_NOFILE 1024: max_connections %d (%v descriptors open at the start, %v reserved)", capN, budget["open"], budget["reserved"])
	if capN >= floodConns || capN > 1024-64 {
		t.Fatalf("max_connections %d leaves the store fewer than 64 descriptors", capN)
	}

	bystander := p.mustDial(ops.token)
	r := bystander.put("service/bystander", "k", 0)
	if errCode(r) != 0 {
		t.Fatalf("first put: %v", r)
	}
	rev := r.GetEntry().GetRevision()
	before := newestCheckpoint(t, sc.dataDir)

	addr := strings.TrimPrefix(p.start.Endpoint, "ws://")
	outcomes := make(chan floodOutcome, floodConns)
	dialing := make(chan struct{}, 256) // connections being set up at once
	var wg sync.WaitGroup
	floodStart := time.Now()
	for range floodConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dialing <- struct{}{}
			var once sync.Once
			outcomes <- flood(addr, idle+guard, func() { once.Do(func() { <-dialing }) })
		}()
	}
	floodDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(floodDone)
	}()

	// The bystander's compare-and-set writes go on until the flood is
	// over, and at least 200 of them (2.4 MB of journal: checkpoints).
	// Paced, so the journal stays small: 50 writes a second.
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	giveUp := time.After(idle + 2*guard)
	var slowest time.Duration
	writes := 0
	for done := false; !done || writes < 200; writes++ {
		select {
		case <-floodDone:
			done = true
		case <-giveUp:
			t.Fatal("the flood did not end")
		case <-pace.C:
		}
		bystander.id++
		began := time.Now()
		a := bystander.call(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: bystander.id,
			Namespace: "service/bystander", Key: "k", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(12000, writes),
			ExpectedRevision: &rev}}})
		slowest = max(slowest, time.Since(began))
		if errCode(a) != 0 {
			t.Fatalf("compare-and-set %d during the flood: %v", writes, a.GetError())
		}
		rev = a.GetEntry().GetRevision()
	}
	close(outcomes)
	var served, refused, unanswered, closed, open int
	var longest time.Duration
	for o := range outcomes {
		switch {
		case o.status == http.StatusOK:
			served++
		case o.refusal:
			refused++
		default:
			unanswered++
		}
		if o.closed {
			closed++
			longest = max(longest, o.lifetime)
		} else if o.status != 0 {
			open++
		}
	}
	after := newestCheckpoint(t, sc.dataDir)
	t.Logf("%d connections in %v: %d served and idled, %d refused 503, %d closed unanswered; %d closed by the server (the longest lived %v), %d left open; "+
		"%d compare-and-set writes, the slowest %v; newest checkpoint at index %d (was %d)",
		floodConns, time.Since(floodStart).Round(time.Millisecond), served, refused, unanswered, closed, longest.Round(time.Millisecond), open,
		writes, slowest.Round(time.Millisecond), after, before)
	switch {
	case refused == 0:
		t.Errorf("no connection was refused: the flood never reached the cap of %d", capN)
	case served == 0:
		t.Errorf("no connection was served")
	case open > 0:
		t.Errorf("%d answered connections were not closed by the idle timeout", open)
	case after <= before:
		t.Errorf("no checkpoint was written during the flood: the store opened no file, so the test proves nothing")
	}
	p.mu.Lock()
	for _, rec := range p.records {
		if rec["level"] == "ERROR" {
			t.Errorf("the server logged an error during the flood: %v", rec)
		}
	}
	p.mu.Unlock()
	// The server still serves a new client.
	if code, _ := p.get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz after the flood: %d", code)
	}
}
