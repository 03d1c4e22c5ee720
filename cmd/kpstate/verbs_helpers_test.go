package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden/")

// volatile are the parts of the verbs' output that change from run to
// run, and the placeholders golden files hold instead.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`), "<TIME>"},
	{regexp.MustCompile(`wss?://127\.0\.0\.1:\d+`), "<ENDPOINT>"},
	{regexp.MustCompile(`github\.com/keeppeek/statestore [^\s"]+ revision=[^\s"]+ modified=[^\s"]+`), "<VERSION>"},
}

func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// golden compares a run's exit code, stdout and stderr, normalized, with
// testdata/golden/NAME.txt (rewritten with -update).
func golden(t *testing.T, name string, code int, stdout, stderr string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("exit " + strconv.Itoa(code) + "\n--- stdout\n" + normalize(stdout))
	if stderr != "" {
		b.WriteString("--- stderr\n" + normalize(stderr))
	}
	got := b.String()
	file := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s--- want\n%s", file, got, want)
	}
}

// verbServer is a kpstate serve for the client verbs, with an
// administrator (ops) and a plain principal (alice), each with a token
// file.
type verbServer struct {
	*proc
	dir            string
	ops, alice     principal
	opsTok, aliTok string // the token files
	tls            *testTLS
}

func startVerbServer(t *testing.T, withTLS bool) *verbServer {
	t.Helper()
	dir := t.TempDir()
	s := &verbServer{dir: dir, ops: newPrincipal(t, "ops", true), alice: newPrincipal(t, "alice", false)}
	s.opsTok, s.aliTok = s.tokenFile(t, "ops", s.ops.token), s.tokenFile(t, "alice", s.alice.token)
	sc := serverConfig{dataDir: filepath.Join(dir, "data"), principals: []principal{s.ops, s.alice}}
	if withTLS {
		sc.tls = newTLS(t, dir)
		s.tls = sc.tls
	}
	s.proc = startServe(t, sc.write(t, dir), sc.tls)
	return s
}

func (s *verbServer) tokenFile(t *testing.T, name, tok string) string {
	t.Helper()
	file := filepath.Join(s.dir, name+".token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// conn is the flags that reach the server: --endpoints and, under TLS,
// --cacert.
func (s *verbServer) conn() []string {
	args := []string{"--endpoints", s.start.Endpoint}
	if s.tls != nil {
		args = append(args, "--cacert", s.tls.caFile)
	}
	return args
}

// as runs a verb in-process with tokFile's token against the server.
func (s *verbServer) as(t *testing.T, tokFile string, args ...string) (int, string, string) {
	t.Helper()
	return kp(t, slices.Concat(args, []string{"--token-file", tokFile}, s.conn())...)
}

// writeFile writes content to a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// childEnv is the test's environment without KPSTATE_*, plus env: a
// child's endpoints and token are only what the test gives it.
func childEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KPSTATE_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// kpChild runs the built kpstate as a child process with env and stdin,
// and returns its exit code and output. It is killed if it runs past the
// guard.
func kpChild(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, kpstateBin, args...)
	cmd.Env = childEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kpstate %q ran past %v\nstdout %s\nstderr %s", args, guard, out.String(), errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kpstate %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// verbProc is a running client verb (watch, lease hold): its stdout line
// by line, its stderr, its exit code.
type verbProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // closed at the end of stdout
	seen   []string    // every line line returned
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan int // the exit code, once
}

// lockedWriter lets the exec package's copier write stderr while the test
// reads it.
type lockedWriter struct{ v *verbProc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.v.mu.Lock()
	defer w.v.mu.Unlock()
	return w.v.stderr.Write(b)
}

// startVerb starts the built kpstate with args (and env); it is killed by
// PID and reaped at the end of the test if it has not exited.
func startVerb(t *testing.T, env []string, args ...string) *verbProc {
	t.Helper()
	v := &verbProc{t: t, cmd: exec.Command(kpstateBin, args...), lines: make(chan string, 256), exited: make(chan int, 1)}
	v.cmd.Env = childEnv(env...)
	v.cmd.Stderr = lockedWriter{v}
	out, err := v.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(v.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			v.lines <- sc.Text() // 256 lines: more than any test prints
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		v.cmd.Wait()
		v.exited <- v.cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		select {
		case code := <-v.exited:
			v.exited <- code
		default:
			v.cmd.Process.Kill()
			<-v.exited
		}
	})
	return v
}

// line returns the next line of stdout, failing the test if none comes.
func (v *verbProc) line() string {
	v.t.Helper()
	select {
	case l, ok := <-v.lines:
		if !ok {
			v.t.Fatalf("kpstate %q ended its output (after %q); stderr:\n%s", v.cmd.Args[1:], v.seen, v.errors())
		}
		v.seen = append(v.seen, l)
		return l
	case <-time.After(guard):
		v.t.Fatalf("kpstate %q printed no line in %v (after %q); stderr:\n%s", v.cmd.Args[1:], guard, v.seen, v.errors())
		return ""
	}
}

// lineWith returns the next line of stdout beginning with prefix, the
// lines before it skipped.
func (v *verbProc) lineWith(prefix string) string {
	v.t.Helper()
	for {
		if l := v.line(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
}

func (v *verbProc) errors() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stderr.String()
}

func (v *verbProc) signal(sig syscall.Signal) {
	v.t.Helper()
	if err := v.cmd.Process.Signal(sig); err != nil {
		v.t.Fatal(err)
	}
}

// wait returns the exit code and the whole of stdout (the lines line
// returned, then the rest).
func (v *verbProc) wait() (int, string) {
	v.t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case l, ok := <-v.lines:
			if ok {
				v.seen = append(v.seen, l)
				continue
			}
			select {
			case code := <-v.exited:
				v.exited <- code // for the cleanup
				out := strings.Join(v.seen, "\n")
				if out != "" {
					out += "\n"
				}
				return code, out
			case <-timeout:
			}
		case <-timeout:
		}
		v.t.Fatalf("kpstate %q did not exit in %v; stdout %q, stderr:\n%s", v.cmd.Args[1:], guard, v.seen, v.errors())
	}
}
