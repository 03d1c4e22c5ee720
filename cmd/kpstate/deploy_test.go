package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unitFile is a systemd unit as the test reads it: each section's keys,
// with every value a repeated key was given, in order.
type unitFile map[string]map[string][]string

// readUnit reads the INI shape of a systemd unit: [Section] headers,
// KEY=VALUE lines, '#' and ';' comments. (Line continuations are not
// used by deploy/kpstate.service, and refused.)
func readUnit(t *testing.T, file string) unitFile {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: a continued line", file, n)
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is no KEY=VALUE in a section", file, n, line)
			}
			key = strings.TrimSpace(key)
			u[section][key] = append(u[section][key], strings.TrimSpace(value))
		}
	}
	return u
}

// TestDeployUnitAndExample holds deploy/ together: the unit runs
// kpstate serve on the example's install location, its StateDirectory is
// the example's data_dir, its hardening is in place, and the example
// loads (its TLS files need not exist: loading does not open them), with
// its commented principal usable once uncommented.
func TestDeployUnitAndExample(t *testing.T) {
	t.Parallel()
	deploy := filepath.Join("..", "..", "deploy")
	u := readUnit(t, filepath.Join(deploy, "kpstate.service"))
	svc := u["Service"]
	one := func(key string) string {
		t.Helper()
		if len(svc[key]) != 1 {
			t.Fatalf("[Service] %s is set %d times, want once", key, len(svc[key]))
		}
		return svc[key][0]
	}
	cfgDir := filepath.Join("/etc", one("ConfigurationDirectory"))
	installed := filepath.Join(cfgDir, "kpstate.toml")
	exec := strings.Fields(one("ExecStart"))
	if len(exec) != 4 || filepath.Base(exec[0]) != "kpstate" || exec[1] != "serve" || exec[2] != "--config" || exec[3] != installed {
		t.Errorf("ExecStart %q, want kpstate serve --config %s", exec, installed)
	}
	if one("ExecReload") != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload %q does not send SIGHUP", one("ExecReload"))
	}
	want := map[string]string{
		"User": "kpstate", "Group": "kpstate", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"SystemCallFilter": "@system-service", "Restart": "on-failure", "KillSignal": "SIGTERM",
	}
	for key, value := range want {
		if got := one(key); got != value {
			t.Errorf("[Service] %s=%q, want %q", key, got, value)
		}
	}
	if one("TimeoutStopSec") == "" {
		t.Error("[Service] TimeoutStopSec is empty")
	}
	stateDir := filepath.Join("/var/lib", one("StateDirectory"))
	for _, p := range svc["ReadWritePaths"] {
		if p != stateDir {
			t.Errorf("ReadWritePaths=%s: only the state directory may be writable", p)
		}
	}
	if u["Install"]["WantedBy"] == nil {
		t.Error("no [Install] WantedBy")
	}

	example := filepath.Join(deploy, "kpstate.example.toml")
	cfg, err := loadConfig(example)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if cfg.DataDir != stateDir {
		t.Errorf("the example's data_dir %s is not the unit's StateDirectory %s", cfg.DataDir, stateDir)
	}
	for _, f := range []string{cfg.TLS.CertFile, cfg.TLS.KeyFile} {
		if filepath.Dir(f) != cfgDir {
			t.Errorf("the example's TLS file %s is not in the unit's ConfigurationDirectory %s", f, cfgDir)
		}
	}
	if err := cfg.checkExposure(false); err != nil {
		t.Errorf("the example would be refused: %v", err)
	}
	if err := cfg.checkHosts(); err != nil {
		t.Errorf("the example would be refused: %v", err)
	}
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "install as "+installed) {
		t.Errorf("the example does not say to install it as %s, where ExecStart reads it", installed)
	}
	// Its principal, uncommented, is an administrator with a valid hash.
	for _, line := range []string{"# [[principal]]", "# id = ", "# admin = ", "# token_sha256 = "} {
		text = strings.Replace(text, line, line[2:], 1)
	}
	file := filepath.Join(t.TempDir(), "kpstate.toml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = loadConfig(file)
	if err != nil || len(cfg.Principals) != 1 || !cfg.Principals[0].Admin {
		t.Fatalf("the example with its principal uncommented: %+v, %v", cfg, err)
	}
	// Its [cluster], uncommented, loads as three peers under mutual TLS,
	// and passes the exposure rule without --insecure.
	begin, end := strings.Index(text, "# BEGIN cluster example"), strings.Index(text, "# END cluster example")
	if begin < 0 || end < begin {
		t.Fatal("the example has no [cluster] block between # BEGIN and # END cluster example")
	}
	var lines []string
	for line := range strings.SplitSeq(text[begin:end], "\n") {
		if rest, ok := strings.CutPrefix(line, "# "); ok && !strings.HasPrefix(line, "# BEGIN") {
			line = rest
		}
		lines = append(lines, line)
	}
	text = text[:begin] + strings.Join(lines, "\n") + text[end:]
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = loadConfig(file)
	if err != nil || cfg.Cluster == nil || len(cfg.Cluster.Peers) != 3 || !cfg.Cluster.tlsEnabled() {
		t.Fatalf("the example with its [cluster] uncommented: %+v, %v", cfg, err)
	}
	if err := cfg.checkExposure(false); err != nil {
		t.Errorf("the example's [cluster] would be refused: %v", err)
	}
}
