package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/buildinfo"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

const serveAbout = `Serves the state store in data_dir over WebSocket at ws://LISTEN/ws (wss:// with [tls]) to the
principals of the configuration file, with /api/info (authenticated: availability, capabilities, the
principal, the namespaces it may read, the server's version), /healthz (200 while the process serves)
and /readyz (200 while the store is open; 503 and the cause otherwise). A request authenticates with
"Authorization: Bearer TOKEN" or, from a browser, ?access_token=TOKEN; the server keeps only each
token's SHA-256. If the store cannot be opened (another process holds its LOCK, its journal is damaged)
the server still runs and answers every request UNAVAILABLE with the cause. The configuration is TOML:
data_dir (required), listen (required, HOST:PORT), metrics_listen (Prometheus at /metrics), inspector
(true serves the inspector page at /; open it as /#token=TOKEN), allowed_origins (browser origins besides the server's own),
allowed_hosts (the names and addresses clients reach the server by, host patterns or IP addresses; a
request with another Host header is answered 421 before authentication; loopback names and the listen
addresses' own IPs are always allowed; required when listen is every interface),
config_toml (the media server's config.toml, for settings-backed namespaces), log_format ("text" or
"json"), log_level (debug, info, warn, error); [tls] cert_file and key_file; [limits] with the store's
bounds in snake_case (max_namespaces, max_entries_per_namespace, max_total_bytes, max_document_bytes,
max_namespace_bytes, max_key_bytes, max_snapshot_entries, max_snapshot_bytes, max_unacked_updates,
ack_deadline, max_watches, max_watches_per_session, max_watches_per_principal (default a quarter of
max_watches), min_ttl, max_ttl; durations as "30s"; 0 or absent
for the default); [server] with what clients may hold: max_connections (plain HTTP and WebSocket, both
listeners together; default and upper bound what RLIMIT_NOFILE leaves after 64 descriptors kept for the
store's files, so a flood of connections never fails a commit; one over is answered 503 naming the
bound, or closed under TLS), max_sessions_per_principal (default 256; one more is answered 429),
idle_timeout (a connection that has not upgraded and sends nothing for that long is closed; default
30s), session_idle_timeout (a WebSocket session with no frame, request, queued answer or watch for that
long ends, closed 1001; default 5m), max_queued_bytes (the bytes queued to all clients together, each
session drawing up to its share: over it its reading pauses and its watch updates close the watch
BUFFER_OVERFLOW; default 67108864), memory_limit (the Go runtime's soft memory limit, so these budgets
bound resident memory; default twice limits.max_total_bytes plus max_queued_bytes plus 64 MiB;
GOMEMLIMIT in the environment wins); and one [[principal]] per principal: id, admin, token_sha256 (kpstate token new makes
them); and [cluster] to run the store as one node of a raft cluster: node_id, raft_listen and rpc_listen
(this node's raft and peer-call addresses, as its own entry gives them), join (true for a node added
later with kpstate cluster add-voter), election_timeout, heartbeat_timeout, leader_lease_timeout,
commit_timeout, one [[cluster.peer]] per initial member, this node included (id, raft_addr, rpc_addr;
the same on every node), and [cluster.tls] cert_file, key_file and ca_file (mutual TLS: every peer's
certificate signed by the cluster CA, the only one trusted). In cluster mode config_toml is refused,
/readyz is 200 only while a leader is known and this node has caught up, the admin principals have
/api/cluster (kpstate cluster), and a raft or RPC address off loopback needs [cluster.tls] or
--insecure. Relative paths are relative to the file's directory; an unknown key is an error naming it and its
line. A listen or metrics_listen address that is not loopback needs [tls], or --insecure when a proxy
in front terminates TLS. On start one line on stdout gives the WebSocket URL, the store's state and the
version (--json: one JSON object). SIGHUP reloads the principals: a removed principal's sessions end,
its watches closed AUTHORIZATION_LOST first; a principal whose admin flag changed keeps its sessions with
its new rights; a file that does not load changes nothing; other changed keys are logged, and need a
restart. SIGTERM or SIGINT stops accepting, ends the WebSocket sessions, closes the store and exits 0.`

func runServe(args []string, stdout, stderr io.Writer) int {
	c := cliflag.New(program, "serve", cliflag.Help{Synopsis: "--config FILE [--insecure] [--json]", About: serveAbout,
		Examples: []string{"kpstate serve --config /etc/kpstate/kpstate.toml",
			"kpstate serve --config kpstate.toml --json   # the start line as JSON, e.g. for scripts"}}, stdout, stderr)
	file := c.FS.String("config", "", "the configuration `FILE` (TOML)")
	insecure := c.FS.Bool("insecure", false, "allow a non-loopback listen or metrics_listen without [tls] (TLS terminated by a proxy in front), and raft or RPC addresses off loopback without [cluster.tls] (a trusted peer network)")
	asJSON := c.FS.Bool("json", false, "print the start line as one JSON object")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	if code := c.Args(0); code >= 0 {
		return code
	}
	if *file == "" {
		return c.UsageError("--config is required")
	}
	cfg, err := loadConfig(*file)
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if err := cfg.checkExposure(*insecure); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if err := cfg.checkHosts(); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	tlsConf, err := cfg.loadTLS()
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	var peerTLS *tls.Config
	if cfg.Cluster != nil {
		if peerTLS, err = cfg.Cluster.loadTLS(cfg.path); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
	}
	log := cfg.logger(stderr)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cfg.memoryLimit())
	}
	log.Info("memory limit", "bytes", debug.SetMemoryLimit(-1))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(stop)
	defer signal.Stop(hup)
	s, err := startServer(cfg, tlsConf, peerTLS, log)
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if err := s.printStart(stdout, *asJSON); err != nil {
		s.shutdown()
		return c.Fail(exitUsage, "%v", err)
	}
	code := exitOK
	for done := false; !done; {
		select {
		case sig := <-stop:
			log.Info("stopping", "signal", sig.String())
			done = true
		case <-hup:
			s.reload()
		case err := <-s.failed:
			log.Error("a listener failed; stopping", "err", err)
			code, done = exitUsage, true
		}
	}
	if err := s.shutdown(); err != nil {
		log.Error("shutdown", "err", err)
		code = exitUsage
	}
	return code
}

// logger is the configured slog logger on stderr.
func (c *config) logger(stderr io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// server is a running kpstate serve.
type server struct {
	cfg     *config // as running: only reload changes its principals
	log     *slog.Logger
	store   *statestore.Store // nil: UNAVAILABLE with cause
	cause   error
	table   *wstransport.PrincipalTable
	ins     *inspector.Server
	version string
	tls     bool

	conns     *wstransport.ConnBudget // every listener's connections
	servers   []*http.Server          // the API's, then the metrics' when configured
	listeners []net.Listener          // the same order
	failed    chan error              // a Serve that returned for another reason than the shutdown
}

// startServer opens the store (or, if it cannot, serves it UNAVAILABLE),
// listens, and serves until shutdown.
// peerTLS is [cluster.tls]'s, nil without it.
func startServer(cfg *config, tlsConf, peerTLS *tls.Config, log *slog.Logger) (*server, error) {
	reg, err := cliflag.Registry()
	if err != nil {
		return nil, err
	}
	table, err := wstransport.NewPrincipalTable(cfg.tokenPrincipals())
	if err != nil {
		return nil, &configError{File: cfg.path, Field: "principal", Err: err}
	}
	s := &server{cfg: cfg, log: log, table: table, version: buildinfo.Read().String(), tls: tlsConf != nil, failed: make(chan error, 2)}
	log.Info("kpstate starting", "version", s.version, "config", cfg.path, "principals", len(cfg.Principals))
	if len(cfg.Principals) == 0 {
		log.Warn("no [[principal]] in the configuration: every request is refused until a reload adds one")
	}
	opts := statestore.Options{Dir: cfg.DataDir, Limits: cfg.limits(), Settings: cfg.ConfigTOML,
		Schemas: reg, Logger: log.With("component", "store")}
	if cfg.Cluster != nil {
		s.store, err = statestore.OpenCluster(opts, cfg.Cluster.options(peerTLS))
	} else {
		s.store, err = statestore.Open(opts)
	}
	if err != nil {
		if statestore.CodeOf(err) == statestore.InvalidArgument {
			// Options the store refuses are the configuration's fault.
			var se *statestore.Error
			errors.As(err, &se)
			field, ok := map[string]string{"Limits": "limits", "Dir": "data_dir", "Settings": "config_toml"}[se.Field]
			if !ok && cfg.Cluster != nil {
				field = "cluster"
			}
			return nil, &configError{File: cfg.path, Field: field, Err: err}
		}
		s.store, s.cause = nil, err
		log.Error("the store cannot be opened: serving it UNAVAILABLE", "data_dir", cfg.DataDir, "err", err)
	} else {
		log.Info("store open", "data_dir", cfg.DataDir, "cluster", cfg.Cluster != nil)
	}
	if err := s.budgetConnections(); err != nil {
		s.closeStore()
		return nil, err
	}
	s.ins, err = inspector.New(inspector.Config{Store: s.store, Cause: s.cause, Auth: table, NoPage: !cfg.Inspector, Version: s.version,
		Dispatch: dispatch.Options{IdleTimeout: time.Duration(cfg.Server.SessionIdleTimeout), MaxQueuedBytes: cfg.Server.MaxQueuedBytes},
		Transport: wstransport.Options{OriginPatterns: cfg.AllowedOrigins, MaxSessionsPerPrincipal: cfg.Server.MaxSessionsPerPrincipal,
			Started: func(p statestore.Principal) { log.Info("session started", "principal", p.ID, "admin", p.Admin) },
			Ended: func(p statestore.Principal, err error) {
				if err != nil {
					log.Info("session ended", "principal", p.ID, "err", err)
				} else {
					log.Info("session ended", "principal", p.ID)
				}
			}}})
	if err != nil {
		s.closeStore()
		return nil, err
	}
	hosts, err := cfg.hostAllowList()
	if err != nil {
		s.closeStore()
		return nil, &configError{File: cfg.path, Field: "allowed_hosts", Err: err}
	}
	mux := http.NewServeMux()
	mux.Handle("/", s.ins)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	s.mountClusterAdmin(mux)
	// The Host check comes first: a rebound page is refused before it can
	// try a token.
	if err := s.listen(cfg.Listen, "listen", hosts.Handler(mux), tlsConf); err != nil {
		s.shutdown()
		return nil, err
	}
	if cfg.MetricsListen != "" {
		src := func() statestore.Stats { return statestore.FailedOpenStats(s.cause) }
		if s.store != nil {
			src = s.store.Stats
		}
		mm := http.NewServeMux()
		mm.Handle("GET /metrics", s.metricsHandler(src))
		if err := s.listen(cfg.MetricsListen, "metrics_listen", hosts.Handler(mm), tlsConf); err != nil {
			s.shutdown()
			return nil, err
		}
	}
	return s, nil
}

// descriptorReserve is how many descriptors the connection cap leaves to
// everything else once the store is open: a journal segment being
// started and the directory fsync after it, a checkpoint's image, its
// temporary file and its directory, a backup, config.toml's atomic
// replacement, the listeners, and what the runtime and TLS open. The
// store holds a few at a time; 64 leaves it several times that.
const descriptorReserve = 64

// budgetConnections sets the connection cap: [server] max_connections, at
// most what RLIMIT_NOFILE leaves once descriptorReserve is kept, so a
// flood of connections can never take the descriptors a commit needs.
func (s *server) budgetConnections() error {
	d, err := wstransport.ConnectionsForDescriptors(descriptorReserve)
	if err != nil {
		return &configError{File: s.cfg.path, Field: "server.max_connections", Err: err}
	}
	max := d.Connections
	if want := s.cfg.Server.MaxConnections; want > 0 && want < max {
		max = want
	} else if want > max {
		s.log.Warn("server.max_connections lowered to what RLIMIT_NOFILE allows beside the store's descriptors",
			"configured", want, "max_connections", max, "rlimit_nofile", d.Limit, "open", d.Open, "reserved", d.Reserve)
	}
	s.conns, err = wstransport.NewConnBudget(max, "server.max_connections")
	if err != nil {
		return &configError{File: s.cfg.path, Field: "server.max_connections", Err: err}
	}
	s.log.Info("connection budget", "max_connections", max, "rlimit_nofile", d.Limit, "open", d.Open, "reserved", d.Reserve,
		"max_sessions_per_principal", s.cfg.Server.MaxSessionsPerPrincipal, "idle_timeout", s.cfg.idleTimeout().String())
	return nil
}

// listen serves h on addr (key names the configuration's field).
func (s *server) listen(addr, key string, h http.Handler, tlsConf *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &configError{File: s.cfg.path, Field: key, Err: err}
	}
	// Below TLS: the HTTP server must see the *tls.Conn.
	ln = s.conns.Listen(ln, tlsConf == nil)
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	// No WriteTimeout: a WebSocket session lives long (wstransport bounds
	// each of its writes itself). ReadHeaderTimeout also bounds a
	// connection that sends nothing, and a TLS handshake.
	idle := s.cfg.idleTimeout()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: min(idle, 10*time.Second), IdleTimeout: idle,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.servers = append(s.servers, srv)
	s.listeners = append(s.listeners, ln)
	s.log.Info("listening", "key", key, "addr", ln.Addr().String(), "tls", tlsConf != nil)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.failed <- fmt.Errorf("%s %s: %w", key, ln.Addr(), err)
		}
	}()
	return nil
}

// readyz answers 200 while the store is open and advertises its
// capability and, in cluster mode, while a leader is known and this node
// has caught up; 503 with the cause otherwise.
func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case s.store == nil:
		http.Error(w, "unavailable: "+s.cause.Error(), http.StatusServiceUnavailable)
	case !slices.Contains(s.store.Capabilities(), statestore.Capability):
		http.Error(w, fmt.Sprintf("unavailable: the store does not advertise %s (state %v)", statestore.Capability, s.store.Stats().State), http.StatusServiceUnavailable)
	default:
		if why := s.clusterUnready(); why != "" {
			http.Error(w, "unavailable: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	}
}

// startLine is what serve prints once it listens (its --json form).
type startLine struct {
	URL      string `json:"url"`      // the WebSocket endpoint, ws[s]://ADDR/ws
	Endpoint string `json:"endpoint"` // ws[s]://ADDR, as clients are given it
	State    string `json:"state"`    // "open" or "unavailable"
	Cause    string `json:"cause"`    // why the store is unavailable; "" when open
	Version  string `json:"version"`
	Metrics  string `json:"metrics"` // http[s]://ADDR/metrics, or ""
	Page     string `json:"page"`    // the inspector page, or ""
}

func (s *server) printStart(w io.Writer, asJSON bool) error {
	ws, web := "ws", "http"
	if s.tls {
		ws, web = "wss", "https"
	}
	addr := s.listeners[0].Addr().String()
	st := startLine{Endpoint: ws + "://" + addr, URL: ws + "://" + addr + "/ws", State: "open", Version: s.version}
	if s.store == nil {
		st.State, st.Cause = "unavailable", s.cause.Error()
	}
	if len(s.listeners) > 1 {
		st.Metrics = web + "://" + s.listeners[1].Addr().String() + "/metrics"
	}
	if s.cfg.Inspector {
		st.Page = web + "://" + addr + "/"
	}
	if asJSON {
		return json.NewEncoder(w).Encode(st)
	}
	_, err := fmt.Fprintf(w, "kpstate serving %s (store %s, version %s)\n", st.URL, st.State, st.Version)
	return err
}

// reload rereads the configuration and applies its principals; anything
// else that changed is logged as needing a restart. A file that does not
// load changes nothing.
func (s *server) reload() {
	next, err := loadConfig(s.cfg.path)
	if err != nil {
		s.log.Error("reload refused: the configuration does not load; nothing changed", "err", err)
		return
	}
	if changed := s.cfg.restartFields(next); len(changed) > 0 {
		s.log.Warn("reload: these keys changed and need a restart; they keep their running values", "keys", changed)
	}
	if err := s.table.Replace(next.tokenPrincipals()); err != nil {
		s.log.Error("reload refused: nothing changed", "err", err)
		return
	}
	h := s.ins.Transport()
	// Before SetPrincipal: a handshake that the old table authenticated
	// and that starts serving after this authenticates again.
	h.Reauthenticate()
	now := map[string]principalConfig{}
	for _, p := range next.Principals {
		now[p.ID] = p
	}
	var removed, changed []string
	for _, old := range s.cfg.Principals {
		p, kept := now[old.ID]
		switch {
		case !kept:
			removed = append(removed, old.ID)
			if s.store != nil {
				// Its watches close AUTHORIZATION_LOST, and its sessions can
				// neither read nor write until EndSessions ends them.
				s.store.SetPrincipal(old.ID, statestore.Principal{}, true)
			}
			ended := h.EndSessions(old.ID, errors.New("removed from the server's configuration"))
			s.log.Info("reload: principal removed; its sessions ended", "principal", old.ID, "sessions", ended)
		case p.Admin != old.Admin:
			changed = append(changed, old.ID)
			closed := 0
			if s.store != nil {
				closed = s.store.SetPrincipal(old.ID, statestore.Principal{ID: p.ID, Admin: p.Admin}, false)
			}
			s.log.Info("reload: principal's admin flag changed; its sessions go on", "principal", old.ID, "admin", p.Admin, "watches_closed", closed)
		}
	}
	added := len(next.Principals) - (len(s.cfg.Principals) - len(removed))
	s.cfg.Principals = next.Principals
	s.log.Info("principals reloaded", "principals", len(next.Principals), "added", added, "removed", removed, "admin_changed", changed)
}

// shutdown stops accepting, ends the WebSocket sessions (their watches
// removed), lets plain HTTP requests finish, and closes the store.
func (s *server) shutdown() error {
	var errs []error
	for _, ln := range s.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.log.Info("stopped accepting connections")
	if s.ins != nil {
		n := s.ins.Transport().Sessions()
		s.ins.Close()
		s.log.Info("WebSocket sessions ended, their watches removed", "sessions", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.log.Info("HTTP servers shut down")
	if err := s.closeStore(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *server) closeStore() error {
	if s.store == nil {
		return nil
	}
	err := s.store.Close()
	if err != nil {
		s.log.Error("store close", "err", err)
	} else {
		s.log.Info("store closed")
	}
	return err
}
