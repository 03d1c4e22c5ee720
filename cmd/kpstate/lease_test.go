package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// TestLeaseHold: a lease hold prints that it holds the key; a second one
// on the same key exits 1 naming the holder and when the lease expires;
// after SIGINT the first releases (the key is gone) and exits 0, and the
// second can then claim it. Without and with TLS, against the same
// golden files.
func TestLeaseHold(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[withTLS], func(t *testing.T) {
			t.Parallel()
			s := startVerbServer(t, withTLS)
			const ns, key = "service/transcoder-a", "leases/front-door-video"
			// An hour's TTL: no renewal (every 20 minutes) falls inside the
			// test, so the golden output holds none.
			hold := func(holder string, extra ...string) []string {
				return argv("lease", "hold", ns, key, "--ttl", "1h", "--holder", holder, "--token-file", s.opsTok, s.conn(), extra)
			}
			a := startVerb(t, nil, hold("transcoder-a-1")...)
			a.line() // holding ...

			code, out, errs := kpChild(t, nil, "", hold("transcoder-b-1")...)
			golden(t, "lease_held_by_another", code, out, errs)
			code, out, errs = kpChild(t, nil, "", hold("transcoder-b-1", "--json")...)
			golden(t, "lease_held_by_another_json", code, out, errs)

			a.signal(syscall.SIGINT)
			code, out = a.wait()
			golden(t, "lease_hold", code, out, a.errors())
			if code, _, errs := s.as(t, s.opsTok, "get", ns, key); code != exitRefused || !strings.Contains(errs, "NOT_FOUND") {
				t.Errorf("get after the release: exit %d, %q; want NOT_FOUND", code, errs)
			}

			// Released, it is free for the next.
			b := startVerb(t, nil, hold("transcoder-b-1", "--json")...)
			var held leaseLine
			if err := json.Unmarshal([]byte(b.line()), &held); err != nil || held.Event != "held" || held.Revision != 3 ||
				held.Entry == nil || string(held.Entry.Document) != `{"holder":"transcoder-b-1"}` || held.Entry.Schema != "keeppeek.worker-lease.v1" {
				t.Errorf("the second holder's held line: %+v, %v", held, err)
			}
			b.signal(syscall.SIGTERM)
			code, out = b.wait()
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != exitOK || len(lines) != 2 || lines[1] != `{"event":"released","namespace":"service/transcoder-a","key":"leases/front-door-video","revision":4}` {
				t.Errorf("the second holder after SIGTERM: exit %d, stdout %q, stderr %q", code, out, b.errors())
			}
		})
	}
}

// TestLeaseHoldRenewsAndSaysWhenLost: a hold renews on its own revision
// every third of the TTL, with its own document; when another writer
// deletes the key the next renewal is refused, and it says it lost the
// lease and exits 1. A hold whose server is gone exits 2 once the TTL
// since its last renewal has run out. Plain only: TestLeaseHold runs the
// verb under TLS.
func TestLeaseHoldRenewsAndSaysWhenLost(t *testing.T) {
	t.Parallel()
	s := startVerbServer(t, false)
	intent := writeFile(t, s.dir, "intent.json", intentDoc)
	hold := func(key, ttl string) []string {
		return argv("lease", "hold", "user/alice", key, "--ttl", ttl, "--schema", "keeppeek.media-intent.v1", "--file", intent,
			"--token-file", s.aliTok, s.conn())
	}
	v := startVerb(t, nil, hold("leases/editor", "3s")...)
	if l := v.line(); !strings.HasPrefix(l, "holding user/alice leases/editor at revision 1 (ttl 3s, expires ") || !strings.HasSuffix(l, "); renewing every 1s until SIGINT or SIGTERM") {
		t.Errorf("held line %q", l)
	}
	v.lineWith("renewed at revision 2 (expires ")
	code, out, _ := s.as(t, s.aliTok, "get", "user/alice", "leases/editor", "--json")
	var e entryJSON
	if err := json.Unmarshal([]byte(out), &e); code != exitOK || err != nil || e.Schema != "keeppeek.media-intent.v1" || string(e.Document) != intentDoc ||
		e.Owner != "alice" || e.Expires == "" || e.Revision < 2 {
		t.Errorf("the held entry: exit %d, %+v, %v", code, e, err)
	}
	if code, out, errs := s.as(t, s.aliTok, "delete", "user/alice", "leases/editor"); code != exitOK {
		t.Fatalf("delete: exit %d %s%s", code, out, errs)
	}
	code, _ = v.wait()
	errs := v.errors()
	if code != exitRefused || !strings.Contains(errs, "kpstate lease hold: lost the lease user/alice leases/editor: the renewal of revision ") ||
		!(strings.Contains(errs, "NOT_FOUND") || strings.Contains(errs, "CONFLICT")) {
		t.Errorf("after the delete: exit %d, stderr %q; want 1 saying the lease was lost", code, errs)
	}

	// The server goes away for good: once the TTL has run out since the
	// last renewal, the hold gives up.
	v = startVerb(t, nil, hold("leases/other", "2s")...)
	v.lineWith("holding user/alice leases/other")
	s.cmd.Process.Kill()
	s.wait()
	code, _ = v.wait()
	if errs := v.errors(); code != exitUsage || !strings.Contains(errs, "lost the lease user/alice leases/other: not renewed within its TTL 2s") {
		t.Errorf("without a server: exit %d, stderr %q; want 2 saying the TTL ran out", code, errs)
	}
}
