package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/promstats"
	"github.com/keeppeek/statestore/schema"
)

// stopContext is the context --metrics-listen serves until: cancelled by
// SIGINT or SIGTERM. A variable so a test can end the wait itself.
var stopContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// metricsAddr resolves --metrics-listen: a bare ":PORT" listens on the
// loopback interface only, so the demo never exposes a port to the network
// unless the operator names a host.
func metricsAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-listen %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// demoMetrics serves /metrics for whichever store the demo has open: the
// demo closes and reopens its store, and the collector follows it.
type demoMetrics struct {
	cur   atomic.Pointer[statestore.Store]
	fail  atomic.Pointer[statestore.Stats] // set when an Open failed
	srv   *http.Server
	ln    net.Listener
	serve chan error
}

// startMetrics listens on addr (see metricsAddr) and serves /metrics.
func startMetrics(addr string) (*demoMetrics, error) {
	addr, err := metricsAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	m := &demoMetrics{ln: ln, serve: make(chan error, 1)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New(m.stats))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { m.serve <- m.srv.Serve(ln) }()
	return m, nil
}

// URL is where the metrics are served.
func (m *demoMetrics) URL() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// opened points the collector at the outcome of an Open.
func (m *demoMetrics) opened(s *statestore.Store, err error) {
	if err != nil {
		st := statestore.FailedOpenStats(err)
		m.fail.Store(&st)
		return
	}
	m.fail.Store(nil)
	m.cur.Store(s)
}

func (m *demoMetrics) stats() statestore.Stats {
	if st := m.fail.Load(); st != nil {
		return *st
	}
	if s := m.cur.Load(); s != nil {
		return s.Stats()
	}
	// Scraped before the first Open returned.
	return statestore.Stats{State: statestore.StateClosed}
}

// linger keeps serving until ctx ends, with the demo's last store open
// and a worker renewing its lease in it every second (the specification's
// compare-and-set renewal), so commit and fdatasync metrics keep moving on
// a dashboard. The first renewal is done before the serving line is
// printed.
func (m *demoMetrics) linger(ctx context.Context, s *statestore.Store, out io.Writer) error {
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

// stop shuts the server down.
func (m *demoMetrics) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.serve; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// demoHooks let --metrics-listen follow the demo's stores. The zero value
// does nothing.
type demoHooks struct {
	opened func(*statestore.Store, error)
	// done runs at the end of the demo while its last store is still open.
	done func(*statestore.Store) error
}

func (h demoHooks) onOpen(s *statestore.Store, err error) {
	if h.opened != nil {
		h.opened(s, err)
	}
}

func (h demoHooks) onDone(s *statestore.Store) error {
	if h.done != nil {
		return h.done(s)
	}
	return nil
}
