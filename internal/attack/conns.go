package attack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/wire/wstransport"
)

func configureIdleConns(c *Config, sc Scale) {
	c.IdleTimeout = sc.ConnIdleTimeout
	c.MaxConnections = sc.IdleConns + 64
}

// idleConns is issue 31's first attack: connections without a token send
// one request for a static path, read the answer and idle. Each must be
// closed by the idle timeout (not before it), and the budget must hold
// only the bystander's afterwards.
func idleConns(ctx context.Context, e *Env) error {
	n, idleConnTimeout := e.Scale.IdleConns, e.Scale.ConnIdleTimeout
	conns := make([]*RawConn, n)
	answered := make([]time.Time, n) // when each sent its request
	var peak atomic.Int64
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32) // dialling concurrency: the listener's backlog is the kernel's
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := DialRaw(ctx, e.S.Addr, 0)
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			// Taken before the request: the server's idle clock starts
			// after it, so a close sooner than the timeout after this is
			// not the idle timeout's, however late this goroutine runs.
			answered[i] = time.Now()
			resp, err := c.Request("/healthz", "127.0.0.1", http.Header{})
			if err != nil || resp.Status != http.StatusOK {
				errs[i] = fmt.Errorf("idle connection %d: GET /healthz answered %v %v, want 200", i, resp, err)
			}
			for {
				a, p := int64(e.S.Conns.Active()), peak.Load()
				if a <= p || peak.CompareAndSwap(p, a) {
					break
				}
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var longest, shortest atomic.Int64
	shortest.Store(int64(time.Hour))
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.AwaitEOF(HangGuard); err != nil {
				errs[i] = fmt.Errorf("idle connection %d: %w", i, err)
				return
			}
			d := int64(time.Since(answered[i]))
			for l := longest.Load(); d > l && !longest.CompareAndSwap(l, d); l = longest.Load() {
			}
			for s := shortest.Load(); d < s && !shortest.CompareAndSwap(s, d); s = shortest.Load() {
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	e.Record("idle connections", "%d (at most %d held at once)", n, peak.Load())
	e.Record("closed after their request", "%v to %v (idle timeout %v)", time.Duration(shortest.Load()).Round(time.Millisecond),
		time.Duration(longest.Load()).Round(time.Millisecond), idleConnTimeout)
	if d := time.Duration(shortest.Load()); d < idleConnTimeout {
		return fmt.Errorf("an idle connection closed %v after its request, before the %v idle timeout: something else closed it", d, idleConnTimeout)
	}
	// The bystander's connection stays.
	if !pollUntil(HangGuard, func() bool { return e.S.Conns.Active() <= 1 }) {
		return fmt.Errorf("%d connections still counted after every idle one closed, want the bystander's 1", e.S.Conns.Active())
	}
	return nil
}

// Caps of the caps attack.
const (
	capConnections = 16
	capSessions    = 4
)

func configureCaps(c *Config, _ Scale) {
	c.MaxConnections = capConnections
	c.MaxSessionsPerPrincipal = capSessions
}

// caps fills one principal's sessions (the next is 429 naming the bound
// and the principal, another principal still gets one), then the server's
// connections (the next is 503 naming the bound).
func caps(ctx context.Context, e *Env) error {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for i := range capSessions {
		ss, err := e.S.DialSession(ctx, Alice)
		if err != nil {
			return fmt.Errorf("alice's session %d of %d: %w", i+1, capSessions, err)
		}
		closers = append(closers, ss.Close)
	}
	over, err := DialRaw(ctx, e.S.Addr, 0)
	if err != nil {
		return err
	}
	err = over.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token(Alice)))
	over.Close()
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests || !strings.Contains(se.Body, wstransport.BoundSessionsPerPrincipal) ||
		!strings.Contains(se.Body, `"`+Alice+`"`) || !strings.Contains(se.Body, fmt.Sprint(capSessions)) {
		return fmt.Errorf("alice's session %d: %v, want 429 naming %q, the principal and %d", capSessions+1, err, wstransport.BoundSessionsPerPrincipal, capSessions)
	}
	e.Record("429", "%s", strings.TrimSpace(se.Body))
	bob, err := e.S.DialSession(ctx, Bob)
	if err != nil {
		return fmt.Errorf("bob's first session while alice is at her cap: %w", err)
	}
	closers = append(closers, bob.Close)
	// Fill the rest with plain connections (kept alive, idle) until one is
	// refused: the refusal must come, and not before the cap is reached.
	for i := 0; ; i++ {
		if i > capConnections {
			return fmt.Errorf("%d connections held, none refused over the %d-connection cap", e.S.Conns.Active(), capConnections)
		}
		held := e.S.Conns.Active()
		c, err := DialRaw(ctx, e.S.Addr, 0)
		if err != nil {
			return err
		}
		closers = append(closers, c.Close)
		resp, err := c.Request("/healthz", "127.0.0.1", http.Header{})
		if err != nil {
			return fmt.Errorf("plain connection %d: %w", i, err)
		}
		if resp.Status == http.StatusOK {
			continue
		}
		if resp.Status != http.StatusServiceUnavailable || !strings.Contains(resp.Body, ConnBoundName) ||
			!strings.Contains(resp.Body, fmt.Sprintf("%d connections", capConnections)) {
			return fmt.Errorf("connection over the cap: HTTP %d %q, want 503 naming %s and %d", resp.Status, resp.Body, ConnBoundName, capConnections)
		}
		if held < capConnections {
			return fmt.Errorf("refused with %d connections held, under the %d cap", held, capConnections)
		}
		e.Record("503", "%s (after %d connections)", strings.TrimSpace(resp.Body), held)
		return nil
	}
}

// handshakes: a Host that is not allowed is 421 before anything looks at
// the token (with a valid token, with none, and a name that only looks
// loopback); a foreign Origin is 403 with a valid token; a wrong or
// missing token is 401. None opens a session.
func handshakes(ctx context.Context, e *Env) error {
	good := e.S.Token(Alice)
	cases := []struct {
		name   string
		host   string
		header http.Header
		want   int
		body   string
	}{
		{"rebound host, valid token", "evil.example", UpgradeHeader(good), http.StatusMisdirectedRequest, "evil.example"},
		{"rebound host, no token", "evil.example:8765", UpgradeHeader(""), http.StatusMisdirectedRequest, "allowed_hosts"},
		{"loopback look-alike", "127.0.0.1.example.net", UpgradeHeader(good), http.StatusMisdirectedRequest, "127.0.0.1.example.net"},
		{"foreign origin, valid token", "127.0.0.1", withHeader(UpgradeHeader(good), "Origin", "http://evil.example"), http.StatusForbidden, "evil.example"},
		{"wrong token", "127.0.0.1", UpgradeHeader("not-a-token"), http.StatusUnauthorized, wstransport.ErrUnknownToken.Error()},
		{"no token", "127.0.0.1", UpgradeHeader(""), http.StatusUnauthorized, wstransport.ErrNoToken.Error()},
		{"token of another server", "localhost", UpgradeHeader(newToken()), http.StatusUnauthorized, wstransport.ErrUnknownToken.Error()},
	}
	before := e.S.Inspector.Transport().Sessions()
	var errs []error
	for _, tc := range cases {
		c, err := DialRaw(ctx, e.S.Addr, 0)
		if err != nil {
			return err
		}
		err = c.Upgrade(tc.host, tc.header)
		c.Close()
		var se *StatusError
		if !errors.As(err, &se) || se.Status != tc.want || !strings.Contains(se.Body, tc.body) {
			errs = append(errs, fmt.Errorf("%s: %v, want HTTP %d naming %q", tc.name, err, tc.want, tc.body))
		}
		if strings.Contains(fmt.Sprint(err), good) {
			errs = append(errs, fmt.Errorf("%s: the refusal echoes the token", tc.name))
		}
	}
	if n := e.S.Inspector.Transport().Sessions(); n != before {
		errs = append(errs, fmt.Errorf("%d sessions after the refused handshakes, want %d", n, before))
	}
	e.Record("handshakes refused", "%d", len(cases))
	return errors.Join(errs...)
}

func withHeader(h http.Header, k, v string) http.Header {
	h.Set(k, v)
	return h
}
