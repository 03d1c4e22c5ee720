package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/promstats"
	"github.com/keeppeek/statestore/schema"
)

// MetricsAddr resolves --metrics-listen: a bare ":PORT" listens on the
// loopback interface only, so the demo never exposes a port to the network
// unless the operator names a host.
func MetricsAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-listen %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Metrics serves /metrics for whichever store the demo has open: the
// demo closes and reopens its store, and the collector follows it.
type Metrics struct {
	cur   atomic.Pointer[statestore.Store]
	fail  atomic.Pointer[statestore.Stats] // set when an Open failed
	srv   *http.Server
	ln    net.Listener
	serve chan error
}

// StartMetrics listens on addr (see MetricsAddr) and serves /metrics.
func StartMetrics(addr string) (*Metrics, error) {
	addr, err := MetricsAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	m := &Metrics{ln: ln, serve: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promstats.Handler(m.stats))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { m.serve <- m.srv.Serve(ln) }()
	return m, nil
}

// URL is where the metrics are served.
func (m *Metrics) URL() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// Opened points the collector at the outcome of an Open.
func (m *Metrics) Opened(s *statestore.Store, err error) {
	if err != nil {
		st := statestore.FailedOpenStats(err)
		m.fail.Store(&st)
		return
	}
	m.fail.Store(nil)
	m.cur.Store(s)
}

func (m *Metrics) stats() statestore.Stats {
	if st := m.fail.Load(); st != nil {
		return *st
	}
	if s := m.cur.Load(); s != nil {
		return s.Stats()
	}
	// Scraped before the first Open returned.
	return statestore.Stats{State: statestore.StateClosed}
}

// Linger keeps serving until ctx ends, with the demo's last store open
// and a worker renewing its lease in it every second (the specification's
// compare-and-set renewal), so commit and fdatasync metrics keep moving on
// a dashboard. The first renewal is done before the serving line is
// printed.
func (m *Metrics) Linger(ctx context.Context, s *statestore.Store, out io.Writer) error {
	w := statestore.Principal{ID: "transcoder-worker-2", Admin: true}
	renew := func() error {
		x := statestore.CreateOnly
		if cur, err := s.Get(ctx, w, demoNS, demoLeaseKey); err == nil {
			x = statestore.IfRevision(cur.Revision)
		} else if !errors.Is(err, statestore.ErrNotFound) {
			return err
		}
		_, err := s.Put(ctx, w, statestore.PutRequest{Namespace: demoNS, Key: demoLeaseKey, Schema: schema.MediaIntentV1,
			Document: intent("front-door", 100), Expect: x, TTL: 5 * time.Second})
		return err
	}
	if err := renew(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s renews its lease every second; serving metrics on %s until interrupted (Ctrl-C)\n", w.ID, m.URL())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := renew(); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// Stop shuts the server down.
func (m *Metrics) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.serve; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Hooks let a caller (--metrics-listen) follow the demo's stores. The zero
// value does nothing.
type Hooks struct {
	// Opened is told the outcome of every Open the demo makes.
	Opened func(*statestore.Store, error)
	// Done runs at the end of the demo while its last store is still open.
	Done func(*statestore.Store) error
}

func (h Hooks) onOpen(s *statestore.Store, err error) {
	if h.Opened != nil {
		h.Opened(s, err)
	}
}

func (h Hooks) onDone(s *statestore.Store) error {
	if h.Done != nil {
		return h.Done(s)
	}
	return nil
}
