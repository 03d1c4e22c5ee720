package attack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The principals of every attack's server. Alice and Bob are ordinary
// users (each owns user/<id>), Service is a worker's principal without
// administrator rights (so service/<its id> is not its to write: nothing
// in a namespace's spelling grants anything), Admin is the operator, and
// Bystander is the session whose compare-and-sets must keep being answered.
const (
	Admin     = "ops"
	Alice     = "alice"
	Bob       = "bob"
	Service   = "transcoder-a"
	Bystander = "bystander"
)

// principals are the server's table, in the order Config documents.
var principals = []statestore.Principal{
	{ID: Admin, Admin: true}, {ID: Alice}, {ID: Bob}, {ID: Service}, {ID: Bystander},
}

// ConnBoundName is the connection cap as the server names it in a 503,
// kpstate's spelling.
const ConnBoundName = "server.max_connections"

// Config is one attack's server: kpstate serve's [server] settings, the
// store's limits and the Host allow-list. Zero fields take kpstate's
// defaults, except MaxConnections (see there).
type Config struct {
	// Dir holds the store. Required.
	Dir string
	// MaxConnections caps the server's connections ([server]
	// max_connections; default 4,096, under the test process's
	// descriptors: the cap derived from RLIMIT_NOFILE is kpstate's
	// business, pinned by its own tests).
	MaxConnections int
	// MaxSessionsPerPrincipal is wstransport.Options'.
	MaxSessionsPerPrincipal int
	// IdleTimeout bounds a connection that has not upgraded: its header
	// read and its idling between requests (default 30 s).
	IdleTimeout time.Duration
	// SessionIdleTimeout, MaxQueuedBytes are dispatch.Options' IdleTimeout
	// and MaxQueuedBytes.
	SessionIdleTimeout time.Duration
	MaxQueuedBytes     int64
	// MessageTimeout and MaxMessageBytes are wstransport.Options'.
	MessageTimeout  time.Duration
	MaxMessageBytes int64
	// Limits are the store's.
	Limits quota.Limits
	// AllowedHosts is kpstate's allowed_hosts.
	AllowedHosts []string
	// MemoryLimit, when positive, is the Go runtime's soft memory limit
	// while the server runs (kpstate's [server] memory_limit): the
	// collector then does not let the heap reach twice what is live. It is
	// the process's: set it in one attack at a time (the tests are not
	// parallel).
	MemoryLimit int64
	// SendBuffer, when positive, is every accepted connection's SO_SNDBUF:
	// the kernel then takes a few kilobytes of a stalled peer's answers
	// instead of its autotuned megabytes, so the process's own queue
	// (what the byte budget bounds) is what the stall fills. kpstate
	// leaves the kernel's default.
	SendBuffer int
}

// Server is a store served over loopback the way kpstate serve serves it:
// the Host allow-list before everything, the inspector's handler (ws and
// api/info, no page) with a PrincipalTable, the dispatch and transport
// options of [server], and every listener under a ConnBudget.
type Server struct {
	// Addr is the listener's host:port; URL its ws:// base (the client's
	// endpoint) and WSURL the session path.
	Addr, URL, WSURL string
	// Store is the store served; Faults its fault seams.
	Store  *statestore.Store
	Faults *fault.Hooks
	// Conns is the connection budget, Inspector the handler (its
	// Transport's Sessions and its Dispatcher's QueuedBytes).
	Conns     *wstransport.ConnBudget
	Inspector *inspector.Server
	// Config is the configuration it runs with, defaults filled in.
	Config Config

	tokens map[string]string
	http   *http.Server
	served chan error
	// memLimit is the limit before MemoryLimit's, restored by Close; -1
	// when none was set.
	memLimit int64
}

// Start opens a store in cfg.Dir and serves it on 127.0.0.1 at a free port.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, &ConfigError{Field: "Dir", Reason: "required"}
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 4096
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	reg, err := cliflag.Registry()
	if err != nil {
		return nil, err
	}
	s := &Server{Faults: &fault.Hooks{}, Config: cfg, tokens: map[string]string{}, served: make(chan error, 1), memLimit: -1}
	var entries []wstransport.TokenPrincipal
	for _, p := range principals {
		tok := newToken()
		s.tokens[p.ID] = tok
		entries = append(entries, wstransport.TokenPrincipal{Hash: wstransport.HashToken(tok), Principal: p})
	}
	table, err := wstransport.NewPrincipalTable(entries)
	if err != nil {
		return nil, err
	}
	hosts, err := wstransport.NewHostAllowList(cfg.AllowedHosts, "allowed_hosts")
	if err != nil {
		return nil, &ConfigError{Field: "AllowedHosts", Reason: err.Error()}
	}
	s.Conns, err = wstransport.NewConnBudget(cfg.MaxConnections, ConnBoundName)
	if err != nil {
		return nil, &ConfigError{Field: "MaxConnections", Reason: err.Error()}
	}
	s.Store, err = statestore.Open(statestore.Options{Dir: cfg.Dir, Limits: cfg.Limits, Schemas: reg, Faults: s.Faults, CheckpointBytes: -1})
	if err != nil {
		return nil, err
	}
	s.Inspector, err = inspector.New(inspector.Config{Store: s.Store, Auth: table, NoPage: true, Version: "attack",
		Dispatch: dispatch.Options{IdleTimeout: cfg.SessionIdleTimeout, MaxQueuedBytes: cfg.MaxQueuedBytes},
		Transport: wstransport.Options{MaxSessionsPerPrincipal: cfg.MaxSessionsPerPrincipal, MessageTimeout: cfg.MessageTimeout,
			MaxMessageBytes: cfg.MaxMessageBytes}})
	if err != nil {
		s.Store.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", s.Inspector)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Inspector.Close()
		s.Store.Close()
		return nil, err
	}
	s.Addr = ln.Addr().String()
	if cfg.SendBuffer > 0 {
		ln = sendBufferListener{ln.(*net.TCPListener), cfg.SendBuffer}
	}
	s.URL = "ws://" + s.Addr
	s.WSURL = s.URL + client.WebSocketPath
	s.http = &http.Server{Handler: hosts.Handler(mux), ReadHeaderTimeout: min(cfg.IdleTimeout, 10*time.Second), IdleTimeout: cfg.IdleTimeout}
	if cfg.MemoryLimit > 0 {
		s.memLimit = debug.SetMemoryLimit(cfg.MemoryLimit)
	}
	go func() { s.served <- s.http.Serve(s.Conns.Listen(ln, true)) }()
	return s, nil
}

// sendBufferListener sets SO_SNDBUF on what it accepts (Config.SendBuffer).
type sendBufferListener struct {
	*net.TCPListener
	n int
}

// Accept accepts a connection with the buffer set; one the kernel refuses
// it for is closed, so no connection escapes the setting.
func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	if err := c.SetWriteBuffer(l.n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Token returns principal id's bearer token ("" for one the server does
// not know).
func (s *Server) Token(id string) string { return s.tokens[id] }

// Bearer is the Authorization header of principal id.
func (s *Server) Bearer(id string) http.Header {
	return http.Header{"Authorization": {"Bearer " + s.tokens[id]}}
}

// Principal returns principal id as the server authenticates it.
func (s *Server) Principal(id string) statestore.Principal {
	for _, p := range principals {
		if p.ID == id {
			return p
		}
	}
	return statestore.Principal{}
}

// Dispatcher is the dispatcher behind the sessions.
func (s *Server) Dispatcher() *dispatch.Server { return s.Inspector.Dispatcher() }

// Close ends every session (their watches removed), stops the HTTP server
// and closes the store.
func (s *Server) Close() error {
	s.Inspector.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
		err = errors.Join(err, serr)
	}
	if s.memLimit >= 0 {
		debug.SetMemoryLimit(s.memLimit)
	}
	return errors.Join(err, s.Store.Close())
}

// ConfigError is a Config field Start refused.
type ConfigError struct {
	Field, Reason string
}

// Error names the field.
func (e *ConfigError) Error() string { return "attack.Config." + e.Field + ": " + e.Reason }

// dialOptions are a session's handshake as principal id.
func (s *Server) dialOptions(id string) wstransport.DialOptions {
	return wstransport.DialOptions{Header: s.Bearer(id)}
}

// isLoopback reports whether addr is a 127.0.0.1 address: the suite
// never dials anything else.
func isLoopback(addr string) bool { return strings.HasPrefix(addr, "127.0.0.1:") }
