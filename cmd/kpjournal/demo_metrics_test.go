package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMetricsAddr(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: ":9464", want: "127.0.0.1:9464"},
		{in: ":0", want: "127.0.0.1:0"},
		{in: "127.0.0.1:9464", want: "127.0.0.1:9464"},
		{in: "0.0.0.0:9464", want: "0.0.0.0:9464"},
		{in: "[::1]:9464", want: "[::1]:9464"},
		{in: "9464", bad: true},
		{in: "", bad: true},
	}
	for _, c := range cases {
		got, err := metricsAddr(c.in)
		switch {
		case c.bad && (err == nil || !strings.Contains(err.Error(), "--metrics-listen")):
			t.Errorf("metricsAddr(%q) = %q, %v; want an error naming --metrics-listen", c.in, got, err)
		case !c.bad && (err != nil || got != c.want):
			t.Errorf("metricsAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestDemoMetricsListenRefusesBadAddr(t *testing.T) {
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
