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
	"unicode/utf8"

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
	// MessageTimeout bounds the arrival of a client message once its
	// first frame header has come (default DefaultMessageTimeout): a peer
	// that announces a message (up to 2^63 bytes, says the header) and
	// stops sending is disconnected.
	MessageTimeout time.Duration
	// MaxSessionsPerPrincipal bounds the sessions one principal is served
	// at once (default DefaultMaxSessionsPerPrincipal): one more is refused
	// 429 naming the bound, before the upgrade, so one principal's
	// reconnecting clients cannot take every connection of the server.
	MaxSessionsPerPrincipal int
	// Started, when set, is called when a session begins serving, after
	// the upgrade, with its principal.
	Started func(p statestore.Principal)
	// Ended, when set, is called after each session ended and its watches
	// were removed, with the principal and Serve's error (nil at a clean
	// close by the peer or when the Handler was closed; an *EndedError
	// when EndSessions or Reauthenticate ended it).
	Ended func(p statestore.Principal, err error)
}

// DefaultWriteTimeout is Options.WriteTimeout's default: long enough for a
// 65,536-byte snapshot on a slow mobile link, short enough that a stalled
// peer does not hold its session for long.
const DefaultWriteTimeout = 10 * time.Second

// DefaultMessageTimeout is Options.MessageTimeout's default: the write
// timeout's, for the same slow link the other way.
const DefaultMessageTimeout = DefaultWriteTimeout

// DefaultMaxSessionsPerPrincipal is Options.MaxSessionsPerPrincipal's
// default: room for a fleet of a principal's workers (the 127 sessions of
// internal/wsfanout) with a margin for reconnections, and a quarter of
// the connections a 1,024-descriptor process can hold.
const DefaultMaxSessionsPerPrincipal = 256

// BoundSessionsPerPrincipal is Options.MaxSessionsPerPrincipal as a
// refusal names it.
const BoundSessionsPerPrincipal = "sessions per principal"

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
	case o.MessageTimeout < 0:
		return o, &OptionError{"MessageTimeout", fmt.Sprintf("%v is negative", o.MessageTimeout)}
	case o.MaxSessionsPerPrincipal < 0:
		return o, &OptionError{"MaxSessionsPerPrincipal", fmt.Sprintf("%d is negative", o.MaxSessionsPerPrincipal)}
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
	if o.MessageTimeout == 0 {
		o.MessageTimeout = DefaultMessageTimeout
	}
	if o.MaxSessionsPerPrincipal == 0 {
		o.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
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

	mu     sync.Mutex
	closed bool
	live   map[*liveSession]struct{}
	// perPrincipal counts live's sessions by principal ID.
	perPrincipal map[string]int
	// epoch counts the calls of Reauthenticate and EndSessions: a session
	// whose handshake was authenticated in an older epoch authenticates
	// again before it serves its first request.
	epoch uint64
	wg    sync.WaitGroup
}

// liveSession is one session being served, from the moment its handshake
// was accepted.
type liveSession struct {
	p      statestore.Principal
	cancel context.CancelCauseFunc
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
	return &Handler{srv: srv, opts: opts, base: base, stop: stop, live: map[*liveSession]struct{}{},
		perPrincipal: map[string]int{}}, nil
}

// Sessions returns the number of sessions being served.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.live)
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

// EndedError is why the Handler ended a session on purpose (EndSessions,
// or credentials that changed during its handshake): the session's Ended
// error, and the reason of its closing status 1008 (policy violation). It
// matches dispatch.ErrEnded, so what was queued for the session is sent
// before the connection closes.
type EndedError struct {
	Principal string // the session's principal ID
	Err       error  // the cause given
}

// Error names the principal and the cause.
func (e *EndedError) Error() string {
	return fmt.Sprintf("wstransport: the session of principal %q was ended: %v", e.Principal, e.Err)
}

// Unwrap returns dispatch.ErrEnded and the cause.
func (e *EndedError) Unwrap() []error { return []error{dispatch.ErrEnded, e.Err} }

// closeReason is the close frame's reason: at most the 123 bytes a close
// frame holds, cut at a character boundary.
func (e *EndedError) closeReason() string {
	s := fmt.Sprintf("principal %q: %v", e.Principal, e.Err)
	if len(s) <= maxCloseReason {
		return s
	}
	s = s[:maxCloseReason]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// maxCloseReason is the longest reason a close frame holds (RFC 6455
// 5.5: a control frame's payload is at most 125 bytes, 2 of them the
// status).
const maxCloseReason = 123

// EndSessions ends every session of principal id, with cause as their
// reason: each one's queued messages are sent first (call it after
// statestore.Store.SetPrincipal revoked id, and the peer reads the
// AUTHORIZATION_LOST closures before the end), then its connection is
// closed with status 1008. A handshake that was authenticated before the
// call and starts serving after it authenticates again first (see
// Reauthenticate): remove id's credentials from the Authenticator before
// calling, and no session of id survives the call. It returns how many
// sessions it ended.
func (h *Handler) EndSessions(id string, cause error) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	n := 0
	for ls := range h.live {
		if ls.p.ID == id {
			ls.cancel(&EndedError{Principal: id, Err: cause})
			n++
		}
	}
	return n
}

// Reauthenticate says the Authenticator's answers changed (a reload gave a
// principal other rights): every handshake authenticated before the call
// that has not yet served a request authenticates again before its first,
// and ends (EndedError, status 1008) if that gives another principal or a
// refusal; the peer reconnects. Call it after changing the Authenticator
// and before statestore.Store.SetPrincipal: the sessions already serving
// then have their store sessions open, and SetPrincipal reaches them.
func (h *Handler) Reauthenticate() {
	h.mu.Lock()
	h.epoch++
	h.mu.Unlock()
}

func (h *Handler) currentEpoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

// recheck runs before a session's first request: if the epoch moved since
// its handshake was authenticated, the request is authenticated again,
// and a changed answer ends the session.
func (h *Handler) recheck(r *http.Request, p statestore.Principal, epoch uint64) error {
	if h.currentEpoch() == epoch {
		return nil
	}
	now, err := h.opts.Authenticator.Authenticate(r)
	switch {
	case err != nil:
		return &EndedError{Principal: p.ID, Err: fmt.Errorf("its credentials were withdrawn during the handshake: %w", err)}
	case now != p:
		return &EndedError{Principal: p.ID, Err: errors.New("its rights changed during the handshake; reconnect")}
	}
	return nil
}

// errClosed refuses a session once the Handler is closed.
var errClosed = errors.New("wstransport: the server is shutting down")

// begin registers a new session: errClosed when the Handler is closed, a
// *ConnLimitError when its principal has all the sessions it may have.
func (h *Handler) begin(ls *liveSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	if n := h.perPrincipal[ls.p.ID]; n >= h.opts.MaxSessionsPerPrincipal {
		return &ConnLimitError{Bound: BoundSessionsPerPrincipal, Limit: h.opts.MaxSessionsPerPrincipal, Principal: ls.p.ID}
	}
	h.perPrincipal[ls.p.ID]++
	h.live[ls] = struct{}{}
	h.wg.Add(1)
	return nil
}

func (h *Handler) end(ls *liveSession) {
	h.mu.Lock()
	delete(h.live, ls)
	if h.perPrincipal[ls.p.ID]--; h.perPrincipal[ls.p.ID] == 0 {
		delete(h.perPrincipal, ls.p.ID)
	}
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
	epoch := h.currentEpoch()
	p, err := h.opts.Authenticator.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keeppeek-statestore"`)
		http.Error(w, "wstransport: not authenticated: "+err.Error(), http.StatusUnauthorized)
		return
	}
	ctx, cancel := context.WithCancelCause(h.base)
	defer cancel(nil)
	ls := &liveSession{p: p, cancel: cancel}
	if err := h.begin(ls); err != nil {
		status := http.StatusServiceUnavailable
		if !errors.Is(err, errClosed) {
			w.Header().Set("Retry-After", "1")
			status = http.StatusTooManyRequests
		}
		http.Error(w, err.Error(), status)
		return
	}
	defer h.end(ls)
	// The origin was checked above, with the same rule Accept applies.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept wrote the response
	}
	c.SetReadLimit(h.opts.MaxMessageBytes)
	conn := newConn(h.base, ctx, c, h.opts.WriteTimeout, h.opts.MessageTimeout, h.opts.MaxMessageBytes)
	defer conn.release()
	// Serve opens the store session before the first Recv: a principal
	// confirmed there is the one the store session runs as.
	conn.beforeFirst = func() error { return h.recheck(r, p, epoch) }
	if h.opts.Started != nil {
		h.opts.Started(p)
	}
	err = h.srv.Serve(ctx, p, conn)
	if serr := conn.failed(); serr != nil && errors.Is(err, context.Canceled) {
		// A failed send cancels the session, so Serve reports the
		// cancellation; the send is the cause.
		err = serr
	}
	var ended *EndedError
	switch {
	case errors.As(context.Cause(ctx), &ended):
		err = ended
	case errors.As(err, &ended):
	case h.base.Err() != nil:
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
