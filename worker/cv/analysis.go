package cv

import (
	"context"
	"sync"

	"github.com/keeppeek/statestore/clock"
)

// analysis is one subscription's frames run through a model, on a
// goroutine of its own so a slow model never holds up the worker's loop
// (lease renewals, other intents). The loop starts it after a successful
// Subscribe and halts it before anything else it does to that
// subscription.
type analysis struct {
	target  Target
	model   Model
	sub     string // the subscription's ID
	session string // the source session it was made on
	variant string // the variant it actually got
	frames  <-chan Frame

	stop   chan struct{}      // closed by halt
	cancel context.CancelFunc // cancels a publication in flight at a halt
	done   chan struct{}      // closed when run has returned

	mu     sync.Mutex
	counts Counters
	over   bool // the frame stream closed: the subscription ended
}

// analysisEnv is what an analysis reaches outside itself.
type analysisEnv struct {
	ctx    context.Context
	media  Media
	clock  clock.Clock
	worker string // the Holder, written into every event
	poke   func() // wakes the worker's loop: counters moved or the stream ended
}

func startAnalysis(env analysisEnv, target Target, model Model, sub, session, variant string, frames <-chan Frame) *analysis {
	a := &analysis{target: target, model: model, sub: sub, session: session, variant: variant, frames: frames,
		stop: make(chan struct{}), done: make(chan struct{})}
	env.ctx, a.cancel = context.WithCancel(env.ctx)
	go a.run(env)
	return a
}

func (a *analysis) run(env analysisEnv) {
	defer close(a.done)
	for {
		// A halt wins over frames already queued: select alone would pick
		// between them at random.
		select {
		case <-a.stop:
			return
		default:
		}
		select {
		case <-a.stop:
			return
		case f, ok := <-a.frames:
			if !ok {
				a.mu.Lock()
				a.over = true
				a.mu.Unlock()
				env.poke()
				return
			}
			a.analyze(env, f)
			env.poke()
		}
	}
}

// analyze runs the model over one frame and publishes each detection that
// becomes a valid event. A detection that does not (a confidence out of
// range, a label carrying image data, a value JSON cannot hold) is
// counted, with why, and never leaves the worker.
func (a *analysis) analyze(env analysisEnv, f Frame) {
	c := Counters{Frames: 1}
	defer func() { a.add(c) }()
	for _, d := range a.model.Analyze(f) {
		if d.Confidence < a.target.MinConfidence {
			continue // NaN is not below anything: it goes on to be refused
		}
		doc, err := EncodeEvent(Event{SourceID: a.target.SourceID, MediaKind: a.target.MediaKind, VariantID: a.variant,
			Model: a.target.Model, Label: d.Label, Confidence: d.Confidence, Box: d.Box, Frame: f.Seq,
			ObservedAtMs: env.clock.Now().UnixMilli(), Worker: env.worker})
		if err != nil {
			c.EventsRejected++
			c.LastRejection = err.Error()
			continue
		}
		select {
		case <-a.stop:
			return // halting: nothing more is published
		default:
		}
		if err := env.media.PublishEvent(env.ctx, EventSchema, doc); err != nil {
			c.PublishFailures++
			continue
		}
		c.EventsPublished++
	}
}

func (a *analysis) add(c Counters) {
	a.mu.Lock()
	a.counts = a.counts.add(c)
	a.mu.Unlock()
}

// counters returns the analysis's totals so far.
func (a *analysis) counters() Counters {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts
}

// ended reports whether the subscription's frame stream closed.
func (a *analysis) ended() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.over
}

// halt stops the analysis and returns once it has: from then on it
// publishes nothing, and a publication in flight is cancelled rather than
// waited out. Called once, by the worker's loop.
func (a *analysis) halt() {
	close(a.stop)
	a.cancel()
	<-a.done
}
