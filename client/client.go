package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wirestore"
)

// ErrClosed is returned by every call after Client.Close (and by a Watch's
// Next after its Close).
var ErrClosed = errors.New("client: closed")

// HandshakeError is a server that refused the WebSocket upgrade: 401 with
// its authenticator's message (the response body), 403 for a refused
// origin, 503 while it shuts down.
type HandshakeError struct {
	Endpoint string // as configured
	Status   int    // the HTTP status
	Reason   string // the response body (at most 1 KiB), trimmed
}

// Error names the endpoint, the status and the server's reason.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("client: %s refused the WebSocket handshake: HTTP %d %s: %s",
		e.Endpoint, e.Status, http.StatusText(e.Status), e.Reason)
}

// refusesCredentials reports whether retrying soon cannot help: the
// credentials (401) or the origin (403) were refused.
func (e *HandshakeError) refusesCredentials() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// DialError is an endpoint that could not be reached or did not complete
// the handshake (connection refused, TLS verification, a timeout).
type DialError struct {
	Endpoint string // as configured
	Err      error
}

// Error names the endpoint and the cause.
func (e *DialError) Error() string { return fmt.Sprintf("client: dial %s: %v", e.Endpoint, e.Err) }

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }

// InfoError is an Info request the server did not answer with its
// document.
type InfoError struct {
	URL    string
	Status int    // the HTTP status, 0 when no response came
	Reason string // the response body (at most 1 KiB), trimmed
	Err    error  // the transport or decoding error, if any
}

// Error names the URL and the status or cause.
func (e *InfoError) Error() string {
	if e.Status != 0 && e.Status != http.StatusOK {
		return fmt.Sprintf("client: GET %s: HTTP %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Reason)
	}
	return fmt.Sprintf("client: GET %s: %v", e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *InfoError) Unwrap() error { return e.Err }

// Info is the server's /api/info document.
type Info struct {
	Available    bool            `json:"available"`
	Cause        string          `json:"cause"`
	Capabilities []string        `json:"capabilities"`
	Principal    string          `json:"principal"`
	Namespaces   []NamespaceInfo `json:"namespaces"`
	Version      string          `json:"version"`
}

// NamespaceInfo is one namespace the principal may read.
type NamespaceInfo struct {
	Name     string `json:"name"`
	Revision uint64 `json:"revision"`
	Entries  int    `json:"entries"`
	Bytes    int64  `json:"bytes"`
}

// Client is one principal's connection to a state-store server. It is
// safe for concurrent use; requests are pipelined on one connection.
type Client struct {
	cfg       settings
	transport *http.Transport
	http      *http.Client
	header    http.Header

	life    context.Context // cancelled by Close: ends dials in progress
	stop    context.CancelFunc
	closing chan struct{} // closed by Close
	wg      sync.WaitGroup

	requestIDs atomic.Uint64 // the last request_id used
	watchIDs   atomic.Uint64 // the last watch id used by a Watch

	mu      sync.Mutex
	closed  bool
	cur     *conn         // nil while disconnected
	ready   chan struct{} // closed once cur is set
	last    *endpoint     // the endpoint of cur, or of the connection last lost
	lastErr error         // why the last connection or attempt failed
	links   []*Linked
}

// Dial checks cfg and connects to the first endpoint that answers, trying
// each in turn once. It returns a *ConfigError for a bad Config, a
// *HandshakeError at once for a refused handshake (401 or 403: another
// endpoint would refuse the same credentials), else the last endpoint's
// error (*HandshakeError or *DialError). ctx bounds Dial only; each
// handshake also has DialTimeout.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	s, err := cfg.check()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: s, closing: make(chan struct{}), ready: make(chan struct{}), header: http.Header{}}
	if s.Token != "" {
		c.header.Set("Authorization", "Bearer "+s.Token)
	}
	c.transport = &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: s.TLS.Clone(),
		TLSHandshakeTimeout: s.DialTimeout, IdleConnTimeout: time.Minute}
	c.http = &http.Client{Transport: c.transport}
	c.life, c.stop = context.WithCancel(context.Background())
	for i := range s.endpoints {
		cn, derr := c.dial(ctx, i)
		if derr == nil {
			c.install(cn)
			return c, nil
		}
		err = derr
		var he *HandshakeError
		if errors.As(err, &he) && he.refusesCredentials() || ctx.Err() != nil {
			break
		}
	}
	c.stop()
	c.transport.CloseIdleConnections()
	return nil, err
}

// dial performs one handshake with endpoint i.
func (c *Client) dial(ctx context.Context, i int) (*conn, error) {
	ep := &c.cfg.endpoints[i]
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, ep.ws, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: c.header})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HandshakeError{Endpoint: ep.name, Status: resp.StatusCode, Reason: readReason(resp.Body)}
		}
		return nil, &DialError{Endpoint: ep.name, Err: err}
	}
	ws.SetReadLimit(maxMessageBytes)
	return newConn(c, i, ws), nil
}

// readReason returns the start of a refusal's body. The WebSocket library
// keeps the first 1 KiB of a failed handshake's body for this.
func readReason(body io.ReadCloser) string {
	if body == nil {
		return ""
	}
	defer body.Close()
	b, _ := io.ReadAll(io.LimitReader(body, maxReasonBytes))
	return strings.TrimSpace(string(b))
}

// install makes cn the current connection and starts its goroutines;
// false when the client closed meanwhile (cn is then dropped).
func (c *Client) install(cn *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cn.ws.CloseNow()
		cn.stop()
		return false
	}
	c.cur, c.last, c.lastErr = cn, cn.ep, nil
	close(c.ready)
	// Reconnected is queued before the connection's reader starts, so a
	// Link hears it before any message of the new connection.
	for _, k := range c.links {
		if !k.up {
			k.up = true
			k.push(linkItem{reconnected: true})
		}
	}
	c.wg.Add(2)
	go cn.read()
	go cn.ping()
	c.cfg.Logger.Info("state store connected", "endpoint", cn.ep.name)
	return true
}

// lost is called by cn's reader once cn has ended and every call and
// watch on it has been told; it tells the Links (after the last message
// of cn, which the same reader delivered) and starts reconnecting.
func (c *Client) lost(cn *conn, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.cfg.Logger.Warn("state store connection lost", "endpoint", cn.ep.name, "cause", cause)
	for _, k := range c.links {
		if k.up {
			k.up = false
			k.push(linkItem{disconnected: true})
		}
	}
	c.wg.Add(1)
	go c.reconnect(cn.index)
}

// detach clears cn as the current connection, so that no new call picks
// it; calls made from now on wait for the next one.
func (c *Client) detach(cn *conn, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == cn {
		c.cur, c.ready, c.lastErr = nil, make(chan struct{}), cause
	}
}

// reconnect dials the endpoints round-robin, starting after the one that
// failed, with exponential backoff and full jitter, until one answers or
// the client closes. A refused handshake (401, 403) is retried at
// MaxBackoff: the operator may be rotating tokens.
func (c *Client) reconnect(failed int) {
	defer c.wg.Done()
	n := len(c.cfg.endpoints)
	delays := backoff{ceiling: c.cfg.MinBackoff, max: c.cfg.MaxBackoff, draw: rand.Int64N}
	var fixed time.Duration // MaxBackoff after a refusal
	for attempt := 1; ; attempt++ {
		wait := fixed
		if wait == 0 {
			wait = delays.next()
		}
		timer := time.NewTimer(wait)
		select {
		case <-c.closing:
			timer.Stop()
			return
		case <-timer.C:
		}
		i := (failed + attempt) % n
		cn, err := c.dial(c.life, i)
		if err == nil {
			c.install(cn)
			return
		}
		if c.life.Err() != nil {
			return
		}
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		fixed = 0
		var he *HandshakeError
		if errors.As(err, &he) && he.refusesCredentials() {
			fixed = c.cfg.MaxBackoff
			c.cfg.Logger.Error("state store refused the credentials; retrying", "endpoint", he.Endpoint,
				"status", he.Status, "reason", he.Reason, "retry_in", fixed)
			continue
		}
		c.cfg.Logger.Warn("state store reconnection failed", "endpoint", c.cfg.endpoints[i].name, "attempt", attempt, "error", err)
	}
}

// backoff is the delay between reconnection attempts: exponential from
// MinBackoff, capped at MaxBackoff, with full jitter (each wait drawn
// uniformly from (0, ceiling]), so the clients of a server that dropped
// them all at once do not all come back at the same instant.
type backoff struct {
	ceiling, max time.Duration
	draw         func(n int64) int64 // uniform in [0, n): rand.Int64N; a test's own
}

// next returns the next wait and doubles the ceiling, up to max.
func (b *backoff) next() time.Duration {
	wait := time.Duration(b.draw(int64(b.ceiling)) + 1)
	b.ceiling = min(2*b.ceiling, b.max)
	return wait
}

// acquire returns the current connection, waiting for one up to ctx.
// timeout, when not nil, is the request's RequestTimeout (see request),
// which ends the wait as ctx's deadline would.
func (c *Client) acquire(ctx context.Context, timeout <-chan time.Time) (*conn, error) {
	for {
		c.mu.Lock()
		closed, cn, ready, lastErr := c.closed, c.cur, c.ready, c.lastErr
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cn != nil:
			return cn, nil
		}
		select {
		case <-ready:
		case <-c.closing:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, noConnection(c, lastErr, ctx.Err())
		case <-timeout:
			return nil, noConnection(c, lastErr, context.DeadlineExceeded)
		}
	}
}

// noConnection is acquire's failure: no connection before the deadline,
// whose cause is cause.
func noConnection(c *Client, lastErr, cause error) error {
	return &statestore.Error{Code: statestore.Unavailable, Field: "connection",
		Message: fmt.Sprintf("no connection to %s before the deadline (reconnecting; last error: %v)", c.endpointList(), lastErr),
		Err:     cause}
}

// connected returns the current connection, or fails at once while there
// is none (for the Link's watch calls, which the Link repeats once it
// hears Reconnected).
func (c *Client) connected() (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, ErrClosed
	case c.cur == nil:
		return nil, &statestore.Error{Code: statestore.Unavailable, Field: "connection",
			Message: fmt.Sprintf("not connected to %s (reconnecting; last error: %v)", c.endpointList(), c.lastErr)}
	}
	return c.cur, nil
}

func (c *Client) endpointList() string {
	names := make([]string, len(c.cfg.endpoints))
	for i, ep := range c.cfg.endpoints {
		names[i] = ep.name
	}
	return strings.Join(names, ", ")
}

// requestTimers are the timers that bound requests by RequestTimeout,
// reused from request to request: a context.WithTimeout per request cost
// five allocations (its context, timer and Done channel among them) and a
// cancellation hooked into the caller's context. A timer is put back
// stopped; since Go 1.23 a stopped timer delivers nothing stale, so the
// next request's Reset times it from its own start.
var requestTimers sync.Pool

// startRequestTimer returns a timer set to d.
func startRequestTimer(d time.Duration) *time.Timer {
	if t, ok := requestTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// stopRequestTimer stops t and keeps it for the next request.
func stopRequestTimer(t *time.Timer) {
	t.Stop()
	requestTimers.Put(t)
}

// request runs one request: it waits for a connection and the answer up
// to ctx, bounded by RequestTimeout (a timer, whose expiry is reported as
// ctx's deadline would be: context.DeadlineExceeded).
func (c *Client) request(ctx context.Context, build func(id uint64) *pb.ClientMessage) (*pb.StateStoreResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, &statestore.Error{Code: statestore.Unavailable, Field: "context", Message: err.Error(), Err: err}
	}
	t := startRequestTimer(c.cfg.RequestTimeout)
	defer stopRequestTimer(t)
	for {
		cn, err := c.acquire(ctx, t.C)
		if err != nil {
			return nil, err
		}
		rep, err := cn.call(ctx, t.C, build, nil, "")
		if errors.Is(err, errConnEnded) {
			continue // nothing was sent; the next connection takes it
		}
		if err != nil {
			return nil, err
		}
		res, err := rep.result()
		cn.retireOn(err)
		return res, err
	}
}

// Get reads the complete current entry (GetState).
func (c *Client) Get(ctx context.Context, namespace, key string) (statestore.Entry, error) {
	res, err := c.request(ctx, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: namespace, Key: key}}}
	})
	if err != nil {
		return statestore.Entry{}, err
	}
	return entryOf(res)
}

// Put atomically replaces or creates an entry (PutState) and returns it as
// committed. req.Expect is a blind write (the zero value),
// statestore.CreateOnly or statestore.IfRevision(n); req.TTL requests a
// lease, sent in whole milliseconds rounded up. If the connection is lost
// before the answer comes, the error is UNAVAILABLE (field "connection")
// and the write's outcome is unknown: it may have been applied, so reread
// (or retry with IfRevision) before assuming either.
func (c *Client) Put(ctx context.Context, req statestore.PutRequest) (statestore.Entry, error) {
	pm := &putMessage{}
	if err := wirestore.FillPutState(&pm.put, &pm.rev, 0, req); err != nil {
		return statestore.Entry{}, err // a negative TTL; nothing is sent
	}
	pm.oneof.PutState = &pm.put
	pm.msg.Message = &pm.oneof
	res, err := c.request(ctx, func(id uint64) *pb.ClientMessage {
		pm.put.RequestId = id
		return &pm.msg
	})
	if err != nil {
		return statestore.Entry{}, err
	}
	return entryOf(res)
}

// putMessage is a Put's request: the ClientMessage, its oneof wrapper,
// the PutState and its expected_revision, in one allocation instead of
// four. Each Put has its own, written before it is sent and only marshalled
// (conn.write) while the Put runs: nothing is pooled.
type putMessage struct {
	msg   pb.ClientMessage
	oneof pb.ClientMessage_PutState
	put   pb.PutState
	rev   uint64
}

// Delete removes an entry (DeleteState) and returns the namespace revision
// the deletion produced; req.Expect as in Put. A lost connection leaves
// the outcome unknown, as for Put.
func (c *Client) Delete(ctx context.Context, req statestore.DeleteRequest) (uint64, error) {
	res, err := c.request(ctx, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_DeleteState{DeleteState: wirestore.DeleteState(id, req)}}
	})
	if err != nil {
		return 0, err
	}
	r, ok := res.GetResult().(*pb.StateStoreResult_DeletedRevision)
	if !ok {
		return 0, unexpected("DeleteState", res)
	}
	return r.DeletedRevision, nil
}

func entryOf(res *pb.StateStoreResult) (statestore.Entry, error) {
	e := res.GetEntry()
	if e == nil {
		return statestore.Entry{}, unexpected("the request", res)
	}
	return wire.StoreEntry(e), nil
}

// unexpected is an answer of the wrong kind: a server bug, reported as
// UNAVAILABLE so that callers retry or give up as for any server fault.
func unexpected(what string, res *pb.StateStoreResult) error {
	return &statestore.Error{Code: statestore.Unavailable, Field: "answer",
		Message: fmt.Sprintf("the server answered %s (request_id %d) with %T", what, res.GetRequestId(), res.GetResult())}
}

// Info asks the current endpoint (the last one while reconnecting) for
// its /api/info document, with the bearer token.
func (c *Client) Info(ctx context.Context) (Info, error) {
	c.mu.Lock()
	closed, ep := c.closed, c.last
	c.mu.Unlock()
	if closed {
		return Info{}, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	u := ep.http + InfoPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Info{}, &InfoError{URL: u, Err: err}
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return Info{}, &InfoError{URL: u, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Info{}, &InfoError{URL: u, Status: resp.StatusCode, Reason: readReason(resp.Body)}
	}
	var info Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMessageBytes)).Decode(&info); err != nil {
		return Info{}, &InfoError{URL: u, Status: resp.StatusCode, Err: fmt.Errorf("decode the document: %w", err)}
	}
	return info, nil
}

// Endpoint returns the endpoint of the current connection, as configured
// (while reconnecting, that of the connection last lost).
func (c *Client) Endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.name
}

// Close ends the connection with a normal closure (the server removes the
// session's watches), stops reconnecting and every Link's deliveries, and
// returns once the client's goroutines have ended. Calls in flight and
// every later call return ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.stop()
	cn := c.cur
	c.cur = nil
	links := c.links
	c.links = nil
	c.mu.Unlock()
	if cn != nil {
		// The closing handshake is bounded by the WebSocket library's own
		// timeout, so an unresponsive server cannot hold Close.
		cn.ws.Close(websocket.StatusNormalClosure, "client closed")
	}
	for _, k := range links {
		k.halt()
	}
	c.wg.Wait()
	c.transport.CloseIdleConnections()
	return nil
}
