package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	mediaintent "github.com/keeppeek/statestore/worker/intent"
	workerlease "github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// demoWorkerTTL is the demo transcoders' lease TTL, on a fake clock.
const demoWorkerTTL = 10 * time.Second

// Worker is scenario 4 against the simulated media server: a
// coordinator writes a publication intent; two transcoder workers race for
// its lease and one stays standby; the holder waits for the source's
// capability, starts the publication and writes observed status; then it
// stops renewing (a crash), its lease EXPIREs and the standby takes over.
// It runs in its own store (dir/worker-demo) on a fake clock, so the lease
// lapse costs no waiting and the printed sequence is always the same.
func Worker(dir string, out io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The workers' own schemas (lease and status documents), which
	// kpjournal's tools register too, so they can verify this store.
	reg := schema.NewRegistry()
	if err := reconcile.RegisterSchemas(reg); err != nil {
		return err
	}
	clk := clock.NewFake(time.UnixMilli(1_750_000_000_000))
	s, err := statestore.Open(statestore.Options{Dir: filepath.Join(dir, "worker-demo"), Clock: clk, Schemas: reg})
	if err != nil {
		return err
	}
	defer s.Close()
	sim := mediasim.New()
	const key = "intents/front-door-video-720p"
	fmt.Fprintf(out, "\ntranscoder workers on %s (simulated media server, fake clock, lease TTL %v)\n", demoNS, demoWorkerTTL)
	in := mediaintent.Intent{Role: mediaintent.Publish, Desired: true, SourceID: "front-door", MediaKind: mediaintent.Video,
		VariantID: "browser-h264-720p", OutputProfile: "browser-h264-720p", Priority: 100, RecordingMode: mediaintent.RecordingDisabled}
	coord := stateclient.As(s, statestore.Principal{ID: "coordinator-a", Admin: true})
	if _, err := mediaintent.Update(ctx, coord, reg, demoNS, key, 0, func(mediaintent.Intent, bool) (mediaintent.Intent, error) { return in, nil }); err != nil {
		return err
	}
	fmt.Fprintf(out, "coordinator-a writes %s: publish front-door video as browser-h264-720p\n", key)

	w1, err := startDemoWorker(ctx, s, reg, clk, sim, "transcoder-worker-1")
	if err != nil {
		return err
	}
	if err := w1.await(out, reconcile.EventClaimed, reconcile.EventWaiting); err != nil {
		return err
	}
	w2, err := startDemoWorker(ctx, s, reg, clk, sim, "transcoder-worker-2")
	if err != nil {
		return err
	}
	if err := w2.await(out, reconcile.EventStandby); err != nil {
		return err
	}
	fmt.Fprintln(out, "front-door connects and advertises profile browser-h264-720p")
	sim.Connect("front-door", mediasim.SourceSpec{Streams: []mediaintent.MediaKind{mediaintent.Video}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: "browser-h264-720p", Codec: "h264"}}})
	if err := w1.await(out, reconcile.EventBound); err != nil {
		return err
	}
	if err := printDemoStatus(ctx, s, reg, out, "transcoder-worker-1"); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s stops renewing (crash); the fake clock moves %v\n", w1.name, demoWorkerTTL)
	w1.stop()
	sim.EndPrincipal(w1.name)
	clk.Advance(demoWorkerTTL)
	if err := w2.await(out, reconcile.EventClaimed, reconcile.EventBound); err != nil {
		return err
	}
	if err := printDemoStatus(ctx, s, reg, out, "transcoder-worker-2"); err != nil {
		return err
	}
	w2.stop()
	return nil
}

type demoTranscoder struct {
	name   string
	events chan reconcile.Event
	cancel context.CancelFunc
	done   chan error
	conn   *stateclient.Local
}

func startDemoWorker(ctx context.Context, s *statestore.Store, reg *schema.Registry, clk clock.Clock, sim *mediasim.Server, name string) (*demoTranscoder, error) {
	w := &demoTranscoder{name: name, events: make(chan reconcile.Event, 256), done: make(chan error, 1)}
	r, err := reconcile.New(reconcile.Config{
		Namespace: demoNS, LeasePrefix: "leases/", Holder: name, Schemas: reg, Clock: clk,
		Capabilities: sim, Media: sim.Client(name), Lease: workerlease.Config{TTL: demoWorkerTTL},
		Observe: func(e reconcile.Event) { w.events <- e },
	})
	if err != nil {
		return nil, err
	}
	if w.conn, err = stateclient.Dial(s, statestore.Principal{ID: name, Admin: true}, r); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() { w.done <- r.Run(runCtx, w.conn) }()
	return w, nil
}

// await prints the worker's events of the given kinds, in that order,
// skipping the others it reports meanwhile.
func (w *demoTranscoder) await(out io.Writer, kinds ...reconcile.EventKind) error {
	for _, k := range kinds {
		for {
			select {
			case e := <-w.events:
				if e.Kind != k {
					continue
				}
				fmt.Fprintf(out, "  %s: %s\n", w.name, e)
			case err := <-w.done:
				return fmt.Errorf("%s stopped: %v", w.name, err)
			case <-time.After(10 * time.Second):
				return fmt.Errorf("%s: no %s event", w.name, k)
			}
			break
		}
	}
	return nil
}

func (w *demoTranscoder) stop() {
	w.cancel()
	<-w.done
	w.conn.Close()
}

func printDemoStatus(ctx context.Context, s *statestore.Store, reg *schema.Registry, out io.Writer, worker string) error {
	key := "status/" + worker + "/front-door-video-720p"
	e, err := s.Get(ctx, statestore.System(), demoNS, key)
	if err != nil {
		return err
	}
	st, err := reconcile.ParseStatus(reg, e.Document)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  observed status %s: %s, variant %s, publication %s\n", key, st.State, st.VariantID, st.BindingID)
	return nil
}
