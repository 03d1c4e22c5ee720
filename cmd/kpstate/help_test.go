package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Every verb's --help (and help VERB) has its synopsis, Examples, flags
// and the exit codes.
func TestHelpOfEveryVerb(t *testing.T) {
	t.Parallel()
	verbs := [][]string{{"token", "new"}, {"lease", "hold"}, {"cluster", "status"}, {"cluster", "add-voter"}, {"cluster", "remove"}, {"cluster", "transfer-leader"}}
	for _, c := range commands {
		verbs = append(verbs, []string{c.Name})
	}
	// The verbs that are the store's clients, with the flags they share.
	clientVerbs := map[string]bool{"get": true, "put": true, "delete": true, "watch": true, "lease hold": true, "status": true,
		"cluster status": true, "cluster add-voter": true, "cluster remove": true, "cluster transfer-leader": true}
	for _, v := range verbs {
		code, out, errs := kp(t, append(v, "--help")...)
		name := strings.Join(v, " ")
		if code != exitOK || errs != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errs)
		}
		wants := []string{"Usage: kpstate " + name, "\nExamples:\n  kpstate " + name, "\nFlags:\n", "\nExit codes: 0 success, 1 the store refused"}
		if clientVerbs[name] {
			delete(clientVerbs, name)
			wants = append(wants, "--endpoints URL[,URL...]", "--token-file FILE", "--cacert FILE", "--timeout D", "--json",
				"\nExit codes: 0 success, 1 the store refused the request (", `with --json stdout carries {"error":{...}}`,
				"2 usage, connection or I/O error (a refused handshake shows the server's reason")
			// The paragraph, however it wraps, says where the token comes from.
			flat := strings.Join(strings.Fields(out), " ")
			for _, say := range []string{"$KPSTATE_ENDPOINTS", "read from --token-file or $KPSTATE_TOKEN, never from a flag's value, so it stays out of ps"} {
				if !strings.Contains(flat, say) {
					t.Errorf("%s --help does not say %q:\n%s", name, say, out)
				}
			}
		}
		if name == "token" || name == "lease" || name == "cluster" { // a table of verbs: its usage lists them instead of flags
			sub := map[string]string{"token": "new", "lease": "hold", "cluster": "status"}[name]
			wants = []string{"Usage: kpstate " + name + " <command>", "\nCommands:\n  " + sub + " ", "\nExamples:\n  kpstate " + name + " " + sub, "\nExit codes: 0 success, 1 the store refused"}
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", name, want, out)
			}
		}
	}
	if len(clientVerbs) > 0 {
		t.Errorf("client verbs missing from the table: %v", clientVerbs)
	}
	code, out, _ := kp(t, "--help")
	if code != exitOK || !strings.Contains(out, "Exit codes:\n  0  success\n  1  the store refused a request") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	for _, c := range commands {
		if !strings.Contains(out, "  "+c.Name+" ") {
			t.Errorf("--help does not list %s", c.Name)
		}
	}
	// serve's help names every configuration key.
	_, out, _ = kp(t, "help", "serve")
	for _, key := range []string{"data_dir", "listen", "metrics_listen", "inspector", "allowed_origins", "config_toml", "log_format", "log_level",
		"[tls]", "cert_file", "key_file", "[cluster]", "raft_listen", "rpc_listen", "[[cluster.peer]]", "[cluster.tls]", "ca_file", "[limits]", "[[principal]]", "token_sha256", "SIGHUP", "SIGTERM", "--insecure"} {
		if !strings.Contains(out, key) {
			t.Errorf("serve --help does not name %s", key)
		}
	}
}

// --version and the version verb print the build, naming the module.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errs := kp(t, args...)
		if code != exitOK || errs != "" || !strings.HasPrefix(out, "github.com/keeppeek/statestore ") || !strings.Contains(out, " revision=") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	out, err := exec.Command(kpstateBin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "github.com/keeppeek/statestore ") || !strings.Contains(string(out), " revision=") {
		t.Errorf("the built kpstate --version: %q, %v", out, err)
	}
}
