package wstransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
)

// Authenticator maps an HTTP request (a bearer token, a cookie, a client
// certificate) to the principal its session runs as. A non-nil error
// refuses the request with 401 before the upgrade; its message is the
// response body, so it must not echo a secret.
type Authenticator interface {
	Authenticate(r *http.Request) (statestore.Principal, error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (statestore.Principal, error)

// Authenticate calls f(r).
func (f AuthenticatorFunc) Authenticate(r *http.Request) (statestore.Principal, error) { return f(r) }

// Options configure a Handler. Zero fields take the defaults.
type Options struct {
	// Authenticator decides every request's principal. Required.
	Authenticator Authenticator
	// OriginPatterns lists the other origins allowed to connect (see the
	// package comment); the request's own host is always allowed.
	OriginPatterns []string
	// MaxMessageBytes bounds one client message (default
	// framing.DefaultMaxFrameBytes, the wire protocol's frame bound).
	MaxMessageBytes int64
	// WriteTimeout bounds one server message's write (default 10 s); a
	// peer that does not take it in time is disconnected.
	WriteTimeout time.Duration
	// Ended, when set, is called after each session ended and its watches
	// were removed, with the principal and Serve's error (nil at a clean
	// close by the peer).
	Ended func(p statestore.Principal, err error)
}

// DefaultWriteTimeout is Options.WriteTimeout's default: long enough for a
// 65,536-byte snapshot on a slow mobile link, short enough that a stalled
// peer does not hold its session for long.
const DefaultWriteTimeout = 10 * time.Second

// OptionError is an Options field out of its range.
type OptionError struct {
	Field   string
	Message string
}

// Error names the field.
func (e *OptionError) Error() string { return "wstransport: Options." + e.Field + ": " + e.Message }

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Authenticator == nil:
		return o, &OptionError{"Authenticator", "required: every session needs an authenticated principal"}
	case o.MaxMessageBytes < 0:
		return o, &OptionError{"MaxMessageBytes", fmt.Sprintf("%d is negative", o.MaxMessageBytes)}
	case o.WriteTimeout < 0:
		return o, &OptionError{"WriteTimeout", fmt.Sprintf("%v is negative", o.WriteTimeout)}
	}
	for _, p := range o.OriginPatterns {
		if _, err := path.Match(p, ""); err != nil {
			return o, &OptionError{"OriginPatterns", fmt.Sprintf("pattern %q: %v", p, err)}
		}
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = framing.DefaultMaxFrameBytes
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	return o, nil
}

// Handler is an http.Handler that upgrades each accepted request to a
// WebSocket and serves one dispatcher session on it. It is safe for
// concurrent use.
type Handler struct {
	srv  *dispatch.Server
	opts Options

	base context.Context // cancelled by Close: ends every session
	stop context.CancelFunc

	mu       sync.Mutex
	closed   bool
	sessions int
	wg       sync.WaitGroup
}

// NewHandler returns a Handler serving srv's sessions.
func NewHandler(srv *dispatch.Server, opts Options) (*Handler, error) {
	if srv == nil {
		return nil, &OptionError{"srv", "nil dispatch.Server"}
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(context.Background())
	return &Handler{srv: srv, opts: opts, base: base, stop: stop}, nil
}

// Sessions returns the number of sessions being served.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions
}

// Close ends every session (status 1001, going away), answers later
// requests 503, and returns once every session's watches are removed.
// http.Server.Shutdown does not do this: it forgets upgraded connections.
func (h *Handler) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.stop()
	h.wg.Wait()
	return nil
}

// begin counts a new session, or reports that the Handler is closed.
func (h *Handler) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.sessions++
	h.wg.Add(1)
	return true
}

func (h *Handler) end() {
	h.mu.Lock()
	h.sessions--
	h.mu.Unlock()
	h.wg.Done()
}

// ServeHTTP checks the origin (403) and the credentials (401), upgrades,
// and serves the session until the connection ends.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r, h.opts.OriginPatterns); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	p, err := h.opts.Authenticator.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keeppeek-statestore"`)
		http.Error(w, "wstransport: not authenticated: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if !h.begin() {
		http.Error(w, "wstransport: the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.end()
	// The origin was checked above, with the same rule Accept applies.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept wrote the response
	}
	c.SetReadLimit(h.opts.MaxMessageBytes)
	ctx, cancel := context.WithCancel(h.base)
	defer cancel()
	conn := newConn(ctx, c, h.opts.WriteTimeout, h.opts.MaxMessageBytes)
	err = h.srv.Serve(ctx, p, conn)
	if serr := conn.failed(); serr != nil && errors.Is(err, context.Canceled) {
		// A failed send cancels the session, so Serve reports the
		// cancellation; the send is the cause.
		err = serr
	}
	if h.base.Err() != nil {
		err = nil // the Handler closed it; not the session's fault
	}
	if h.opts.Ended != nil {
		h.opts.Ended(p, err)
	}
}

// OriginError is a browser request from an origin the Handler does not
// allow.
type OriginError struct{ Origin string }

// Error names the origin.
func (e *OriginError) Error() string {
	return fmt.Sprintf("wstransport: origin %q is not allowed (Options.OriginPatterns)", e.Origin)
}

func checkOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return &OriginError{origin}
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	host := u.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, p := range patterns {
		for _, s := range []string{u.Host, host} {
			if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(s)); ok {
				return nil
			}
		}
	}
	return &OriginError{origin}
}
