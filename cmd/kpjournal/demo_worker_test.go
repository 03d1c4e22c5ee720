package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"
)

// TestDemoWorker: the transcoder part of the demo claims, waits for the
// capability, publishes, writes status, and the standby takes over after
// the holder's lease lapses, in that order.
func TestDemoWorker(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	if err := demoWorker(dir, &out); err != nil {
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
