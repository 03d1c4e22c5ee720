package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// logList is a log record's list attribute as strings.
func logList(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// wantClosed checks that s's next message closes watchID with reason.
func wantClosed(t *testing.T, s *session, watchID string, reason pb.StateStoreWatchCloseReason) {
	t.Helper()
	if cl := s.mustRecv().GetWatchClosed(); cl.GetWatchId() != watchID || cl.GetReason() != reason {
		t.Fatalf("got closure %v, want %s closed %v", cl, watchID, reason)
	}
}

// TestServeReloadsPrincipalsOnSIGHUP edits the configuration of a running
// server and sends SIGHUP: a removed principal's session hears
// AUTHORIZATION_LOST and is closed; one whose admin flag was withdrawn
// keeps its session with its new rights; the others go on; the keys that
// need a restart are named; and a configuration that does not load
// changes nothing.
func TestServeReloadsPrincipalsOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ops, alice, bob, carol := newPrincipal(t, "ops", true), newPrincipal(t, "alice", false), newPrincipal(t, "bob", false), newPrincipal(t, "carol", true)
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{ops, alice, bob, carol}}
	file := sc.write(t, dir)
	p := startServe(t, file, nil)

	a, b, c := p.mustDial(alice.token), p.mustDial(bob.token), p.mustDial(carol.token)
	for _, w := range []struct {
		s      *session
		id, ns string
	}{{a, "own", "user/alice"}, {b, "own", "user/bob"}, {c, "svc", "service/a"}, {c, "own", "user/carol"}} {
		if r := w.s.watch(w.id, w.ns); r.GetWatch() == nil {
			t.Fatalf("watch %s: %v", w.ns, r)
		}
	}

	// alice goes, carol is no longer an administrator; two keys that need
	// a restart change too.
	carol.entry = strings.Replace(carol.entry, "admin = true", "admin = false", 1)
	sc.principals = []principal{ops, bob, carol}
	sc.inspector = true
	sc.extra = "\n[limits]\nmax_watches = 99\n"
	sc.write(t, dir)
	p.signal(syscall.SIGHUP)
	restart, _ := p.waitLog("reload: these keys changed and need a restart; they keep their running values")
	if got := logList(restart["keys"]); !slices.Equal(got, []string{"inspector", "limits.max_watches"}) {
		t.Errorf("keys needing a restart: %v", got)
	}
	done, _ := p.waitLog("principals reloaded")
	if removed, changed := logList(done["removed"]), logList(done["admin_changed"]); !slices.Equal(removed, []string{"alice"}) || !slices.Equal(changed, []string{"carol"}) {
		t.Errorf("reload log %v", done)
	}

	// alice: the closure, then the end of the connection (1008).
	wantClosed(t, a, "own", reasonAuthLost)
	if _, err := a.recv(); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("alice's session read %v after the closure, want the connection closed 1008", err)
	}
	_, err := p.dial(alice.token)
	var de *wstransport.DialError
	if !errors.As(err, &de) || de.Status != http.StatusUnauthorized {
		t.Fatalf("alice's token after the reload: %v, want HTTP 401", err)
	}
	// carol: her service/ watch closed, her session goes on without
	// service/ and with her own namespace.
	wantClosed(t, c, "svc", reasonAuthLost)
	if r := c.put("service/a", "k", 1); errCode(r) != codeDenied {
		t.Errorf("carol's put on service/ after the reload: %v, want PERMISSION_DENIED", r)
	}
	if r := c.put("user/carol", "k", 1); r.GetEntry().GetRevision() != 1 {
		t.Errorf("carol's put on user/carol: %v", r)
	}
	if u := c.mustRecv().GetWatchUpdate(); u.GetWatchId() != "own" || u.GetWatchSequence() != 1 {
		t.Errorf("carol's own watch got %v, want update 1", u)
	}
	// bob is untouched.
	if r := b.put("user/bob", "k", 1); r.GetEntry().GetRevision() != 1 {
		t.Errorf("bob's put: %v", r)
	}
	if u := b.mustRecv().GetWatchUpdate(); u.GetWatchSequence() != 1 {
		t.Errorf("bob's watch got %v, want update 1", u)
	}

	// A configuration that does not load changes nothing: bob keeps his
	// session and his token, alice stays refused.
	if err := os.WriteFile(file, []byte("data_dir = \"data\"\nlisten = \"127.0.0.1:0\"\n\n[[principal]]\nid = \"alice\"\ntoken_sha256 = \"not-a-hash\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.signal(syscall.SIGHUP)
	refused, _ := p.waitLog("reload refused: the configuration does not load; nothing changed")
	if msg := fmt.Sprint(refused["err"]); !strings.Contains(msg, "principal[0].token_sha256") {
		t.Errorf("the refused reload logs %q, want the field named", msg)
	}
	if r := b.put("user/bob", "k", 2); r.GetEntry().GetRevision() != 2 {
		t.Errorf("bob's put after the refused reload: %v", r)
	}
	if u := b.mustRecv().GetWatchUpdate(); u.GetWatchSequence() != 2 {
		t.Errorf("bob's watch got %v, want update 2", u)
	}
	p.mustDial(bob.token)
	if _, err := p.dial(alice.token); !errors.As(err, &de) || de.Status != http.StatusUnauthorized {
		t.Errorf("alice's token after the refused reload: %v, want HTTP 401", err)
	}
	// The server logged alice's end, with why.
	p.findLog("session ended", func(rec map[string]any) bool {
		return rec["principal"] == "alice" && strings.Contains(fmt.Sprint(rec["err"]), "removed from the server's configuration")
	})
}
