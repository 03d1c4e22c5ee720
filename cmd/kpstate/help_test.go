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
	verbs := [][]string{{"token", "new"}}
	for _, c := range commands {
		verbs = append(verbs, []string{c.Name})
	}
	for _, v := range verbs {
		code, out, errs := kp(t, append(v, "--help")...)
		name := strings.Join(v, " ")
		if code != exitOK || errs != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errs)
		}
		wants := []string{"Usage: kpstate " + name, "\nExamples:\n  kpstate " + name, "\nFlags:\n", "\nExit codes: 0 success, 1 the store refused"}
		if name == "token" { // a table of verbs: its usage lists them instead of flags
			wants = []string{"Usage: kpstate token <command>", "\nCommands:\n  new ", "\nExamples:\n  kpstate token new", "\nExit codes: 0 success, 1 the store refused"}
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", name, want, out)
			}
		}
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
		"[tls]", "cert_file", "key_file", "[limits]", "[[principal]]", "token_sha256", "SIGHUP", "SIGTERM", "--insecure"} {
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
