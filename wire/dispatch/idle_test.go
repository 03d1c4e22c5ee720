package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/wire/dispatch"
)

// idleTimeout is short, so a test sees several timeouts pass.
const idleTimeout = 100 * time.Millisecond

// endsIdle waits for c's session to end and checks it ended idle.
func endsIdle(t *testing.T, c *client, since time.Time) {
	t.Helper()
	endsIdleAfter(t, c, since, idleTimeout)
}

// endsIdleAfter is endsIdle for a server whose IdleTimeout is timeout.
func endsIdleAfter(t *testing.T, c *client, since time.Time, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-c.served:
		var ie *dispatch.IdleError
		if !errors.As(err, &ie) || !errors.Is(err, dispatch.ErrIdle) || ie.Timeout != timeout {
			t.Fatalf("Serve = %v, want an IdleError naming %v", err, timeout)
		}
		if d := time.Since(since); d < timeout {
			t.Fatalf("ended %v after its last activity, before the %v timeout", d, timeout)
		}
	case <-time.After(hangGuard):
		t.Fatal("the idle session was not ended")
	}
}

// stillServed checks c's session is served for d more.
func stillServed(t *testing.T, c *client, d time.Duration) {
	t.Helper()
	select {
	case err := <-c.served:
		t.Fatalf("a busy session was ended: %v", err)
	case <-time.After(d):
	}
}

// TestIdleSessionsEnd: a session that receives nothing, runs nothing and
// watches nothing ends after Options.IdleTimeout; one that watches, or
// keeps sending requests, does not, and ends once it stops.
func TestIdleSessionsEnd(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	srv := dispatch.New(s, dispatch.Options{IdleTimeout: idleTimeout})
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		c := dial(t, srv, admin)
		endsIdle(t, c, time.Now())
	})
	t.Run("watching", func(t *testing.T) {
		t.Parallel()
		c := dial(t, srv, admin)
		wantSnapshot(t, c.call(watchReq(1, "w", "service/idle", "")), 1, "w")
		stillServed(t, c, 4*idleTimeout)
		c.call(unwatchReq(2, "w"))
		endsIdle(t, c, time.Now())
	})
	t.Run("requests", func(t *testing.T) {
		t.Parallel()
		// Its own server with a longer timeout: requests a tenth of it
		// apart keep the session busy even when a loaded machine delays
		// a tick several times over (at a third of 100 ms, one late
		// tick under -race ended the session in CI).
		const timeout = 600 * time.Millisecond
		c := dial(t, dispatch.New(s, dispatch.Options{IdleTimeout: timeout}), admin)
		tick := time.NewTicker(timeout / 10)
		defer tick.Stop()
		for i := range 25 { // two and a half timeouts' worth
			<-tick.C
			c.call(getReq(uint64(i+1), "service/idle", "k"))
		}
		endsIdleAfter(t, c, time.Now(), timeout)
	})
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		c := dial(t, dispatch.New(s, dispatch.Options{IdleTimeout: -1}), admin)
		stillServed(t, c, 4*idleTimeout)
		if err := c.close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestIdleUnavailableSessionsEnd: the bound holds without a store too.
func TestIdleUnavailableSessionsEnd(t *testing.T) {
	t.Parallel()
	c := dial(t, dispatch.NewUnavailable(errors.New("test: no store"), dispatch.Options{IdleTimeout: idleTimeout}), admin)
	endsIdle(t, c, time.Now())
}
