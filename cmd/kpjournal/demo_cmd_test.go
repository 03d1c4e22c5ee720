package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/demo"
)

func TestDemoMetricsListenRefusesBadAddr(t *testing.T) {
	t.Parallel()
	code, _, errs := kp(t, "demo", "--metrics-listen", "nonsense")
	if code != exitUsage || !strings.Contains(errs, "--metrics-listen") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestDemoServesMetrics runs the demo with --metrics-listen on an
// ephemeral loopback port, scrapes /metrics over HTTP once the demo is
// done and lingering, and checks the demo's own writes show, then ends the
// linger as Ctrl-C would.
func TestDemoServesMetrics(t *testing.T) {
	// Serial: it swaps the package-level stopContext.
	if testing.Short() {
		t.Skip("the demo waits for a lease to lapse")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	orig := stopContext
	stopContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	defer func() { stopContext = orig }()

	pr, pw := io.Pipe()
	var errb bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"demo", "--metrics-listen", ":0"}, pw, &errb)
		pw.Close()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var url string
	for url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended before serving metrics: exit %d, stderr %s", <-exit, errb.String())
			}
			if _, rest, found := strings.Cut(line, "serving metrics on "); found {
				url, _, _ = strings.Cut(rest, " ")
			}
		case <-time.After(time.Minute):
			t.Fatal("no 'serving metrics' line within a minute")
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("a bare :0 must listen on loopback only, got %s", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The demo's last store is the reopened one: open, holding the
	// demo's entries in one namespace (how many depends on whether the
	// demo's 1 s lease lapsed before the reopen), with its listing watch,
	// and one lease renewal committed before the serving line.
	for _, want := range []string{
		"keeppeek_state_store_open 1\n",
		"keeppeek_state_store_namespaces 1\n",
		"keeppeek_state_store_watches_added_total 1\n",
		"keeppeek_state_store_writes_committed_total 1\n",
		"keeppeek_state_store_commit_duration_seconds_count 1\n",
		"# TYPE keeppeek_state_store_commit_duration_seconds histogram\n",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
	cancel()
	for range lines {
	}
	if code := <-exit; code != exitOK {
		t.Fatalf("demo exit %d: %s", code, errb.String())
	}
}

// TestDemoWorker: the transcoder part of the demo claims, waits for the
// capability, publishes, writes status, and the standby takes over after
// the holder's lease lapses, in that order.
func TestDemoWorker(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	dir := t.TempDir()
	if err := demo.Worker(dir, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	order := regexp.MustCompile(`(?s)worker-1: claimed.*worker-1: waiting.*source "front-door" has no session` +
		`.*worker-2: standby.*held by transcoder-worker-1.*worker-1: bound.*status/transcoder-worker-1/\S+: active` +
		`.*stops renewing.*worker-2: claimed.*worker-2: bound.*status/transcoder-worker-2/\S+: active`)
	if !order.Match(out.Bytes()) {
		t.Fatalf("demo output out of order:\n%s", out.String())
	}
	// The store the workers wrote (leases, observed status) verifies: the
	// tools know the worker packages' schemas.
	if code, stdout, stderr := kp(t, "verify", "--dir", filepath.Join(dir, "worker-demo")); code != exitOK {
		t.Fatalf("verify of the worker store: exit %d\n%s%s", code, stdout, stderr)
	}
}
