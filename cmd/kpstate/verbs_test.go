package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// The documents the verb tests write.
const (
	intentDoc  = `{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","priority":10,"recording_mode":"disabled"}`
	intentDoc2 = `{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","priority":50,"recording_mode":"disabled"}`
	prefsDoc   = `{"preferred_group":"living-room"}`
)

// argv joins strings and string slices into a new argument list.
func argv(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("argv: %T", p))
		}
	}
	return out
}

// TestClientVerbsOverTheWire runs get, put, delete and status in turn
// against kpstate serve, without and with TLS, as an administrator, as a
// plain principal and with a wrong token; each step's exit code and
// output are pinned (the same golden files for both: only the endpoint's
// scheme differs, and it is a placeholder).
func TestClientVerbsOverTheWire(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[withTLS], func(t *testing.T) {
			t.Parallel()
			s := startVerbServer(t, withTLS)
			intent := writeFile(t, s.dir, "intent.json", intentDoc+"\n")
			intent2 := writeFile(t, s.dir, "intent2.json", intentDoc2)
			prefs := writeFile(t, s.dir, "prefs.json", prefsDoc)
			wrong := s.tokenFile(t, "wrong", "not-a-token-of-this-server")
			const ns, key, leaseKey = "service/transcoder-a", "intents/front-door-video", "intents/back-door-video"
			mi := []string{"--schema", "keeppeek.media-intent.v1"}
			putIntent := argv("put", ns, key, "--file", intent, mi)
			steps := []struct {
				golden string // testdata/golden/verbs_GOLDEN.txt; "" checks the exit code and says only
				tok    string
				args   []string
				exit   int
				says   []string // on stderr
			}{
				{"put_create", s.opsTok, argv(putIntent, "--create"), exitOK, nil},
				{"put_create_conflict", s.opsTok, argv(putIntent, "--create"), exitRefused, []string{"CONFLICT", "expected_revision", "current revision 1"}},
				{"put_create_conflict_json", s.opsTok, argv(putIntent, "--create", "--json"), exitRefused, nil},
				{"put_if_revision_json", s.opsTok, argv("put", ns, key, "--file", intent2, "--if-revision", "1", "--json", mi), exitOK, nil},
				{"", s.opsTok, argv(putIntent, "--if-revision", "1"), exitRefused, []string{"CONFLICT", "current revision 2"}},
				{"get", s.opsTok, []string{"get", ns, key}, exitOK, nil},
				{"get_json", s.opsTok, []string{"get", ns, key, "--json"}, exitOK, nil},
				{"put_ttl", s.opsTok, argv("put", ns, leaseKey, "--file", intent, "--ttl", "30s", mi), exitOK, nil},
				{"", s.opsTok, []string{"delete", ns, key, "--if-revision", "1"}, exitRefused, []string{"CONFLICT", "current revision 2"}},
				{"delete", s.opsTok, []string{"delete", ns, key, "--if-revision", "2"}, exitOK, nil},
				{"delete_json", s.opsTok, []string{"delete", ns, leaseKey, "--json"}, exitOK, nil},
				{"get_not_found", s.opsTok, []string{"get", ns, key}, exitRefused, nil},
				// alice may not touch service/, but owns user/alice.
				{"denied_json", s.aliTok, argv(putIntent, "--json"), exitRefused, []string{"PERMISSION_DENIED", "field namespace"}},
				{"", s.aliTok, []string{"get", ns, key}, exitRefused, []string{"PERMISSION_DENIED"}},
				{"put_own", s.aliTok, []string{"put", "user/alice", "prefs", "--schema", "keeppeek.group-preference.v1", "--file", prefs}, exitOK, nil},
				{"", s.aliTok, []string{"put", "user/bob", "prefs", "--schema", "keeppeek.group-preference.v1", "--file", prefs}, exitRefused, []string{"PERMISSION_DENIED"}},
				{"", s.aliTok, []string{"get", "user/alice", "prefs"}, exitOK, nil},
				{"status", s.aliTok, []string{"status"}, exitOK, nil},
				{"status_json", s.aliTok, []string{"status", "--json"}, exitOK, nil},
				{"status_admin", s.opsTok, []string{"status"}, exitOK, nil},
				// A document the schema refuses changes nothing.
				{"", s.aliTok, []string{"put", "user/alice", "prefs", "--schema", "keeppeek.group-preference.v1", "--file", intent}, exitRefused, []string{"SCHEMA_INVALID"}},
				// A wrong token: the handshake is refused, with the server's reason.
				{"wrong_token", wrong, []string{"get", ns, key}, exitUsage, []string{"HTTP 401", "the token matches no principal of this server"}},
			}
			for i, st := range steps {
				code, out, errs := s.as(t, st.tok, st.args...)
				if code != st.exit {
					t.Errorf("step %d %q: exit %d, want %d\nstdout %s\nstderr %s", i, st.args, code, st.exit, out, errs)
				}
				for _, say := range st.says {
					if !strings.Contains(errs, say) {
						t.Errorf("step %d %q: stderr %q does not say %q", i, st.args, errs, say)
					}
				}
				if strings.Contains(out+errs, s.ops.token) || strings.Contains(out+errs, s.alice.token) {
					t.Errorf("step %d %q printed a token", i, st.args)
				}
				if st.golden != "" {
					golden(t, "verbs_"+st.golden, code, out, errs)
				}
			}
			// The refused writes changed nothing: alice's entry is her one
			// put, the CONFLICTs left the intent at revision 2 before its
			// deletion (the revisions above say so), and --json's JSON parses.
			code, out, _ := s.as(t, s.aliTok, "get", "user/alice", "prefs", "--json")
			var e entryJSON
			if err := json.Unmarshal([]byte(out), &e); code != exitOK || err != nil || e.Revision != 1 || e.Owner != "alice" || string(e.Document) != prefsDoc {
				t.Errorf("alice's entry: exit %d, %+v, %v", code, e, err)
			}
			if withTLS {
				// Without --cacert the server's certificate is not trusted.
				code, _, errs := kp(t, "status", "--endpoints", s.start.Endpoint, "--token-file", s.opsTok)
				if code != exitUsage || !strings.Contains(errs, "certificate signed by unknown authority") {
					t.Errorf("status without --cacert: exit %d, %q", code, errs)
				}
			}
		})
	}
}

// TestClientVerbsTokenAndEndpointSources: the token comes from
// --token-file or $KPSTATE_TOKEN (the file first), the endpoints from
// --endpoints or $KPSTATE_ENDPOINTS, tried in turn; put - reads stdin.
// The built binary runs them, each with only the environment given.
func TestClientVerbsTokenAndEndpointSources(t *testing.T) {
	t.Parallel()
	s := startVerbServer(t, true)
	down := "ws://127.0.0.1:1" // nothing listens on port 1
	ca := []string{"--cacert", s.tls.caFile}
	okEnv := []string{envEndpoints + "=" + s.start.Endpoint, envToken + "=" + s.alice.token}
	cases := []struct {
		name  string
		env   []string
		stdin string
		args  []string
		exit  int
		says  string // on stdout for exit 0, else on stderr
	}{
		{"env token and endpoints, stdin", okEnv, prefsDoc, []string{"put", "user/alice", "prefs", "--schema", "keeppeek.group-preference.v1", "-"}, exitOK, "user/alice prefs: revision 1\n"},
		{"the file before the env", []string{envEndpoints + "=" + s.start.Endpoint, envToken + "=wrong"}, "",
			[]string{"get", "user/alice", "prefs", "--token-file", s.aliTok}, exitOK, "owner:     alice\n"},
		{"env token wrong", []string{envEndpoints + "=" + s.start.Endpoint, envToken + "=wrong"}, "",
			[]string{"get", "user/alice", "prefs"}, exitUsage, "the token matches no principal"},
		{"no token", []string{envEndpoints + "=" + s.start.Endpoint}, "", []string{"status"}, exitUsage, "no token: give --token-file FILE or set $KPSTATE_TOKEN"},
		{"the next endpoint", []string{envEndpoints + "=" + down + "," + s.start.Endpoint, envToken + "=" + s.alice.token}, "",
			[]string{"status", "--json"}, exitOK, `"principal":"alice"`},
		{"the flag before the env", []string{envEndpoints + "=" + down, envToken + "=" + s.alice.token}, "",
			[]string{"status", "--endpoints", s.start.Endpoint}, exitOK, "principal:    alice\n"},
		{"no server", []string{envEndpoints + "=" + down, envToken + "=" + s.alice.token}, "", []string{"status"}, exitUsage, "dial ws://127.0.0.1:1"},
		{"default endpoint", []string{envToken + "=" + s.alice.token}, "", []string{"status", "--timeout", "2s"}, exitUsage, "ws://127.0.0.1:8765"},
	}
	for _, c := range cases {
		args := argv(c.args)
		if !strings.Contains(c.name, "no server") && !strings.Contains(c.name, "default") {
			args = append(args, ca...)
		}
		code, out, errs := kpChild(t, c.env, c.stdin, args...)
		where := errs
		if c.exit == exitOK {
			where = out
		}
		if code != c.exit || !strings.Contains(where, c.says) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d with %q", c.name, code, out, errs, c.exit, c.says)
		}
	}
}

// TestClientVerbUsageErrors: bad flags and arguments exit 2 with the
// problem on stderr and nothing on stdout, before anything is sent (the
// endpoint is one where nothing listens, so a verb that dialled would
// say so instead).
func TestClientVerbUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := writeFile(t, dir, "tok", "a-token\n")
	doc := writeFile(t, dir, "doc.json", prefsDoc)
	empty := writeFile(t, dir, "empty", "\n")
	notPEM := writeFile(t, dir, "ca.pem", "not a certificate")
	twoLines := writeFile(t, dir, "ops.txt", "a-token\n[[principal]]\nid = \"ops\"\n")
	conn := []string{"--endpoints", "ws://127.0.0.1:1", "--token-file", tok}
	put := []string{"put", "user/a", "k", "--schema", "s"}
	cases := []struct {
		args []string
		says string
	}{
		{argv(put, "--file", doc, "--create", "--if-revision", "3"), "--create and --if-revision are exclusive"},
		{argv(put, "--file", doc, "--create", "--if-revision", "0"), "--create and --if-revision are exclusive"},
		{[]string{"put", "user/a", "k", "--file", doc}, "--schema is required"},
		{put, "the document: give --file F, or - to read stdin"},
		{argv(put, "--file", doc, "-"), "--file and - are two documents"},
		{argv(put, "--file", doc, "x"), `unexpected argument "x"`},
		{argv(put, "--file", doc, "--ttl", "-1s"), "--ttl -1s"},
		{[]string{"put", "user/a"}, "argument(s) missing"},
		{[]string{"get", "user/a"}, "1 argument(s) missing: get NS KEY"},
		{[]string{"get", "user/a", "k", "extra"}, `unexpected argument "extra"`},
		{[]string{"get", "user/a", "k", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
		{[]string{"get", "user/a", "k", "--token", "a-token"}, "unknown flag: --token"},
		{[]string{"delete", "user/a", "k", "--if-revision", "x"}, "--if-revision"},
		{[]string{"status", "extra"}, `unexpected argument "extra"`},
		{[]string{"watch"}, "1 argument(s) missing"},
		{[]string{"watch", "user/a", "--count", "-1"}, "--count -1: want 0 or more"},
		{[]string{"lease", "hold", "user/a", "k"}, "--ttl is required"},
		{[]string{"lease", "hold", "user/a", "k", "--ttl", "5s", "--schema", "s"}, "--schema and --file go together"},
		{[]string{"lease", "hold", "user/a", "k", "--ttl", "5s", "--file", doc}, "--schema and --file go together"},
		{[]string{"lease", "hold", "user/a", "k", "--ttl", "5s", "--file", doc, "--schema", "s", "--holder", "h"}, "--holder names the holder in the default document"},
		{[]string{"lease", "frobnicate"}, `kpstate lease: unknown command "frobnicate"`},
		// The inputs the verbs read before dialling, named with the flag.
		{[]string{"get", "user/a", "k", "--token-file", filepath.Join(dir, "nope")}, "--token-file " + filepath.Join(dir, "nope") + ": open"},
		{[]string{"get", "user/a", "k", "--token-file", empty}, "--token-file " + empty + ": the file is empty"},
		{[]string{"get", "user/a", "k", "--token-file", twoLines}, "the file must hold the token alone"},
		{[]string{"get", "user/a", "k", "--cacert", notPEM}, "--cacert " + notPEM + ": no PEM certificate in the file"},
		{[]string{"get", "user/a", "k", "--endpoints", "ftp://127.0.0.1:1"}, "ftp://127.0.0.1:1"},
		{argv(put, "--file", filepath.Join(dir, "nope.json")), "--file " + filepath.Join(dir, "nope.json") + ": open"},
	}
	for _, c := range cases {
		// The verb's words, conn, then the case's flags: a case's own
		// --token-file or --endpoints comes later and wins.
		n := 1
		if c.args[0] == "lease" {
			n = 2
		}
		args := argv(c.args[:n], conn, c.args[n:])
		code, out, errs := kp(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.says) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", args, code, out, errs, c.says)
		}
		if strings.Contains(errs, "dial ws://127.0.0.1:1") {
			t.Errorf("%q dialled before refusing", args)
		}
	}
}
