package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// config is kpstate.toml, as loadConfig parsed and checked it. Loading
// opens no file but the configuration itself: the TLS files are read by
// loadTLS and the store by Open, so a configuration can be checked on a
// machine that has neither (deploy's example, in the tests).
type config struct {
	DataDir        string            `toml:"data_dir"`
	Listen         string            `toml:"listen"`
	MetricsListen  string            `toml:"metrics_listen"`
	Inspector      bool              `toml:"inspector"`
	AllowedOrigins []string          `toml:"allowed_origins"`
	AllowedHosts   []string          `toml:"allowed_hosts"`
	ConfigTOML     string            `toml:"config_toml"`
	LogFormat      string            `toml:"log_format"`
	LogLevel       string            `toml:"log_level"`
	TLS            tlsConfig         `toml:"tls"`
	Server         serverSection     `toml:"server"`
	Limits         limitsConfig      `toml:"limits"`
	Principals     []principalConfig `toml:"principal"`
	// Cluster is [cluster]: present, the store is one node of a raft
	// cluster (OpenCluster) instead of a single store.
	Cluster *clusterSection `toml:"cluster"`

	path  string     // the file it was loaded from
	level slog.Level // LogLevel, parsed
}

// tlsConfig is [tls]: both files or neither.
type tlsConfig struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// serverSection is [server]: what one client may hold of the server. 0
// or absent is the default.
type serverSection struct {
	// MaxConnections caps the connections held at once, plain HTTP and
	// WebSocket, API and metrics listeners together (default, and upper
	// bound: what RLIMIT_NOFILE leaves once descriptorReserve is kept for
	// the store's files).
	MaxConnections int `toml:"max_connections"`
	// MaxSessionsPerPrincipal caps one principal's WebSocket sessions
	// (default wstransport.DefaultMaxSessionsPerPrincipal).
	MaxSessionsPerPrincipal int `toml:"max_sessions_per_principal"`
	// IdleTimeout ends a connection that has not upgraded and sends no
	// request for that long, and bounds the reading of a request's
	// headers (default defaultIdleTimeout).
	IdleTimeout duration `toml:"idle_timeout"`
	// SessionIdleTimeout ends a WebSocket session with no frame, no
	// request, nothing queued and no watch for that long (default
	// dispatch.DefaultIdleTimeout).
	SessionIdleTimeout duration `toml:"session_idle_timeout"`
	// MaxQueuedBytes bounds the bytes queued to every client together
	// (default dispatch.DefaultMaxQueuedBytes).
	MaxQueuedBytes int64 `toml:"max_queued_bytes"`
	// MemoryLimit is the Go runtime's soft memory limit, in bytes
	// (default memoryLimit's; GOMEMLIMIT in the environment wins): the
	// collector works harder near it instead of letting the heap grow to
	// twice what is live, so the budgets above bound resident memory.
	MemoryLimit int64 `toml:"memory_limit"`
}

// defaultIdleTimeout is [server] idle_timeout's default: a browser keeps
// an idle HTTP connection for about as long, and a connection that
// sends nothing holds a descriptor for no longer.
const defaultIdleTimeout = 30 * time.Second

// limitsConfig is [limits]: quota.Limits in snake_case, 0 or absent for
// the default. TestEveryLimitHasAKey holds it to quota.Limits.
type limitsConfig struct {
	MaxNamespaces          int      `toml:"max_namespaces"`
	MaxEntriesPerNamespace int      `toml:"max_entries_per_namespace"`
	MaxTotalBytes          int64    `toml:"max_total_bytes"`
	MaxDocumentBytes       int      `toml:"max_document_bytes"`
	MaxNamespaceBytes      int      `toml:"max_namespace_bytes"`
	MaxKeyBytes            int      `toml:"max_key_bytes"`
	MaxSnapshotEntries     int      `toml:"max_snapshot_entries"`
	MaxSnapshotBytes       int      `toml:"max_snapshot_bytes"`
	MaxUnackedUpdates      int      `toml:"max_unacked_updates"`
	AckDeadline            duration `toml:"ack_deadline"`
	MaxWatches             int      `toml:"max_watches"`
	MaxWatchesPerSession   int      `toml:"max_watches_per_session"`
	MaxWatchesPerPrincipal int      `toml:"max_watches_per_principal"`
	MinTTL                 duration `toml:"min_ttl"`
	MaxTTL                 duration `toml:"max_ttl"`
}

// principalConfig is one [[principal]].
type principalConfig struct {
	ID          string `toml:"id"`
	Admin       bool   `toml:"admin"`
	TokenSHA256 string `toml:"token_sha256"`

	hash wstransport.TokenHash // TokenSHA256, parsed
}

// duration is a Go duration string in TOML ("30s", "1m30s").
type duration time.Duration

// UnmarshalText parses a Go duration.
func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a Go duration such as \"30s\": %w", err)
	}
	*d = duration(v)
	return nil
}

// configError is a configuration refused: the file, the field (as the
// file spells it: "principal[2].token_sha256", indexes from 0), the line
// when the parser knows it, and why.
type configError struct {
	File  string
	Line  int // 0 when unknown
	Field string
	Err   error
}

func (e *configError) Error() string {
	where := e.File
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", where, e.Field, e.Err)
}

func (e *configError) Unwrap() error { return e.Err }

// loadConfig reads, parses and checks the configuration at file. Relative
// paths in it are relative to the file's directory.
func loadConfig(file string) (*config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, &configError{File: file, Err: err}
	}
	c := &config{path: file}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return nil, decodeError(file, err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeError names the key and line of a parse failure: each unknown
// key, or the value of the wrong type or syntax.
func decodeError(file string, err error) error {
	var sme *toml.StrictMissingError
	if errors.As(err, &sme) {
		var errs []error
		for i := range sme.Errors {
			row, _ := sme.Errors[i].Position()
			errs = append(errs, &configError{File: file, Line: row, Field: strings.Join(sme.Errors[i].Key(), "."),
				Err: errors.New("unknown key (see kpstate serve --help for the keys)")})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return &configError{File: file, Line: row, Field: strings.Join(de.Key(), "."), Err: err}
	}
	return &configError{File: file, Err: err}
}

// check validates what parsing cannot and resolves relative paths; the
// first problem is the error.
func (c *config) check() error {
	bad := func(field, format string, args ...any) error {
		return &configError{File: c.path, Field: field, Err: fmt.Errorf(format, args...)}
	}
	if c.DataDir == "" {
		return bad("data_dir", "required: the store's directory (the store lives in DATA_DIR/%s)", statestore.StoreDirName)
	}
	if c.Listen == "" {
		return bad("listen", "required: HOST:PORT to serve on")
	}
	if err := checkHostPort(c.Listen); err != nil {
		return bad("listen", "%v", err)
	}
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			return bad("metrics_listen", "%v", err)
		}
	}
	for i, p := range c.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return bad(fmt.Sprintf("allowed_origins[%d]", i), "%q is not a host pattern (path.Match syntax, e.g. \"app.example.com\" or \"*.example.com\")", p)
		}
	}
	switch {
	case c.Server.MaxConnections < 0:
		return bad("server.max_connections", "%d is negative", c.Server.MaxConnections)
	case c.Server.MaxSessionsPerPrincipal < 0:
		return bad("server.max_sessions_per_principal", "%d is negative", c.Server.MaxSessionsPerPrincipal)
	case c.Server.IdleTimeout < 0:
		return bad("server.idle_timeout", "%v is negative", time.Duration(c.Server.IdleTimeout))
	case c.Server.MemoryLimit < 0:
		return bad("server.memory_limit", "%d is negative", c.Server.MemoryLimit)
	case c.Server.MaxQueuedBytes < 0:
		return bad("server.max_queued_bytes", "%d is negative", c.Server.MaxQueuedBytes)
	case c.Server.SessionIdleTimeout < 0:
		return bad("server.session_idle_timeout", "%v is negative", time.Duration(c.Server.SessionIdleTimeout))
	}
	for i, h := range c.AllowedHosts {
		if _, err := wstransport.NewHostAllowList([]string{h}, "allowed_hosts"); err != nil {
			return bad(fmt.Sprintf("allowed_hosts[%d]", i), "%q is not a host name pattern or an IP address (e.g. \"state.example.com\", \"*.example.net\", \"192.0.2.7\")", h)
		}
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		return bad("log_format", "%q: want \"text\" or \"json\"", c.LogFormat)
	}
	if c.LogLevel != "" {
		if err := c.level.UnmarshalText([]byte(c.LogLevel)); err != nil {
			return bad("log_level", "%q: want debug, info, warn or error", c.LogLevel)
		}
	}
	switch {
	case c.TLS.CertFile != "" && c.TLS.KeyFile == "":
		return bad("tls.key_file", "required with tls.cert_file")
	case c.TLS.KeyFile != "" && c.TLS.CertFile == "":
		return bad("tls.cert_file", "required with tls.key_file")
	}
	ids := map[string]int{}
	hashes := map[wstransport.TokenHash]int{}
	for i := range c.Principals {
		p := &c.Principals[i]
		field := func(name string) string { return fmt.Sprintf("principal[%d].%s", i, name) }
		if err := checkPrincipalID(p.ID); err != nil {
			return bad(field("id"), "%v", err)
		}
		if j, dup := ids[p.ID]; dup {
			return bad(field("id"), "%q is already principal[%d]'s", p.ID, j)
		}
		ids[p.ID] = i
		if p.TokenSHA256 == "" {
			return bad(field("token_sha256"), "required: the SHA-256 of the principal's token (kpstate token new prints it)")
		}
		h, err := wstransport.ParseTokenHash(p.TokenSHA256)
		if err != nil {
			return bad(field("token_sha256"), "%v", err)
		}
		if j, dup := hashes[h]; dup {
			return bad(field("token_sha256"), "also principal[%d]'s: one token would authenticate two principals", j)
		}
		hashes[h] = i
		p.hash = h
	}
	if c.Cluster != nil {
		if c.ConfigTOML != "" {
			return bad("config_toml", "settings-backed namespaces live in one server's config.toml and are refused with [cluster]")
		}
		if err := c.Cluster.check(c.Listen); err != nil {
			return &configError{File: c.path, Field: err.field, Err: err.err}
		}
	}
	dir := filepath.Dir(c.path)
	paths := []*string{&c.DataDir, &c.ConfigTOML, &c.TLS.CertFile, &c.TLS.KeyFile}
	if c.Cluster != nil {
		paths = append(paths, &c.Cluster.TLS.CertFile, &c.Cluster.TLS.KeyFile, &c.Cluster.TLS.CAFile)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return nil
}

// checkPrincipalID is the rule a principal's ID obeys: one key segment
// ([A-Za-z0-9._-], so user/<id>/ is its namespace), at most the store's
// owner bound, and not the server's own.
func checkPrincipalID(id string) error {
	switch {
	case id == "":
		return errors.New("required")
	case !rules.Segment(id):
		return fmt.Errorf("%q: want letters, digits, '.', '_' and '-' only (the principal owns user/%s)", id, id)
	case len(id) > quota.OwnerBytes:
		return fmt.Errorf("%d bytes exceeds the %d-byte bound", len(id), quota.OwnerBytes)
	case id == statestore.System().ID:
		return fmt.Errorf("%q is the server's own principal", id)
	}
	return nil
}

// checkHostPort checks a HOST:PORT listen address.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want HOST:PORT: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port is not a number from 0 to 65535", addr)
	}
	return nil
}

// memoryLimit is [server] memory_limit, or by default room for the
// store's values twice over (its tree and what a checkpoint encodes),
// the clients' queues, and 64 MiB for the rest.
func (c *config) memoryLimit() int64 {
	if c.Server.MemoryLimit > 0 {
		return c.Server.MemoryLimit
	}
	total, queued := c.Limits.MaxTotalBytes, c.Server.MaxQueuedBytes
	if total == 0 {
		total = quota.Default().MaxTotalBytes
	}
	if queued == 0 {
		queued = dispatch.DefaultMaxQueuedBytes
	}
	return 2*total + queued + 64<<20
}

// hostAllowList is allowed_hosts, with the listen addresses' own IP
// literals: a request naming the server by its address is never a
// rebound page's, which carries its own site's name.
func (c *config) hostAllowList() (*wstransport.HostAllowList, error) {
	hosts := append([]string(nil), c.AllowedHosts...)
	for _, addr := range []string{c.Listen, c.MetricsListen} {
		if host, _, err := net.SplitHostPort(addr); err == nil && net.ParseIP(host) != nil && !net.ParseIP(host).IsUnspecified() {
			hosts = append(hosts, host)
		}
	}
	return wstransport.NewHostAllowList(hosts, "allowed_hosts")
}

// idleTimeout is [server] idle_timeout, its default applied.
func (c *config) idleTimeout() time.Duration {
	if c.Server.IdleTimeout == 0 {
		return defaultIdleTimeout
	}
	return time.Duration(c.Server.IdleTimeout)
}

// limits is [limits] as the store takes it; Open validates it.
func (c *config) limits() quota.Limits {
	l := c.Limits
	return quota.Limits{MaxNamespaces: l.MaxNamespaces, MaxEntriesPerNamespace: l.MaxEntriesPerNamespace,
		MaxTotalBytes: l.MaxTotalBytes, MaxDocumentBytes: l.MaxDocumentBytes, MaxNamespaceBytes: l.MaxNamespaceBytes,
		MaxKeyBytes: l.MaxKeyBytes, MaxSnapshotEntries: l.MaxSnapshotEntries, MaxSnapshotBytes: l.MaxSnapshotBytes,
		MaxUnackedUpdates: l.MaxUnackedUpdates, AckDeadline: time.Duration(l.AckDeadline), MaxWatches: l.MaxWatches,
		MaxWatchesPerSession: l.MaxWatchesPerSession, MaxWatchesPerPrincipal: l.MaxWatchesPerPrincipal, MinTTL: time.Duration(l.MinTTL), MaxTTL: time.Duration(l.MaxTTL)}
}

// tokenPrincipals is the principal table's content.
func (c *config) tokenPrincipals() []wstransport.TokenPrincipal {
	out := make([]wstransport.TokenPrincipal, len(c.Principals))
	for i, p := range c.Principals {
		out[i] = wstransport.TokenPrincipal{Hash: p.hash, Principal: statestore.Principal{ID: p.ID, Admin: p.Admin}}
	}
	return out
}

// tlsEnabled reports whether [tls] names its files.
func (c *config) tlsEnabled() bool { return c.TLS.CertFile != "" }

// loadTLS reads [tls]'s files: nil without them, an error naming the file
// that cannot be read, or both when they are not a pair.
func (c *config) loadTLS() (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	certPEM, err := os.ReadFile(c.TLS.CertFile)
	if err != nil {
		return nil, &configError{File: c.path, Field: "tls.cert_file", Err: err}
	}
	keyPEM, err := os.ReadFile(c.TLS.KeyFile)
	if err != nil {
		return nil, &configError{File: c.path, Field: "tls.key_file", Err: err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &configError{File: c.path, Field: "tls", Err: fmt.Errorf("%s and %s are not a certificate and its key: %w", c.TLS.CertFile, c.TLS.KeyFile, err)}
	}
	// HTTP/1.1 only: the WebSocket upgrade is an HTTP/1.1 mechanism.
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// checkExposure refuses a non-loopback listen or metrics_listen without
// TLS, unless insecure: tokens would cross the network in clear. So it
// does a non-loopback raft or RPC address without [cluster.tls]: a
// forwarded call names its principal, so whoever reaches a peer port
// could write as anyone.
func (c *config) checkExposure(insecure bool) error {
	if insecure {
		return nil
	}
	if err := c.Cluster.checkExposure(c.path); err != nil {
		return err
	}
	if c.tlsEnabled() {
		return nil
	}
	for _, f := range []struct{ name, addr string }{{"listen", c.Listen}, {"metrics_listen", c.MetricsListen}} {
		if f.addr != "" && !loopback(f.addr) {
			return &configError{File: c.path, Field: f.name, Err: fmt.Errorf("%q is not a loopback address and [tls] names no certificate: "+
				"bearer tokens would cross the network in clear. Configure [tls], or pass --insecure if a proxy in front terminates TLS", f.addr)}
		}
	}
	return nil
}

// checkHosts refuses a listen or metrics_listen on every interface
// without allowed_hosts: the server could not tell its clients' Host
// headers from a rebound page's, and would refuse them all.
func (c *config) checkHosts() error {
	if len(c.AllowedHosts) > 0 {
		return nil
	}
	for _, f := range []struct{ name, addr string }{{"listen", c.Listen}, {"metrics_listen", c.MetricsListen}} {
		if host, _, _ := net.SplitHostPort(f.addr); f.addr != "" && (host == "" || net.ParseIP(host).IsUnspecified()) {
			return &configError{File: c.path, Field: "allowed_hosts", Err: fmt.Errorf("required when %s (%q) is every interface: "+
				"the names and addresses clients reach the server by (a request with another Host header is answered 421)", f.name, f.addr)}
		}
	}
	return nil
}

// loopback reports whether addr's host is a loopback address or
// localhost; an empty host is every interface, not loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// restartFields names the keys whose values differ between c and next,
// but the principals: what a reload leaves to a restart.
func (c *config) restartFields(next *config) []string {
	var names []string
	var walk func(prefix string, a, b reflect.Value)
	walk = func(prefix string, a, b reflect.Value) {
		for i := 0; i < a.NumField(); i++ {
			f := a.Type().Field(i)
			key := f.Tag.Get("toml")
			if key == "" || key == "principal" {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(prefix+key+".", a.Field(i), b.Field(i))
				continue
			}
			if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
				names = append(names, prefix+key)
			}
		}
	}
	walk("", reflect.ValueOf(*c), reflect.ValueOf(*next))
	return names
}
