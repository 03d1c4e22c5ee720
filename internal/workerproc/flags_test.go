package workerproc_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/workerproc"
)

// TestBadFlagsNameTheFlag runs Main in process with command lines it must
// refuse: each exits with the usage code, names the flag (or the
// endpoint) at fault on stderr and prints nothing on stdout, no event, so
// nothing was connected to. A worker that cannot reach its store exits
// with the failure code and names the endpoint.
func TestBadFlagsNameTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "ok.token")
	empty := filepath.Join(dir, "empty.token")
	notPEM := filepath.Join(dir, "not.pem")
	for file, content := range map[string]string{token: "secret-token\n", empty: " \n", notPEM: "not a certificate\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An address nobody listens on any more: dialling it is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "ws://" + ln.Addr().String()
	ln.Close()

	base := func(role string, more ...string) []string {
		return append([]string{"--role", role, "--endpoints", closed, "--token-file", token, "--media", "http://127.0.0.1:1"}, more...)
	}
	transcoder := func(more ...string) []string {
		return base("transcoder", append([]string{"--namespace", "service/transcoder-a"}, more...)...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no flags", nil, workerproc.ExitUsage, "--role: required"},
		{"unknown role", base("encoder"), workerproc.ExitUsage, `--role: "encoder"`},
		{"unknown flag", base("viewer", "--lease-time", "2s"), workerproc.ExitUsage, "unknown flag: --lease-time"},
		{"an argument", base("viewer", "extra"), workerproc.ExitUsage, `unexpected argument "extra"`},
		{"no endpoints", []string{"--role", "viewer", "--token-file", token, "--media", "http://127.0.0.1:1"}, workerproc.ExitUsage, "--endpoints: required"},
		{"no token file", []string{"--role", "viewer", "--endpoints", closed, "--media", "http://127.0.0.1:1"}, workerproc.ExitUsage, "--token-file: required"},
		{"missing token file", base("viewer", "--token-file", filepath.Join(dir, "absent")), workerproc.ExitUsage, "--token-file: open " + filepath.Join(dir, "absent")},
		{"empty token file", base("viewer", "--token-file", empty), workerproc.ExitUsage, "--token-file: " + empty + " is empty"},
		{"CA file without a certificate", base("viewer", "--cacert", notPEM), workerproc.ExitUsage, "--cacert: " + notPEM + " holds no PEM certificate"},
		{"no media", []string{"--role", "viewer", "--endpoints", closed, "--token-file", token}, workerproc.ExitUsage, "--media: required"},
		{"media not HTTP", base("viewer", "--media", "ftp://127.0.0.1:1"), workerproc.ExitUsage, "--media: mediasim: dial: base_url"},
		{"transcoder without namespace", base("transcoder"), workerproc.ExitUsage, "--namespace: required with --role transcoder"},
		{"lease TTL below the store's minimum", transcoder("--lease-ttl", "500ms"), workerproc.ExitUsage, "--lease-ttl: lease config: ttl"},
		{"empty lease prefix", transcoder("--lease-prefix", ""), workerproc.ExitUsage, "--lease-prefix: empty"},
		{"lease prefix over the intents", transcoder("--lease-prefix", "intents/leases/"), workerproc.ExitUsage, `--lease-prefix: "intents/leases/" overlaps the intent prefix`},
		{"intent prefix over the status", transcoder("--intent-prefix", "status/"), workerproc.ExitUsage, "--intent-prefix: overlaps the prefix the worker writes its status under"},
		{"a viewer's lease TTL", base("viewer", "--lease-ttl", "2s"), workerproc.ExitUsage, "--lease-ttl: not used by --role viewer"},
		{"a group client's namespace", base("group", "--namespace", "user/bob"), workerproc.ExitUsage, "--namespace: not used by --role group"},
		{"a transcoder's preference", transcoder("--prefer", "team-blue"), workerproc.ExitUsage, "--prefer: not used by --role transcoder"},
		{"a group name the schema refuses", base("group", "--prefer", "../admins"), workerproc.ExitUsage, "--prefer: "},
		{"no backoff", base("viewer", "--max-backoff", "0s"), workerproc.ExitUsage, "--max-backoff: 0s"},
		{"an endpoint the client refuses", []string{"--role", "viewer", "--endpoints", "ftp://127.0.0.1:1", "--token-file", token, "--media", "http://127.0.0.1:1"},
			workerproc.ExitUsage, `Config.Endpoints[0]: "ftp://127.0.0.1:1" has scheme "ftp"`},
		{"a store nobody serves", base("viewer"), workerproc.ExitFailed, closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := workerproc.Main(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, stderr.String(), tc.code, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q: a refused worker printed an event", stdout.String())
			}
		})
	}
}

// TestHelp prints the usage on stdout with exit 0, naming every role, the
// event lines, the signals and the exit codes.
func TestHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := workerproc.Main([]string{"--help"}, &stdout, &stderr); code != workerproc.ExitOK || stderr.Len() != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"Usage: kpworker", "--role", "transcoder", "viewer", "group", "JSON", "SIGTERM", "Examples:", "Exit codes:"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help does not mention %q:\n%s", want, stdout.String())
		}
	}
}
