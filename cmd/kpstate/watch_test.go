package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWatchVerb: kpstate watch prints the snapshot, then the updates
// other verbs make, in order, and only those under its prefix; it exits 0
// after --count updates, on SIGINT and on SIGTERM. Without and with TLS,
// against the same golden files.
func TestWatchVerb(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[withTLS], func(t *testing.T) {
			t.Parallel()
			s := startVerbServer(t, withTLS)
			intent := writeFile(t, s.dir, "intent.json", intentDoc)
			const ns = "service/transcoder-a"
			run := func(a ...any) {
				t.Helper()
				if code, out, errs := s.as(t, s.opsTok, argv(a...)...); code != exitOK {
					t.Fatalf("%q: exit %d\n%s%s", argv(a...), code, out, errs)
				}
			}
			put := func(key string, extra ...string) {
				t.Helper()
				run("put", ns, key, "--schema", "keeppeek.media-intent.v1", "--file", intent, extra)
			}
			put("intents/a")
			put("intents/b")
			put("other/x") // outside the prefix: in no snapshot
			watch := argv("watch", ns, "--prefix", "intents/", "--token-file", s.opsTok, s.conn())
			counted := startVerb(t, nil, argv(watch, "--count", "3")...)
			asJSON := startVerb(t, nil, argv(watch, "--json")...)
			interrupted := startVerb(t, nil, watch...)
			// Each has its watch once it printed its snapshot (a line, then
			// one per entry).
			for _, v := range []*verbProc{counted, asJSON, interrupted} {
				for range 3 {
					v.line()
				}
			}
			put("intents/c")
			put("other/y")
			run("delete", ns, "intents/a")
			put("intents/b", "--if-revision", "2")

			code, out := counted.wait()
			golden(t, "watch", code, out, counted.errors())
			for range 3 {
				asJSON.lineWith(`{"event":"update"`)
			}
			asJSON.signal(syscall.SIGTERM)
			code, out = asJSON.wait()
			golden(t, "watch_json", code, out, asJSON.errors())
			for range 3 {
				interrupted.lineWith("update ")
			}
			interrupted.signal(syscall.SIGINT)
			code, out = interrupted.wait()
			golden(t, "watch", code, out, interrupted.errors()) // the same as --count's
		})
	}
}

// TestWatchResnapshotsAfterServerRestart: the server is SIGKILLed and
// started again on the same address and data_dir; the watch says it
// re-snapshots and why, prints the new snapshot, and goes on with the
// updates made after it.
func TestWatchResnapshotsAfterServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ops := newPrincipal(t, "ops", true)
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops}}
	p := startServe(t, sc.write(t, dir), nil)
	tok := writeFile(t, dir, "ops.token", ops.token)
	intent := writeFile(t, dir, "intent.json", intentDoc)
	conn := []string{"--endpoints", p.start.Endpoint, "--token-file", tok}
	put := func(key string) {
		t.Helper()
		a := argv("put", "service/a", key, "--schema", "keeppeek.media-intent.v1", "--file", intent, conn)
		if code, out, errs := kp(t, a...); code != exitOK {
			t.Fatalf("%q: exit %d\n%s%s", a, code, out, errs)
		}
	}
	put("intents/a")
	w := startVerb(t, nil, argv("watch", "service/a", "--count", "2", conn)...)
	w.lineWith("  revision 1 key intents/a")
	put("intents/b")
	w.lineWith("update 1 PUT revision 2 key intents/b")

	p.cmd.Process.Kill()
	p.wait()
	sc.listen = strings.TrimPrefix(p.start.Endpoint, "ws://")
	startServe(t, sc.write(t, dir), nil)
	w.lineWith("resnapshot ")
	w.lineWith("  revision 2 key intents/b")
	// Written once the watch is back: an update, not in the snapshot.
	put("intents/c")
	code, out := w.wait()
	// stderr has the client's reconnection attempts, as many as it took.
	golden(t, "watch_restart", code, out, "")
	if errs := w.errors(); !strings.Contains(errs, "state store connection lost") {
		t.Errorf("watch's stderr does not report the lost connection:\n%s", errs)
	}
}
