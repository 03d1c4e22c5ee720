package reconcile_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// TestRemoteTransientFailureIsRetried: a Subscribe lost at the HTTP level
// (the connection closes before any answer) is a failed command, not an
// invalid intent; the viewer retries it while it keeps failing, and binds
// once the server answers again, although no capability changed, because
// the Remote's Changed closes at its first answer after a failure.
func TestRemoteTransientFailureIsRetried(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	sim := mediasim.New()
	readySource(t, sim)
	const key = "subscriptions/front-door"
	putIntent(t, st, alice, userNS, key, subscribeIntent(out720), 0)

	var healed atomic.Bool
	dropped := make(chan struct{}, 64)
	api := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/subscribe" || healed.Load() {
			api.ServeHTTP(w, r)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err) // httptest's HTTP/1.1 server always hijacks
		}
		conn.Close()
		select {
		case dropped <- struct{}{}:
		default: // the test reads the first two
		}
	}))
	viewer := startViewer(t, st, sim, viaHTTP(t, srv, alice.ID))

	ev := viewer.waitFor(reconcile.EventCommandError, key)
	var re *mediasim.RequestError
	if !errors.As(ev.Err, &re) || re.Op != "Subscribe" || re.URL != srv.URL+"/v1/subscribe" {
		t.Fatalf("command error %v, want a RequestError naming Subscribe at %s", ev.Err, srv.URL)
	}
	for i := 0; i < 2; i++ { // the first attempt, and a retry that failed too
		select {
		case <-dropped:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d Subscribe attempts reached the server, want a retry after the first", i)
		}
	}
	if s, _ := status(t, st, userNS, "alice-browser", "front-door"); s.State != reconcile.Failed || !strings.Contains(s.Reason, srv.URL) {
		t.Fatalf("status while Subscribe fails at the HTTP level: %+v, want Failed naming %s", s, srv.URL)
	}

	healed.Store(true)
	viewer.waitFor(reconcile.EventBound, key)
	viewer.noneSeen(reconcile.EventRejected)
	// The lost attempts never reached the simulator: one Subscribe, bound.
	if got, want := callsBy(sim, alice.ID), []string{"Subscribe " + out720}; !reflect.DeepEqual(got, want) {
		t.Fatalf("alice sent %v, want %v", got, want)
	}
	if b := bindingsOf(sim, alice.ID); len(b) != 1 || b[0].VariantID != out720 {
		t.Fatalf("bindings %+v", b)
	}
	if s, _ := status(t, st, userNS, "alice-browser", "front-door"); s.State != reconcile.Active {
		t.Fatalf("status after the server answered again: %+v", s)
	}
}
