package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

// The client verbs' defaults and environment.
const (
	defaultEndpoint = "ws://127.0.0.1:8765"
	defaultTimeout  = 10 * time.Second
	envEndpoints    = "KPSTATE_ENDPOINTS"
	envToken        = "KPSTATE_TOKEN"
)

// clientProgram is kpstate in the client verbs' help: their exit codes
// say what 1 and 2 mean for a request.
var clientProgram = cliflag.Program{Name: program.Name,
	ExitCodes: "0 success, 1 the store refused the request (stderr names the code, the field and the message; " +
		"with --json stdout carries {\"error\":{...}}), 2 usage, connection or I/O error (a refused handshake shows the server's reason)"}

// clientAbout ends every client verb's paragraph.
const clientAbout = ` The server is --endpoints (or $KPSTATE_ENDPOINTS; default ws://127.0.0.1:8765), several
comma-separated tried in turn; the bearer token is read from --token-file or $KPSTATE_TOKEN, never
from a flag's value, so it stays out of ps; --cacert trusts a PEM CA for wss://.`

// clientOptions are the flags every client verb shares, registered by
// newClientCommand on the verb's flag set.
type clientOptions struct {
	cmd       *cliflag.Command
	endpoints string
	tokenFile string
	caCert    string
	timeout   time.Duration
	json      bool
	// follow is set by the verbs that run until interrupted (watch, lease
	// hold): they report the client's connection losses on stderr.
	follow bool
}

// newClientCommand is cliflag.New for a client verb, with the shared
// flags after the verb's own (the verb adds its flags before Parse).
func newClientCommand(name string, h cliflag.Help, stdout, stderr io.Writer) (*cliflag.Command, *clientOptions) {
	h.About += clientAbout
	c := cliflag.New(clientProgram, name, h, stdout, stderr)
	return c, &clientOptions{cmd: c}
}

// parse registers the shared flags, parses args and checks that n
// arguments follow (or up to max[0], for a verb with an optional one); a
// non-negative result is the exit code to return.
func (o *clientOptions) parse(args []string, n int, max ...int) int {
	fs := o.cmd.FS
	fs.StringVar(&o.endpoints, "endpoints", "", "the server's `URL[,URL...]` (ws:// or wss://); default $"+envEndpoints+" or "+defaultEndpoint)
	fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from `FILE` (default: $"+envToken+")")
	fs.StringVar(&o.caCert, "cacert", "", "trust the PEM CA certificates in `FILE` for wss:// (default: the system's roots)")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "bound connecting and each request to `D`")
	fs.BoolVar(&o.json, "json", false, "print JSON on stdout")
	if code := o.cmd.Parse(args); code >= 0 {
		return code
	}
	if len(max) > 0 && o.cmd.FS.NArg() > n {
		n = max[0]
	}
	if code := o.cmd.Args(n); code >= 0 {
		return code
	}
	if o.timeout <= 0 {
		return o.cmd.UsageError("--timeout %v: want a positive duration", o.timeout)
	}
	return -1
}

// inputError is a flag's file or value kpstate could not use.
type inputError struct {
	Flag  string // "--token-file", "$KPSTATE_TOKEN", ...
	Value string // the file or value at fault ("" for a secret)
	Err   error
}

func (e *inputError) Error() string {
	if e.Value == "" {
		return e.Flag + ": " + e.Err.Error()
	}
	return e.Flag + " " + e.Value + ": " + e.Err.Error()
}

func (e *inputError) Unwrap() error { return e.Err }

// token returns the bearer token: the file's content, else $KPSTATE_TOKEN.
func (o *clientOptions) token() (string, error) {
	if o.tokenFile == "" {
		tok := strings.TrimSpace(os.Getenv(envToken))
		if tok == "" {
			return "", &inputError{Flag: "--token-file", Err: errors.New("no token: give --token-file FILE or set $" + envToken)}
		}
		return tok, nil
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return "", &inputError{Flag: "--token-file", Value: o.tokenFile, Err: err}
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", &inputError{Flag: "--token-file", Value: o.tokenFile, Err: errors.New("the file is empty")}
	case strings.ContainsAny(tok, " \t\r\n"):
		// kpstate token new's whole output, say: sending it would only
		// be refused, and the [[principal]] lines are no secret to send.
		return "", &inputError{Flag: "--token-file", Value: o.tokenFile, Err: errors.New("more than one word: the file must hold the token alone (the first line of kpstate token new)")}
	}
	return tok, nil
}

// endpointList is --endpoints, else $KPSTATE_ENDPOINTS, else the default.
func (o *clientOptions) endpointList() []string {
	s := o.endpoints
	if s == "" {
		s = os.Getenv(envEndpoints)
	}
	if s == "" {
		s = defaultEndpoint
	}
	var eps []string
	for ep := range strings.SplitSeq(s, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// tlsConfig trusts --cacert's certificates, or nil for the system's roots.
func (o *clientOptions) tlsConfig() (*tls.Config, error) {
	if o.caCert == "" {
		return nil, nil
	}
	b, err := os.ReadFile(o.caCert)
	if err != nil {
		return nil, &inputError{Flag: "--cacert", Value: o.caCert, Err: err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, &inputError{Flag: "--cacert", Value: o.caCert, Err: errors.New("no PEM certificate in the file")}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// dial connects as the token's principal, within --timeout.
func (o *clientOptions) dial(ctx context.Context) (*client.Client, error) {
	tok, err := o.token()
	if err != nil {
		return nil, err
	}
	tc, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	cfg := client.Config{Endpoints: o.endpointList(), Token: tok, TLS: tc, DialTimeout: o.timeout, RequestTimeout: o.timeout}
	if o.follow {
		cfg.Logger = slog.New(slog.NewTextHandler(o.cmd.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return client.Dial(ctx, cfg)
}

// refusal is a store error as --json prints it, under "error".
type refusal struct {
	Code            string  `json:"code"`
	Field           string  `json:"field,omitempty"`
	CurrentRevision *uint64 `json:"current_revision,omitempty"` // for CONFLICT only
	Message         string  `json:"message"`
	// Who holds a lease kpstate lease hold could not claim.
	Owner   string `json:"owner,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Expires string `json:"expires,omitempty"`
}

// storeRefusal returns the store's error in err, unless it is the
// client's own word for a connection it lost or a deadline it passed
// (UNAVAILABLE on "connection", "context" or "answer"): that is no
// answer from the store, so it exits 2 like any connection error.
func storeRefusal(err error) (*statestore.Error, bool) {
	var se *statestore.Error
	if !errors.As(err, &se) {
		return nil, false
	}
	if se.Code == statestore.Unavailable && (se.Field == "connection" || se.Field == "context" || se.Field == "answer") {
		return nil, false
	}
	return se, true
}

func refusalOf(se *statestore.Error) refusal {
	r := refusal{Code: se.Code.String(), Field: se.Field, Message: se.Message}
	if se.Code == statestore.Conflict {
		cur := se.CurrentRevision
		r.CurrentRevision = &cur
	}
	return r
}

// describe is a refusal on one line: the code, the field, the current
// revision of a CONFLICT, and the message.
func (r refusal) describe() string {
	var b strings.Builder
	b.WriteString(r.Code)
	var in []string
	if r.Field != "" {
		in = append(in, "field "+r.Field)
	}
	if r.CurrentRevision != nil {
		in = append(in, fmt.Sprintf("current revision %d", *r.CurrentRevision))
	}
	if len(in) > 0 {
		b.WriteString(" (" + strings.Join(in, ", ") + ")")
	}
	if r.Message != "" {
		b.WriteString(": " + r.Message)
	}
	return b.String()
}

// callOnce dials, makes the one call a verb exists for, and closes: what
// get, put, delete and status share. ok is false when the dial or the call
// failed; code is then the exit code, the failure already printed.
func callOnce[T any](o *clientOptions, call func(context.Context, *client.Client) (T, error)) (v T, code int, ok bool) {
	ctx := context.Background() // the client bounds the dial and the request by --timeout
	cl, err := o.dial(ctx)
	if err != nil {
		return v, o.fail(err), false
	}
	defer cl.Close()
	if v, err = call(ctx, cl); err != nil {
		return v, o.fail(err), false
	}
	return v, 0, true
}

// fail reports err and returns its exit code: 1 for the store's refusal
// (and its JSON on stdout with --json), 2 for anything else.
func (o *clientOptions) fail(err error) int {
	if se, ok := storeRefusal(err); ok {
		return o.refuse(refusalOf(se), "")
	}
	return o.cmd.Fail(exitUsage, "%v", err)
}

// refuse reports a refusal (with why, when set, before it on stderr) and
// returns exitRefused.
func (o *clientOptions) refuse(r refusal, why string) int {
	if why != "" {
		o.cmd.Fail(exitRefused, "%s: %s", why, r.describe())
	} else {
		o.cmd.Fail(exitRefused, "%s", r.describe())
	}
	if o.json && o.printJSON(map[string]refusal{"error": r}) != exitOK {
		return exitUsage
	}
	return exitRefused
}

// note tells the user something on stderr, prefixed like an error.
func (o *clientOptions) note(format string, args ...any) { o.cmd.Fail(exitOK, format, args...) }

// printJSON writes v as one line of JSON; a failed write exits 2.
func (o *clientOptions) printJSON(v any) int {
	enc := json.NewEncoder(o.cmd.Stdout)
	enc.SetEscapeHTML(false) // for a terminal and jq, not a web page: "<id>", not "\u003cid\u003e"
	if err := enc.Encode(v); err != nil {
		return o.cmd.Fail(exitUsage, "writing to stdout: %v", err)
	}
	return exitOK
}

// printf writes a line of the human form; a failed write exits 2.
func (o *clientOptions) printf(format string, args ...any) int {
	if _, err := fmt.Fprintf(o.cmd.Stdout, format, args...); err != nil {
		return o.cmd.Fail(exitUsage, "writing to stdout: %v", err)
	}
	return exitOK
}

// timeFormat is how the verbs print the store's times: UTC, milliseconds,
// the store's own resolution.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(timeFormat) }

// expiresText is an entry's lease deadline for the human forms.
func expiresText(ms int64) string {
	if ms == 0 {
		return "never (no lease)"
	}
	return msTime(ms)
}

// entryJSON is an entry as --json prints it: the document embedded as
// JSON, the times as RFC 3339 in UTC.
type entryJSON struct {
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Schema    string          `json:"schema"`
	Owner     string          `json:"owner"`
	Revision  uint64          `json:"revision"`
	Created   string          `json:"created"`
	Updated   string          `json:"updated"`
	Expires   string          `json:"expires,omitempty"` // absent: no lease
	Size      int             `json:"size"`              // the document's bytes
	Document  json.RawMessage `json:"document"`
}

func entryOf(e statestore.Entry) entryJSON {
	j := entryJSON{Namespace: e.Namespace, Key: e.Key, Schema: e.Schema, Owner: e.Owner, Revision: e.Revision,
		Created: msTime(e.CreatedMs), Updated: msTime(e.UpdatedMs), Size: len(e.Document), Document: e.Document}
	if e.ExpiresMs != 0 {
		j.Expires = msTime(e.ExpiresMs)
	}
	return j
}
