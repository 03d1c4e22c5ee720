package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// TestTokenNew: the printed hash is the SHA-256 of the printed token, and
// a configuration made of the printed lines authenticates that token as
// that principal, and no other token.
func TestTokenNew(t *testing.T) {
	t.Parallel()
	for _, admin := range []bool{false, true} {
		p := newPrincipal(t, "transcoder-a", admin)
		raw, err := base64.RawURLEncoding.DecodeString(p.token)
		if err != nil || len(raw) != tokenBytes {
			t.Fatalf("token %q: %d bytes of base64url (%v), want %d", p.token, len(raw), err, tokenBytes)
		}
		sum := sha256.Sum256([]byte(p.token))
		if !strings.Contains(p.entry, "\ntoken_sha256 = \""+hex.EncodeToString(sum[:])+"\"\n") {
			t.Fatalf("the entry does not hold the token's SHA-256:\n%s", p.entry)
		}
		if strings.Contains(p.entry, p.token) {
			t.Fatalf("the entry holds the token itself:\n%s", p.entry)
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "kpstate.toml")
		if err := os.WriteFile(file, []byte("data_dir = \"data\"\nlisten = \"127.0.0.1:0\"\n\n"+p.entry), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(file)
		if err != nil {
			t.Fatalf("the printed entry does not load: %v\n%s", err, p.entry)
		}
		table, err := wstransport.NewPrincipalTable(cfg.tokenPrincipals())
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/ws?access_token="+p.token, nil)
		if got, err := table.Authenticate(r); err != nil || got != (statestore.Principal{ID: "transcoder-a", Admin: admin}) {
			t.Errorf("the token authenticates as %+v, %v; want transcoder-a, admin %v", got, err, admin)
		}
		other := newPrincipal(t, "transcoder-a", admin)
		if other.token == p.token {
			t.Fatal("two runs printed the same token")
		}
		if _, err := table.Authenticate(httptest.NewRequest("GET", "/ws?access_token="+other.token, nil)); err == nil {
			t.Error("another token authenticates too")
		}
	}
}

func TestTokenNewRefusesABadID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"token", "new"}, "--id is required"},
		{[]string{"token", "new", "--id", "a/b"}, `--id: "a/b": want letters, digits`},
		{[]string{"token", "new", "--id", "keeppeek-server"}, "the server's own principal"},
		{[]string{"token", "new", "--id", strings.Repeat("x", 129)}, "129 bytes exceeds the 128-byte bound"},
		{[]string{"token", "frobnicate"}, `kpstate token: unknown command "frobnicate"`},
	} {
		code, out, errs := kp(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.says) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, errs, c.says)
		}
	}
}
