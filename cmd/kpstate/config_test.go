package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keeppeek/statestore/quota"
)

// TestConfigRefusals loads each bad configuration under testdata/config:
// the error names the file, the field (and for parse errors the line) and
// the problem.
func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		want string // the error's text after "FILE"
	}{
		{"no-data-dir.toml", ": data_dir: required"},
		{"no-listen.toml", ": listen: required"},
		{"listen-no-port.toml", `: listen: "8765": want HOST:PORT`},
		{"metrics-listen-bad-port.toml", `: metrics_listen: "127.0.0.1:http": the port is not a number`},
		{"unknown-key.toml", ":3: lisen: unknown key"},
		{"unknown-limit.toml", ":6: limits.max_wachtes: unknown key"},
		{"unknown-principal-key.toml", ":7: principal.admn: unknown key"},
		{"wrong-type.toml", ":3: inspector: toml: cannot decode TOML string into struct field"},
		{"syntax.toml", ":3: toml: unexpected character"},
		{"bad-duration.toml", `:5: limits.ack_deadline: `},
		{"bad-log-format.toml", `: log_format: "xml": want "text" or "json"`},
		{"bad-log-level.toml", `: log_level: "loud": want debug, info, warn or error`},
		{"bad-origin.toml", `: allowed_origins[0]: "[bad" is not a host pattern`},
		{"bad-host.toml", `: allowed_hosts[1]: "a/b" is not a host name pattern or an IP address`},
		{"tls-cert-only.toml", ": tls.key_file: required with tls.cert_file"},
		{"tls-key-only.toml", ": tls.cert_file: required with tls.key_file"},
		{"principal-no-id.toml", ": principal[1].id: required"},
		{"principal-bad-id.toml", `: principal[1].id: "bad/id": want letters, digits`},
		{"principal-server-id.toml", `: principal[1].id: "keeppeek-server" is the server's own principal`},
		{"principal-duplicate-id.toml", `: principal[1].id: "ops" is already principal[0]'s`},
		{"principal-no-hash.toml", ": principal[1].token_sha256: required"},
		{"principal-upper-hash.toml", ": principal[2].token_sha256: want 64 lowercase hexadecimal digits, the SHA-256 of the token: character 1 is 'E'"},
		{"principal-short-hash.toml", ": principal[1].token_sha256: want 64 lowercase hexadecimal digits, the SHA-256 of the token: got 40 characters"},
		{"principal-duplicate-hash.toml", ": principal[1].token_sha256: also principal[0]'s"},
		{"server-negative-connections.toml", ": server.max_connections: -1 is negative"},
		{"server-negative-idle.toml", ": server.idle_timeout: -1s is negative"},
	}
	listed := map[string]bool{"good.toml": true}
	for _, c := range cases {
		listed[c.file] = true
		file := filepath.Join("testdata", "config", c.file)
		_, err := loadConfig(file)
		var ce *configError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), file+c.want) {
			t.Errorf("%s: loadConfig = %v; want an error starting %q", c.file, err, file+c.want)
		}
	}
	// Every file under testdata/config is a case: none is left unchecked.
	entries, _ := os.ReadDir(filepath.Join("testdata", "config"))
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("testdata/config/%s has no case", e.Name())
		}
	}
	if _, err := loadConfig(filepath.Join(t.TempDir(), "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}

// TestConfigLoadsEveryKey: good.toml sets every key; each lands where the
// server reads it, relative paths resolved against the file's directory.
func TestConfigLoadsEveryKey(t *testing.T) {
	t.Parallel()
	file := filepath.Join("testdata", "config", "good.toml")
	c, err := loadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "config")
	if c.DataDir != filepath.Join(dir, "data") || c.Listen != "127.0.0.1:8765" || c.MetricsListen != "127.0.0.1:9464" || !c.Inspector ||
		!slices.Equal(c.AllowedOrigins, []string{"app.example.com", "*.example.net"}) || !slices.Equal(c.AllowedHosts, []string{"state.example.com", "192.0.2.7"}) || c.ConfigTOML != "/etc/keeppeek/config.toml" ||
		c.LogFormat != "json" || c.level.String() != "DEBUG" || c.TLS.CertFile != "/etc/kpstate/cert.pem" || c.TLS.KeyFile != filepath.Join(dir, "key.pem") {
		t.Errorf("loaded %+v", c)
	}
	if c.Server != (serverSection{MaxConnections: 500, MaxSessionsPerPrincipal: 40, IdleTimeout: duration(45 * time.Second),
		SessionIdleTimeout: duration(10 * time.Minute), MaxQueuedBytes: 8 << 20,
		MemoryLimit: 128 << 20}) || c.idleTimeout() != 45*time.Second {
		t.Errorf("[server] loaded as %+v", c.Server)
	}
	if c.memoryLimit() != 128<<20 {
		t.Errorf("memory_limit %d", c.memoryLimit())
	}
	if got := (&config{Limits: limitsConfig{MaxTotalBytes: 1 << 20}, Server: serverSection{MaxQueuedBytes: 4 << 20}}).memoryLimit(); got != 70<<20 {
		t.Errorf("the derived memory limit is %d, want 2 x 1 MiB + 4 MiB + 64 MiB", got)
	}
	if (&config{}).idleTimeout() != defaultIdleTimeout {
		t.Errorf("idle_timeout's default is not applied")
	}
	want := quota.Limits{MaxNamespaces: 10, MaxEntriesPerNamespace: 11, MaxTotalBytes: 12, MaxDocumentBytes: 13, MaxNamespaceBytes: 14,
		MaxKeyBytes: 15, MaxSnapshotEntries: 16, MaxSnapshotBytes: 17, MaxUnackedUpdates: 18, AckDeadline: 19 * time.Second, MaxWatches: 20,
		MaxWatchesPerSession: 21, MaxWatchesPerPrincipal: 22, MinTTL: 2 * time.Second, MaxTTL: 90 * time.Minute}
	if got := c.limits(); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
	ps := c.tokenPrincipals()
	if len(ps) != 2 || ps[0].Principal.ID != "ops" || !ps[0].Principal.Admin || ps[1].Principal.ID != "alice" || ps[1].Principal.Admin ||
		ps[0].Hash.String() != c.Principals[0].TokenSHA256 {
		t.Errorf("principals %+v", ps)
	}
}

// TestEveryLimitHasAKey holds [limits] to quota.Limits: each field of
// quota.Limits has the key its name gives in snake_case, and limits()
// carries the key's value into that field.
func TestEveryLimitHasAKey(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`([a-z0-9])([A-Z])`)
	lt := reflect.TypeOf(quota.Limits{})
	ct := reflect.TypeOf(limitsConfig{})
	if lt.NumField() != ct.NumField() {
		t.Fatalf("quota.Limits has %d fields, [limits] %d keys", lt.NumField(), ct.NumField())
	}
	for i := 0; i < lt.NumField(); i++ {
		name := lt.Field(i).Name
		key := strings.ToLower(snake.ReplaceAllString(name, "${1}_${2}"))
		key = strings.ReplaceAll(key, "t_t_l", "ttl") // MinTTL, MaxTTL
		f, ok := ct.FieldByName(name)
		if !ok || f.Tag.Get("toml") != key {
			t.Errorf("quota.Limits.%s: [limits] has no key %q", name, key)
			continue
		}
		// One field set to 7 (7 s for a duration) reaches that field only.
		var c config
		v := reflect.ValueOf(&c.Limits).Elem().FieldByName(name)
		v.SetInt(7 * int64(time.Second))
		got := reflect.ValueOf(c.limits())
		for j := 0; j < lt.NumField(); j++ {
			if set := !got.Field(j).IsZero(); set != (j == i) {
				t.Errorf("[limits] %s set: quota.Limits.%s = %v", key, lt.Field(j).Name, got.Field(j))
			}
		}
	}
}

func TestRestartFieldsNameWhatAReloadLeaves(t *testing.T) {
	t.Parallel()
	a, err := loadConfig(filepath.Join("testdata", "config", "good.toml"))
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.Principals = nil // principals are the reload's, not a restart's
	if got := a.restartFields(&b); len(got) != 0 {
		t.Errorf("only the principals differ, restartFields = %v", got)
	}
	b.Listen = "127.0.0.1:1"
	b.Inspector = false
	b.Limits.MaxTTL = duration(time.Hour)
	b.TLS.KeyFile = "/other.pem"
	if got := a.restartFields(&b); !slices.Equal(got, []string{"listen", "inspector", "tls.key_file", "limits.max_ttl"}) {
		t.Errorf("restartFields = %v", got)
	}
}

func TestExposure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		listen, metrics string
		tls, insecure   bool
		refused         string // the field named; "" = allowed
	}{
		{"127.0.0.1:0", "", false, false, ""},
		{"localhost:8765", "[::1]:9464", false, false, ""},
		{"0.0.0.0:8765", "", false, false, "listen"},
		{":8765", "", false, false, "listen"},
		{"192.0.2.7:8765", "", false, false, "listen"},
		{"127.0.0.1:8765", "0.0.0.0:9464", false, false, "metrics_listen"},
		{"0.0.0.0:8765", "0.0.0.0:9464", true, false, ""},
		{"0.0.0.0:8765", "0.0.0.0:9464", false, true, ""},
	}
	for _, c := range cases {
		cfg := &config{path: "k.toml", Listen: c.listen, MetricsListen: c.metrics}
		if c.tls {
			cfg.TLS = tlsConfig{CertFile: "c", KeyFile: "k"}
		}
		err := cfg.checkExposure(c.insecure)
		var ce *configError
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%+v: refused: %v", c, err)
		case c.refused != "" && (!errors.As(err, &ce) || ce.Field != c.refused || !strings.Contains(err.Error(), "--insecure")):
			t.Errorf("%+v: %v, want %s refused naming --insecure", c, err, c.refused)
		}
	}
}

func TestHostsRequiredOnEveryInterface(t *testing.T) {
	t.Parallel()
	cases := []struct {
		listen, metrics string
		hosts           []string
		refused         bool
	}{
		{"127.0.0.1:8765", "", nil, false},
		{"192.0.2.7:8765", "", nil, false}, // its own address is allowed
		{"0.0.0.0:8765", "", nil, true},
		{":8765", "", nil, true},
		{"[::]:8765", "", nil, true},
		{"127.0.0.1:8765", "0.0.0.0:9464", nil, true},
		{"0.0.0.0:8765", "", []string{"state.example.com"}, false},
	}
	for _, c := range cases {
		cfg := &config{path: "k.toml", Listen: c.listen, MetricsListen: c.metrics, AllowedHosts: c.hosts}
		err := cfg.checkHosts()
		var ce *configError
		if c.refused != (err != nil) || (err != nil && (!errors.As(err, &ce) || ce.Field != "allowed_hosts")) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	cfg := &config{Listen: "192.0.2.7:8765", AllowedHosts: []string{"state.example.com"}}
	l, err := cfg.hostAllowList()
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{"192.0.2.7:8765": true, "state.example.com": true, "localhost:8765": true, "rebound.example.net": false} {
		if l.Allows(host) != want {
			t.Errorf("Allows(%q) = %v", host, !want)
		}
	}
}
